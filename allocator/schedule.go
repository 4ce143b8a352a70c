package allocator

import (
	"slices"
	"time"
)

// A scheduling cycle, modelled on Kueue's scheduler.schedule, runs in
// numbered phases over the snapshot:
//
//  1. Heads: every queue offers its pending workloads in static order
//     (priority, Created, ID); the cycle merges the queues by the full
//     admission order (see Order), recomputing each queue's share after
//     every admission so that entry penalties reorder the rest of the
//     cycle.
//  2. Fit: the next workload is admitted on the first of its flavors
//     where it fits by quota (borrowing allowed) and by placement.
//  3. Preempt: otherwise its queue's automatic preemption policy may
//     name victims on the first flavor where that works (see preempt.go);
//     they are evicted and the workload admitted at once.
//  4. Skip: otherwise it stays pending and the cycle moves on
//     (BestEffortFIFO: it does not block the workloads behind it).
//  5. Requeue: victims become pending again at the end of the cycle, so
//     a cycle considers each workload at most once.
//
// Workloads with identical requirements (queue, GPUs, topology, pinned
// flavor) form a class. Within one cycle usage only grows until something
// is evicted, so once a class's head fails both fit and preemption, the
// rest of the class would fail too: the class is skipped until a
// preemption frees GPUs (or, for ReclaimWithinCohort Any, until another
// queue of the cohort admits work while borrowing, which adds candidates). The result is exactly that of
// trying every pending workload in turn, at a cost per cycle of the
// number of classes rather than the number of pending workloads.

type cycleState struct {
	cursor   []int32   // per class: members before it have been tried
	heaps    [][]int32 // per queue: classes with untried members, by head
	droppedL []int32   // classes skipped until the state changes
	deferred []int32   // victims, filed back as pending at the end
	cur      orderKey
}

// sink receives what a cycle does: by is the preemptor's slot for
// EventPreempted, -1 otherwise.
type sink func(kind EventKind, slot, by int32)

// Schedule runs one scheduling cycle at Now (mutating s): it admits
// pending work in Order, applying the queues' automatic preemption
// policies, and returns EventPreempted for victims (By = the preemptor)
// and EventAdmitted, in the order they happened.
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
	cy, pending := s.beginCycle()
	if !pending {
		return
	}
	for {
		slot, c, ok := s.nextPending(cy)
		if !ok {
			break
		}
		cy.cur = s.keyOf(slot)
		x := &s.ws[slot]
		cl := &s.classes[c]
		// Phase 2: fit.
		if cd, nodes, ok := s.fitClass(cl.cands, x.w.GPUs, int(x.q), x.w.Topology, x.w.ID); ok {
			s.admitNow(cy, slot, cd, nodes, emit)
			s.requeueClass(cy, c)
			continue
		}
		// Phase 3: preempt.
		if victims, cd, ok := s.autoPreempt(slot); ok && s.preemptAndAdmit(cy, slot, victims, cd, emit) {
			s.requeueClass(cy, c)
			s.undrop(cy, -1)
			continue
		}
		// Phase 4: skip this workload and the rest of its class.
		cy.cursor[c]++
		cy.droppedL = append(cy.droppedL, c)
	}
	// Phase 5: requeue the victims.
	for _, v := range cy.deferred {
		s.insertMember(s.ws[v].cls, v)
	}
	cy.deferred = cy.deferred[:0]
}

// beginCycle is phase 1. It reports whether anything is pending.
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
	cy.droppedL = cy.droppedL[:0]
	cy.deferred = cy.deferred[:0]
	if len(cy.heaps) != len(s.ix.queues) {
		cy.heaps = make([][]int32, len(s.ix.queues))
	}
	for q := range cy.heaps {
		cy.heaps[q] = cy.heaps[q][:0]
	}
	pending := false
	for c := range s.classes {
		if len(s.classes[c].members) > 0 {
			q := s.classes[c].key.q
			cy.heaps[q] = append(cy.heaps[q], int32(c))
			pending = true
		}
	}
	for q := range cy.heaps {
		h := cy.heaps[q]
		for i := len(h)/2 - 1; i >= 0; i-- {
			s.siftDown(cy, h, i)
		}
	}
	return cy, pending
}

// head returns class c's next untried member.
func (s *Snapshot) head(cy *cycleState, c int32) int32 {
	return s.classes[c].members[cy.cursor[c]]
}

func (s *Snapshot) headLess(cy *cycleState, a, b int32) bool {
	return s.staticCmp(&s.ws[s.head(cy, a)].w, &s.ws[s.head(cy, b)].w) < 0
}

func (s *Snapshot) siftDown(cy *cycleState, h []int32, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && s.headLess(cy, h[r], h[l]) {
			m = r
		}
		if !s.headLess(cy, h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (s *Snapshot) pushClass(cy *cycleState, c int32) {
	q := s.classes[c].key.q
	h := append(cy.heaps[q], c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.headLess(cy, h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	cy.heaps[q] = h
}

// nextPending pops the next workload in admission order.
func (s *Snapshot) nextPending(cy *cycleState) (int32, int32, bool) {
	bestQ := -1
	var best orderKey
	for q, h := range cy.heaps {
		if len(h) == 0 {
			continue
		}
		k := s.keyOf(s.head(cy, h[0]))
		if bestQ < 0 || cmpKey(&k, &best) < 0 {
			bestQ, best = q, k
		}
	}
	if bestQ < 0 {
		return 0, 0, false
	}
	h := cy.heaps[bestQ]
	c := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	if len(h) > 0 {
		s.siftDown(cy, h, 0)
	}
	cy.heaps[bestQ] = h
	return s.head(cy, c), c, true
}

func (s *Snapshot) requeueClass(cy *cycleState, c int32) {
	if int(cy.cursor[c]) < len(s.classes[c].members) {
		s.pushClass(cy, c)
	}
}

// advance moves class c's cursor past the members that the cycle has
// already passed: those ordered before cy.cur with the queue's share now.
func (s *Snapshot) advance(cy *cycleState, c int32) {
	cl := &s.classes[c]
	sh := s.share(int(cl.key.q))
	rest := cl.members[cy.cursor[c]:]
	passed := func(m int32) bool {
		w := &s.ws[m].w
		k := orderKey{prio: s.oprio(w), share: sh, created: w.Created, id: w.ID}
		return cmpKey(&k, &cy.cur) <= 0
	}
	// Usually few members have been passed: gallop from the cursor, then
	// search between the last passed probe and the first unpassed one.
	lo, hi := 0, 1
	for hi <= len(rest) && passed(rest[hi-1]) {
		lo, hi = hi, 2*hi
	}
	hi = min(hi-1, len(rest))
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if passed(rest[m]) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	cy.cursor[c] += int32(lo)
}

// undrop makes skipped classes eligible again after the state changed in
// their favour: all of them (cohort < 0) after a preemption freed GPUs,
// or those of reclaim-Any queues in the cohort where a queue started
// borrowing.
func (s *Snapshot) undrop(cy *cycleState, cohort int) {
	keep := cy.droppedL[:0]
	for _, c := range cy.droppedL {
		q := int(s.classes[c].key.q)
		if cohort >= 0 && (s.ix.queues[q].cohort != cohort || s.ix.queues[q].reclaim != polAny) {
			keep = append(keep, c)
			continue
		}
		s.advance(cy, c)
		s.requeueClass(cy, c)
	}
	cy.droppedL = keep
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
	a := &Admission{Flavor: s.ix.flavors[f].name, At: s.now}
	if s.lean {
		return a
	}
	a.Nodes = make([]string, len(nodes))
	for i, n := range nodes {
		a.Nodes[i] = s.ix.nodes[n].name
	}
	return a
}

// admitNow admits slot and applies the fair-sharing entry penalty.
func (s *Snapshot) admitNow(cy *cycleState, slot int32, c cand, nodes []int32, emit sink) {
	s.admit(slot, c, nodes, s.newAdmission(int(c.f), nodes))
	emit(EventAdmitted, slot, -1)
	x := &s.ws[slot]
	q := int(x.q)
	if p := s.penalty(x.w.GPUs); p > 0 {
		if cy != nil {
			// Members of q's skipped classes ordered before this workload
			// have been passed; fix that before q's share grows.
			for _, d := range cy.droppedL {
				if int(s.classes[d].key.q) == q {
					s.advance(cy, d)
				}
			}
		}
		s.usage[q] += p
	}
	if cy != nil {
		if co := s.ix.queues[q].cohort; co >= 0 && s.ix.cohorts[co].reclaimAny && s.borrowing(q, int(c.f)) {
			s.undrop(cy, co)
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

// preemptAndAdmit evicts victims and admits slot on c. If slot does not
// fit after all (it should), it puts everything back and returns false.
func (s *Snapshot) preemptAndAdmit(cy *cycleState, slot int32, victims []int32, c cand, emit sink) bool {
	saved := make([]evicted, len(victims))
	for i, v := range victims {
		x := &s.ws[v]
		saved[i] = evicted{slot: v, c: cand{f: x.fl, pods: int32(len(x.nodes)), per: x.per}, nodes: x.nodes, a: x.w.Admission}
		s.unadmit(v, false)
	}
	x := &s.ws[slot]
	var nodes []int32
	if s.fitsQuota(int(x.q), int(c.f), x.w.GPUs, true) {
		nodes = s.place(c, x.w.Topology, x.w.ID)
	}
	if nodes == nil {
		for i := len(saved) - 1; i >= 0; i-- {
			e := saved[i]
			s.admit(e.slot, e.c, e.nodes, e.a)
		}
		return false
	}
	for _, v := range victims {
		emit(EventPreempted, v, slot)
	}
	if cy != nil {
		cy.deferred = append(cy.deferred, victims...)
	} else {
		for _, v := range victims {
			s.insertMember(s.ws[v].cls, v)
		}
	}
	s.admitNow(cy, slot, c, nodes, emit)
	return true
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
	s.now = t
}
