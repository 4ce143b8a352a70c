package allocator

import (
	"slices"
	"time"
)

// The GPU-only engine: the same cycles as the general engine
// (kueue_cycle.go, whose comment is the definition), for the clusters
// that use only GPU quotas, cohorts of one level without quota of their
// own, classical preemption and Kueue's default flavorFungibility (see
// simpleCluster), with the arithmetic of one cohort level (quota.go)
// and the preemption search's caches (preempt.go, shadow.go). Tests hold
// it to the general engine (reference_test.go).
//
// Workloads with identical requirements (queue, GPUs, topology, pinned
// flavor) form a class; each queue keeps its classes with untried
// members in a heap by their first member, so a cycle's heads are the
// heaps' tops. A class whose head is inadmissible is dropped (the rest
// could only fail the same way) until quota is released, when every
// class starts again from its first member, or, for a queue that
// reclaims, until a queue of its cohort admits work while borrowing. A
// cycle costs its heads, so Schedule costs about the number of distinct
// requirements rather than of pending workloads.

type cycleState struct {
	cursor   []int32   // per class: members before it were tried
	dropped  []bool    // per class
	downs    []int32   // one head a cycle: the dropped classes, in no order
	heaps    [][]int32 // per queue: live classes with untried members, by head
	heads    []fentry
	undrop   []int  // cohorts where a queue admitted while borrowing
	wake     []bool // scratch: per queue, its dropped classes live again
	released bool   // quota was released (a preemption) this cycle
	relFl    []bool // on these flavors
	reserved []reservation
	// one: the AdmissionFairSharing and FirstComeFirstServed modes take
	// one head a cycle, in the global order; cur is the last one's place.
	one      bool
	cur      orderKey
	deferred []int32    // one head a cycle: victims, pending again at the end
	memo     []failMemo // one head a cycle: per class, its last failure (failmemo.go)
	hk       []headKey  // per class in a heap: its head's order, as of its last move there
}

// headKey is a class's head's place in its queue's order (staticCmp):
// the heaps compare these instead of reading the heads' slots.
type headKey struct {
	prio  int32 // oprio
	crNs  int32
	crSec int64
	slot  int32
}

type fentry struct {
	q    int
	c    int32
	n    nomination
	peek bool // the class is still at the top of its queue's heap
}

// sink receives what a cycle does: by is the preemptor's slot for
// EventPreempted, -1 otherwise.
type sink func(kind EventKind, slot, by int32)

// Schedule runs admission cycles at Now (mutating s) until no queue
// offers a workload that could be admitted: Kueue's scheduling cycles,
// in which each queue offers its next pending workload, the heads are
// ordered, and each is admitted if it fits, after preempting the victims
// its queue's policy finds if it needs to, or else waits without
// blocking the ones behind it (see kueue_cycle.go). It returns
// EventPreempted for victims (By = the preemptor) and EventAdmitted, in
// the order they happened.
func (s *Snapshot) Schedule() []Event {
	var out []Event
	s.schedule(func(k EventKind, slot, by int32) { out = append(out, s.event(k, slot, by)) })
	s.ver++
	return out
}

func (s *Snapshot) event(k EventKind, slot, by int32) Event {
	x := &s.ws[slot]
	e := Event{Kind: k, ID: x.w.ID, At: s.now}
	if k == EventAdmitted {
		e.Admission = copyAdmission(x.w.Admission)
	}
	if by >= 0 {
		e.By = s.ws[by].w.ID
	}
	return e
}

func (s *Snapshot) schedule(emit sink) {
	if !s.ix.simple {
		s.scheduleGeneral(emit)
		return
	}
	cy, pending := s.beginCycle()
	if !pending {
		return
	}
	one := cy.one
	preempted := map[int32]bool{}
	for range 4*s.workloadCount() + 64 {
		// 1. Heads.
		heads := cy.heads[:0]
		if one {
			// The first head in the global order: the queues' tops
			// compared by their recorded keys (cmpKey's order; a top's
			// key is current, see refreshHead) and their queues' shares.
			bq := -1
			var best *headKey
			var bestSh float64
			for q, h := range cy.heaps {
				if len(h) == 0 {
					continue
				}
				k, sh := &cy.hk[h[0]], s.share(q)
				if bq < 0 || s.headKeyCmp(k, sh, best, bestSh) < 0 {
					bq, best, bestSh = q, k, sh
				}
			}
			if bq >= 0 {
				c := cy.heaps[bq][0]
				if s.memoHit(cy, c) {
					// The head is known to fail: the cycle's only
					// effect is its class's drop (see memoHit).
					s.dropTop(cy, bq, c)
					continue
				}
				heads = append(heads, fentry{q: bq, c: c, peek: true})
			}
		} else {
			for q, h := range cy.heaps {
				if len(h) > 0 {
					heads = append(heads, fentry{q: q, c: s.popClass(cy, q)})
				}
			}
		}
		cy.heads = heads
		if len(heads) == 0 {
			break
		}
		// 2. Nominate (one head a cycle, a head the memo knows to fail
		// was dropped above).
		failed := -1 // one head a cycle: the head to remember as failed
		for i := range heads {
			slot := s.head(cy, heads[i].c)
			n := s.nominateFast(slot)
			if one && !s.ix.noFailMemo && (n.noFit() || (!n.fit && len(n.targets) == 0)) {
				failed = i
			}
			heads[i].n = n
		}
		// 3. Order.
		if !one && len(heads) > 1 {
			slices.SortFunc(heads, func(a, b fentry) int {
				return s.classicalCmp(&gentry{n: a.n}, &gentry{n: b.n})
			})
		}
		// 4. Admit.
		clear(preempted)
		for i := range heads {
			if one {
				cy.cur = s.keyOf(heads[i].n.slot)
			}
			s.processFast(cy, &heads[i], preempted, emit)
		}
		// 5. Release, and the heads' classes back in their heaps.
		for _, r := range cy.reserved {
			s.reserveGPUs(r.q, r.f, -int(r.v[ResourceGPU]))
		}
		cy.reserved = cy.reserved[:0]
		if failed >= 0 {
			// Remembered after the quota it held is given back: the
			// state is the one it failed in, with the counters moved.
			h := &heads[failed]
			x := &s.ws[h.n.slot]
			s.memoFailure(&cy.memo[h.c], &s.classes[h.c], int(x.q), &x.w)
		}
		s.endCycle(cy)
	}
	for _, v := range cy.deferred {
		s.insertMember(s.ws[v].cls, v)
	}
	cy.deferred = cy.deferred[:0]
}

// memoHit reports whether the head of class c, the first in the global
// order (one head a cycle), is known by its class's failure memo to fail
// its nomination (failmemo.go).
func (s *Snapshot) memoHit(cy *cycleState, c int32) bool {
	if s.ix.noFailMemo {
		return false
	}
	if len(cy.memo) < len(s.classes) {
		cy.memo = append(cy.memo, make([]failMemo, len(s.classes)-len(cy.memo))...)
	}
	slot := s.head(cy, c)
	x := &s.ws[slot]
	return s.memoFails(&cy.memo[c], &s.classes[c], int(x.q), &x.w)
}

// dropTop is a whole cycle (one head a cycle) whose head, class c's at
// the top of queue q's heap, is known to fail: a failed nomination
// without a reservation (the memo's nomination is none), so the cycle
// holds no quota, admits, releases and remembers nothing, and its only
// effect is step 4's drop of the class and step 5's removal of it from
// its heap. The cycle's head does not become cy.cur: the last head is
// read only by resume, which runs only at the end of a cycle that
// admitted (a release or a borrowing admission), whose own head is then
// the last.
func (s *Snapshot) dropTop(cy *cycleState, q int, c int32) {
	cy.cursor[c]++
	cy.dropped[c] = true
	cy.downs = append(cy.downs, c)
	s.popClass(cy, q)
}

// beginCycle builds the queues' heaps. It reports whether anything is
// pending.
func (s *Snapshot) beginCycle() (*cycleState, bool) {
	s.cycleNo++
	if s.cycleNo%16 == 0 {
		s.pruneShadows(s.cycleNo)
	}
	sc := s.scratchBuf()
	if sc.cyc == nil {
		sc.cyc = &cycleState{}
	}
	cy := sc.cyc
	n := len(s.classes)
	cy.cursor = slices.Grow(cy.cursor[:0], n)[:n]
	clear(cy.cursor)
	cy.dropped = slices.Grow(cy.dropped[:0], n)[:n]
	clear(cy.dropped)
	cy.downs = cy.downs[:0]
	cy.undrop, cy.released, cy.reserved = cy.undrop[:0], false, cy.reserved[:0]
	if len(cy.relFl) != len(s.ix.flavors) {
		cy.relFl = make([]bool, len(s.ix.flavors))
	}
	clear(cy.relFl)
	cy.one, cy.cur, cy.deferred = s.ix.fair || s.ix.fcfs, orderKey{}, cy.deferred[:0]
	if len(cy.heaps) != len(s.ix.queues) {
		cy.heaps = make([][]int32, len(s.ix.queues))
	}
	cy.hk = slices.Grow(cy.hk[:0], n)[:n]
	return cy, s.fillHeaps(cy)
}

// fillHeaps puts every class with untried members in its queue's heap.
func (s *Snapshot) fillHeaps(cy *cycleState) bool {
	for q := range cy.heaps {
		cy.heaps[q] = cy.heaps[q][:0]
	}
	pending := false
	for c := range s.classes {
		if !cy.dropped[c] && int(cy.cursor[c]) < len(s.classes[c].members) {
			q := s.classes[c].key.q
			cy.heaps[q] = append(cy.heaps[q], int32(c))
			s.refreshHead(cy, int32(c))
			pending = true
		}
	}
	for q := range cy.heaps {
		h := cy.heaps[q]
		for i := len(h)/2 - 1; i >= 0; i-- {
			s.siftDown(cy, h, i)
		}
	}
	return pending
}

// endCycle is step 5: after a release every class that may use the
// flavor starts again from its first member (one head a cycle: every
// such dropped class from its first member after the last head); otherwise the heads' classes that are
// still live go back into their heaps, and the dropped classes of queues
// that reclaim in a cohort where a queue started or went on borrowing
// are live again.
func (s *Snapshot) endCycle(cy *cycleState) {
	if cy.released && !cy.one {
		for c := range s.classes {
			if s.onReleased(cy.relFl, int32(c)) {
				cy.cursor[c], cy.dropped[c] = 0, false
			}
		}
		clear(cy.relFl)
		cy.released = false
		s.fillHeaps(cy)
	} else {
		for _, h := range cy.heads {
			if h.peek {
				s.fixTop(cy, h.q)
			} else {
				s.requeueClass(cy, h.c)
			}
		}
	}
	if cy.released {
		// One head a cycle (the case above handles the others): the
		// dropped classes are listed, and the order in which they go
		// back into their heaps does not matter (headLess is a total
		// order, so a heap's top is the same).
		s.resumeDowns(cy, func(c int32) bool { return s.onReleased(cy.relFl, c) })
		clear(cy.relFl)
		cy.released = false
	}
	if len(cy.undrop) > 0 {
		wake := cy.wake[:0]
		for range s.ix.queues {
			wake = append(wake, false)
		}
		for _, co := range cy.undrop {
			for _, q := range s.ix.cohorts[co].queues {
				wake[q] = s.ix.queues[q].reclaim != polNever
			}
		}
		if cy.one {
			s.resumeDowns(cy, func(c int32) bool { return wake[s.classes[c].key.q] })
		} else {
			for c := range s.classes {
				if cy.dropped[c] && wake[s.classes[c].key.q] {
					s.resume(cy, int32(c))
				}
			}
		}
		cy.wake = wake
	}
	cy.undrop = cy.undrop[:0]
}

// resumeDowns makes the dropped classes for which wake holds live again
// (one head a cycle), keeping the others listed.
func (s *Snapshot) resumeDowns(cy *cycleState, wake func(int32) bool) {
	kept := cy.downs[:0]
	for _, c := range cy.downs {
		if wake(c) {
			s.resume(cy, c)
		} else {
			kept = append(kept, c)
		}
	}
	cy.downs = kept
}

// onReleased reports whether class c may use one of the flavors rel
// marks: a release elsewhere cannot change what it can do, except under
// Kueue's Fair Sharing, where it changes the shares.
func (s *Snapshot) onReleased(rel []bool, c int32) bool {
	if s.ix.fs != nil {
		// Under Kueue's Fair Sharing a release on any flavor changes the
		// dominant shares, which decide preemption on every flavor.
		return true
	}
	for _, k := range s.classes[c].cands {
		if rel[k.f] {
			return true
		}
	}
	return false
}

// resume makes dropped class c live again: from its cursor, or, one head
// a cycle, from its first member after the last head.
func (s *Snapshot) resume(cy *cycleState, c int32) {
	cy.dropped[c] = false
	if cy.one {
		cy.cursor[c] = int32(s.firstAfter(c, &cy.cur, int(cy.cursor[c])))
	}
	s.requeueClass(cy, c)
}

// firstAfter is the index of class c's first member ordered after key
// (in the admission order now), or from if that is later: the members
// are in that order, so the search gallops up from from (a resumed
// class's first member after the last head is mostly at or near its
// cursor) and reads no member before it.
func (s *Snapshot) firstAfter(c int32, key *orderKey, from int) int {
	cl := &s.classes[c]
	sh := s.share(int(cl.key.q))
	after := func(i int) bool {
		x := &s.ws[cl.members[i]]
		mk := orderKey{prio: s.oprio(&x.w), share: sh, crSec: x.crSec, crNs: x.crNs, id: x.w.ID}
		return cmpKey(&mk, key) > 0
	}
	n := len(cl.members)
	if from >= n || after(from) {
		return from
	}
	// members[lo] is not after key; find hi with members[hi] after it
	// (or the end), doubling the step.
	lo, step := from, 1
	hi := lo + step
	for hi < n && !after(hi) {
		lo, step = hi, 2*step
		hi = lo + step
	}
	hi = min(hi, n)
	// The first member after key is in (lo, hi].
	for lo+1 < hi {
		m := int(uint(lo+hi) >> 1)
		if after(m) {
			hi = m
		} else {
			lo = m
		}
	}
	return hi
}

// head returns class c's next untried member.
func (s *Snapshot) head(cy *cycleState, c int32) int32 {
	return s.classes[c].members[cy.cursor[c]]
}

// processFast is step 4 for one head (see processEntry).
func (s *Snapshot) processFast(cy *cycleState, e *fentry, preempted map[int32]bool, emit sink) {
	n := &e.n
	slot := n.slot
	x := &s.ws[slot]
	q := int(x.q)
	if n.noFit() || (!n.fit && len(n.targets) == 0) {
		// One head a cycle, there is no later head in the cycle to
		// hold the quota back from, and it would be given back at the
		// cycle's end: it is not held. (Holding it only moved the
		// flavor's borrowing counters, which undid failure memos and
		// reclaim-miss caches of a state that had not changed.)
		if !n.noFit() && s.ix.queues[q].reclaim != polAny && !cy.one {
			f := int(s.classes[x.cls].cands[n.ci].f)
			if v := int(n.reserve[ResourceGPU]); v > 0 {
				s.reserveGPUs(q, f, v)
				cy.reserved = append(cy.reserved, reservation{q: q, f: f, v: n.reserve})
			}
		}
		cy.cursor[e.c]++
		cy.dropped[e.c] = true
		if cy.one {
			cy.downs = append(cy.downs, e.c)
		}
		return
	}
	for _, v := range n.targets {
		if preempted[v] || s.ws[v].fl < 0 {
			return // overlapping targets: tried again next cycle
		}
	}
	c := s.classes[x.cls].cands[n.ci]
	for _, v := range n.targets {
		s.vacate(v)
	}
	var nodes []int32
	if s.fitsQuota(q, int(c.f), x.w.GPUs, true) {
		nodes = s.place(c, x.w.Topology, x.w.ID)
	}
	for i := len(n.targets) - 1; i >= 0; i-- {
		s.occupy(n.targets[i])
	}
	if nodes == nil {
		return // no longer fits: tried again next cycle
	}
	for _, v := range n.targets {
		s.unadmit(v, !cy.one)
		if cy.one {
			cy.deferred = append(cy.deferred, v)
		}
		emit(EventPreempted, v, slot)
		preempted[v] = true
	}
	if len(n.targets) > 0 {
		cy.released = true
		cy.relFl[c.f] = true
	}
	s.admitNow(cy, slot, c, nodes, emit)
}

// reserveGPUs holds back (v > 0) or gives back (v < 0) v GPUs of queue
// q's quota on flavor f for the rest of a cycle (Kueue's capacity held
// for a head that needs preemption but found no targets).
func (s *Snapshot) reserveGPUs(q, f, v int) {
	was := s.borrowing(q, f)
	s.addUsed(q, f, v)
	s.running[q] -= v // not running: the usage decay does not see it
	if s.borrowing(q, f) != was {
		s.flipGen[f]++
	}
	s.reclaimGen[f]++
}

// fitClass finds the first flavor where gpus GPUs of queue q fit by quota
// and placement, and the nodes; id names the workload (see place).
func (s *Snapshot) fitClass(cands []cand, gpus, q int, topo Level, id string) (cand, []int32, bool) {
	for _, c := range cands {
		f := int(c.f)
		if c.never || gpus > s.fl[f].free || !s.fitsQuota(q, f, gpus, true) {
			continue
		}
		if nodes := s.place(c, topo, id); nodes != nil {
			return c, nodes, true
		}
	}
	return cand{}, nil, false
}

func (s *Snapshot) newAdmission(f int, nodes []int32) *Admission {
	if s.lean {
		if len(s.admSlab) == 0 {
			s.admSlab = make([]Admission, admSlabSize)
		}
		a := &s.admSlab[0]
		s.admSlab = s.admSlab[1:]
		a.Flavor, a.At = s.ix.flavors[f].name, s.now
		return a
	}
	a := &Admission{Flavor: s.ix.flavors[f].name, At: s.now}
	a.Nodes = make([]string, len(nodes))
	for i, n := range nodes {
		a.Nodes[i] = s.ix.nodes[n].name
	}
	return a
}

// admSlabSize is how many admissions a lean snapshot allocates at a
// time (an estimate simulation makes about 14 000 on the benchmark's
// cluster).
const admSlabSize = 512

// admitNow admits slot and applies the fair-sharing entry penalty; in a
// cycle (cy set) an admission while borrowing makes the classes of the
// cohort's reclaiming queues live again at the cycle's end.
func (s *Snapshot) admitNow(cy *cycleState, slot int32, c cand, nodes []int32, emit sink) {
	s.admit(slot, c, nodes, s.newAdmission(int(c.f), nodes))
	emit(EventAdmitted, slot, -1)
	x := &s.ws[slot]
	q := int(x.q)
	if p := s.penalty(x.w.GPUs); p > 0 {
		s.usage[q] += p
	}
	if cy != nil {
		if co := s.ix.queues[q].cohort; co >= 0 && s.ix.cohorts[co].reclaimers && s.borrowing(q, int(c.f)) {
			cy.undrop = append(cy.undrop, co)
		}
	}
}

// penalty is the FairSharing entry penalty in GPU-hours for gpus GPUs.
func (s *Snapshot) penalty(gpus int) float64 {
	if !s.ix.fair || s.c.Policy.EntryPenalty <= 0 {
		return 0
	}
	return float64(gpus) * s.c.Policy.EntryPenalty.Hours()
}

type evicted struct {
	slot  int32
	c     cand
	nodes []int32
	a     *Admission
}

// accrue advances Now to t, accruing every queue's decayed usage for the
// GPUs it has admitted. Times before Now are ignored.
func (s *Snapshot) accrue(t time.Time) {
	if !t.After(s.now) {
		return
	}
	dt := t.Sub(s.now)
	for q := range s.usage {
		s.usage[q] = DecayUsage(s.usage[q], s.running[q], dt, s.c.Policy.HalfLife)
	}
	s.now = wall(t)
}
