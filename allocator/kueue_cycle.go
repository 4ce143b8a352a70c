package allocator

import (
	"cmp"
	"slices"
	"strings"
)

// The general engine: Kueue v0.17's scheduling cycle
// (pkg/scheduler/scheduler.go, schedule), written plainly, for every
// cluster; the GPU-only engine (schedule.go) must agree with it on the
// clusters it handles (reference_test.go). One Schedule call runs
// cycles until no head is left:
//
//  1. Heads: each queue offers its first pending workload in its order
//     (priority, then Created) that has not been found inadmissible
//     since quota was last released (BestEffortFIFO: Kueue parks such
//     workloads until then). In the AdmissionFairSharing and
//     FirstComeFirstServed modes, which are not Kueue's, only the first
//     head in the global order is taken, so that work goes one at a time
//     in that order.
//  2. Nominate: every head gets its flavor assignment and preemption
//     targets on the snapshot as the cycle found it (kueue_assign.go).
//  3. Order: heads that fit without borrowing first, then by priority,
//     then arrival (Kueue's classicalIterator); with Kueue's Fair
//     Sharing, a tournament by dominant resource share at each pop
//     (kueue_fair.go).
//  4. Admit: in that order, a head that cannot fit is inadmissible; one
//     that needs preemption and has no targets holds back, for the rest
//     of the cycle, the quota it would take (unless its queue reclaims
//     with Any) and is inadmissible; one whose targets another head of
//     this cycle already preempted, or that no longer fits after the
//     heads before it, is tried again in the next cycle; otherwise its
//     targets are evicted (EventPreempted) and it is admitted
//     (EventAdmitted). Kueue admits a preemptor in a later cycle, once
//     its victims are gone; here at once.
//  5. Release: an eviction releases quota, so every inadmissible
//     workload is tried again (Kueue requeues them); victims are
//     pending again.
//
// A head found inadmissible drops its class (the workloads with the same
// requirements): those after it in its queue's order, of no higher
// priority and no earlier, could only fail the same way, so they are
// passed over until quota is released on one of its flavors (then the
// class is tried again from its first workload) or, for a queue that reclaims, until a queue
// of its cohort tree admits work while above its nominal quota (which
// adds candidates; under Fair Sharing any admission in the tree, which
// changes shares). Kueue would pass each of them in a cycle of its own.

type gentry struct {
	q int
	n nomination
}

type gstate struct {
	cursor   []int32 // per class: members before it were tried
	dropped  []bool  // per class
	byQueue  [][]int32
	reserved []reservation
	released bool   // quota was released this cycle
	relFl    []bool // on these flavors
	undrop   []int  // tree roots where reclaimers may have gained candidates
	one      bool   // one head a cycle, in the global order
	cur      orderKey
	deferred []int32 // one head a cycle: victims, pending again at the end
}

type reservation struct {
	q, f int
	v    resVec
}

func (s *Snapshot) newGState() *gstate {
	st := &gstate{
		cursor:  make([]int32, len(s.classes)),
		dropped: make([]bool, len(s.classes)),
		byQueue: make([][]int32, len(s.ix.queues)),
		relFl:   make([]bool, len(s.ix.flavors)),
	}
	for c := range s.classes {
		q := s.classes[c].key.q
		st.byQueue[q] = append(st.byQueue[q], int32(c))
	}
	return st
}

// endCycle applies, at the end of a cycle, what its admissions and
// evictions do to the other heads: a release makes every class start
// again from its first member; an admission over nominal quota makes the
// dropped classes of the reclaiming queues in its tree live again.
func (s *Snapshot) endGCycle(st *gstate) {
	switch {
	case st.released && !st.one:
		for c := range st.dropped {
			if s.onReleased(st.relFl, int32(c)) {
				st.cursor[c], st.dropped[c] = 0, false
			}
		}
	case st.released:
		for c := range st.dropped {
			if st.dropped[c] && s.onReleased(st.relFl, int32(c)) {
				s.gResume(st, int32(c))
			}
		}
	default:
		t := s.ix.tree
		for _, root := range st.undrop {
			for c := range st.dropped {
				r := int(s.classes[c].key.q)
				if st.dropped[c] && s.ix.queues[r].reclaim != polNever && t.root(r) == root {
					s.gResume(st, int32(c))
				}
			}
		}
	}
	st.released = false
	clear(st.relFl)
	st.undrop = st.undrop[:0]
}

// gResume makes dropped class c live again: from its cursor, or, one
// head a cycle, from its first member after the last head.
func (s *Snapshot) gResume(st *gstate, c int32) {
	st.dropped[c] = false
	if st.one {
		cl := &s.classes[c]
		i := 0
		for i < len(cl.members) {
			k := s.keyOf(cl.members[i])
			if cmpKey(&k, &st.cur) > 0 {
				break
			}
			i++
		}
		st.cursor[c] = max(st.cursor[c], int32(i))
	}
}

// gHead returns queue q's head, or -1.
func (s *Snapshot) gHead(st *gstate, q int) int32 {
	best := int32(-1)
	for _, c := range st.byQueue[q] {
		if st.dropped[c] || int(st.cursor[c]) >= len(s.classes[c].members) {
			continue
		}
		m := s.classes[c].members[st.cursor[c]]
		if best < 0 || s.staticCmp(&s.ws[m], &s.ws[best]) < 0 {
			best = m
		}
	}
	return best
}

// admittedGeneral notes, after queue q admitted on flavor f, that the
// queues in q's cohort tree that reclaim may have gained candidates:
// when q is now above its nominal quota there, or, under Fair Sharing,
// always (every admission changes shares).
func (s *Snapshot) admittedGeneral(st *gstate, q, f int) {
	t := s.ix.tree
	if t.nodes[q].parent < 0 {
		return
	}
	if s.ix.fs == nil {
		over := false
		for r := range numResources {
			i := fr(f, r)
			over = over || s.tuse[q][i] > t.nodes[q].subtree[i]
		}
		if !over {
			return
		}
	}
	st.undrop = append(st.undrop, t.root(q))
}

// scheduleGeneral runs the general engine's cycles (see above).
func (s *Snapshot) scheduleGeneral(emit sink) {
	st := s.newGState()
	limit := 4*s.workloadCount() + 64
	one := s.ix.fair || s.ix.fcfs
	st.one = one
	for range limit {
		var heads []gentry
		for q := range s.ix.queues {
			if h := s.gHead(st, q); h >= 0 {
				heads = append(heads, gentry{q: q, n: nomination{slot: h}})
			}
		}
		if len(heads) == 0 {
			break
		}
		if one {
			best := 0
			for i := range heads {
				a, b := s.keyOf(heads[i].n.slot), s.keyOf(heads[best].n.slot)
				if cmpKey(&a, &b) < 0 {
					best = i
				}
			}
			heads = heads[best : best+1]
		}
		for i := range heads {
			heads[i].n = s.nominate(heads[i].n.slot)
		}
		preempted := map[int32]bool{}
		if s.ix.fs != nil {
			left := make([]*gentry, len(heads))
			for i := range heads {
				left[i] = &heads[i]
			}
			for len(left) > 0 {
				i := s.nextFair(left)
				if i < 0 {
					i = 0
				}
				s.processEntry(st, left[i], preempted, emit)
				left = slices.Delete(left, i, i+1)
			}
		} else {
			slices.SortFunc(heads, func(a, b gentry) int { return s.classicalCmp(&a, &b) })
			for i := range heads {
				if one {
					st.cur = s.keyOf(heads[i].n.slot)
				}
				s.processEntry(st, &heads[i], preempted, emit)
			}
		}
		for _, r := range st.reserved {
			s.tAddReq(r.q, r.f, r.v, -1)
		}
		st.reserved = st.reserved[:0]
		s.endGCycle(st)
	}
	for _, v := range st.deferred {
		s.insertMember(s.ws[v].cls, v)
	}
}

// classicalCmp is Kueue's classicalIterator order: not borrowing first,
// then priority, then arrival (then the ID, for a stable order).
func (s *Snapshot) classicalCmp(a, b *gentry) int {
	if ba, bb := a.n.mode.borrow, b.n.mode.borrow; !a.n.noFit() && !b.n.noFit() && ba != bb {
		return cmp.Compare(ba, bb)
	}
	wa, wb := &s.ws[a.n.slot].w, &s.ws[b.n.slot].w
	if wa.Priority != wb.Priority {
		return cmp.Compare(wb.Priority, wa.Priority)
	}
	if c := wa.Created.Compare(wb.Created); c != 0 {
		return c
	}
	return strings.Compare(wa.ID, wb.ID)
}

// processEntry is step 4 for one head.
func (s *Snapshot) processEntry(st *gstate, e *gentry, preempted map[int32]bool, emit sink) {
	slot := e.n.slot
	x := &s.ws[slot]
	q := int(x.q)
	if e.n.noFit() || (!e.n.fit && len(e.n.targets) == 0) {
		if !e.n.noFit() && !s.ix.fcfs && s.ix.queues[q].reclaim != polAny {
			c := s.classes[x.cls].cands[e.n.ci]
			s.tAddReq(q, int(c.f), e.n.reserve, 1)
			st.reserved = append(st.reserved, reservation{q: q, f: int(c.f), v: e.n.reserve})
		}
		st.cursor[x.cls]++
		st.dropped[x.cls] = true
		return
	}
	for _, v := range e.n.targets {
		if preempted[v] || s.ws[v].fl < 0 {
			return // overlapping targets: tried again next cycle
		}
	}
	c := s.classes[x.cls].cands[e.n.ci]
	for _, v := range e.n.targets {
		s.vacate(v)
	}
	var nodes []int32
	if s.quotaFits(q, int(c.f), reqOf(&x.w)) {
		nodes = s.placeFor(c, &x.w)
	}
	for i := len(e.n.targets) - 1; i >= 0; i-- {
		s.occupy(e.n.targets[i])
	}
	if nodes == nil {
		return // no longer fits: tried again next cycle
	}
	for _, v := range e.n.targets {
		s.unadmit(v, !st.one)
		if st.one {
			st.deferred = append(st.deferred, v)
		}
		emit(EventPreempted, v, slot)
		preempted[v] = true
	}
	s.admit(slot, c, nodes, s.newAdmission(int(c.f), nodes))
	emit(EventAdmitted, slot, -1)
	if p := s.penalty(x.w.GPUs); p > 0 {
		s.usage[q] += p
	}
	if len(e.n.targets) > 0 {
		st.released = true
		st.relFl[c.f] = true
	}
	s.admittedGeneral(st, q, int(c.f))
}

// quotaFits reports whether req fits queue q's available quota on
// flavor f (Kueue's ClusterQueueSnapshot.Fits).
func (s *Snapshot) quotaFits(q, f int, req resVec) bool {
	for r, v := range req {
		if v > 0 && v > max(0, s.tAvailable(q, fr(f, Resource(r)))) {
			return false
		}
	}
	return true
}
