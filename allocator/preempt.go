package allocator

import (
	"fmt"
	"slices"
)

// Automatic preemption follows Kueue's classical preemptor
// (pkg/scheduler/preemption, GetTargets and minimalPreemptions) for one
// flavor at a time:
//
//   - Candidates are admitted workloads on the flavor: of the preemptor's
//     own queue if WithinClusterQueue allows (LowerPriority: lower
//     priority; LowerOrNewerEqualPriority: also equal priority and a later
//     Created), and of other queues of its cohort that borrow on the
//     flavor if ReclaimWithinCohort allows (Any: any priority;
//     LowerPriority: lower priority).
//   - They are ordered: other queues first, then lower priority, then
//     most recently admitted, then ID.
//   - If all candidates are the queue's own, the minimal set is searched
//     with borrowing allowed. Otherwise, if the queue is below its nominal
//     quota, the set is searched without borrowing (the preemptor must
//     not borrow after admission); failing that, only its own workloads
//     are tried, with borrowing.
//   - The minimal set: remove candidates in order (skipping another
//     queue's workload once that queue no longer borrows) until the
//     preemptor fits by quota and placement, then add back, in reverse
//     order, every one it still fits without.

// preemptionPossible is a cheap necessary condition for getTargets to
// succeed: enough GPUs (when nodes count) and quota would be free if
// every candidate left.
func (s *Snapshot) preemptionPossible(slot int32, c cand, place bool) bool {
	x := &s.ws[slot]
	q, f, g, p := int(x.q), int(c.f), x.w.GPUs, x.w.Priority
	qi := &s.ix.queues[q]
	own := 0
	if qi.within != polNever {
		for _, ps := range s.adm[q][f].prio {
			if ps.prio < p || (ps.prio == p && qi.within == polLowerOrNewerEqual) {
				own += ps.gpus
			}
		}
	}
	others := 0
	if s.mayReclaim(q, f) {
		for _, r := range s.ix.cohorts[qi.cohort].queues {
			if r == q || !s.borrowing(r, f) {
				continue
			}
			for _, ps := range s.adm[r][f].prio {
				if qi.reclaim == polAny || ps.prio < p {
					others += ps.gpus
				}
			}
		}
	}
	if own+others == 0 || (place && g > s.fl[f].free+own+others) {
		return false
	}
	return g <= s.availableWith(q, f, s.used[q][f]-own, others)
}

// mayReclaim reports whether queue q may try to reclaim flavor f from
// other queues of its cohort: its policy allows it and it is below its
// nominal quota there (Kueue then also requires the preemptor to fit
// without borrowing once the victims are gone).
func (s *Snapshot) mayReclaim(q, f int) bool {
	qi := &s.ix.queues[q]
	return qi.cohort >= 0 && qi.reclaim != polNever && s.used[q][f] < qi.quota[f].nominal
}

// getTargets is Kueue's GetTargets for the class's i-th candidate flavor,
// with the preemptor's pods placed on nodes (place), or, as Kueue's
// preemption oracle does, by quota alone. With reclaimOnly it returns
// the targets only when they are all other queues' (the search then
// stops short of the queue's own candidates: it reclaims exactly when
// removing other queues' candidates alone makes room).
func (s *Snapshot) getTargets(slot int32, i int, place, reclaimOnly bool) []int32 {
	x := &s.ws[slot]
	cl := &s.classes[x.cls]
	c := cl.cands[i]
	q, f, p := int(x.q), int(c.f), x.w.Priority
	qi := &s.ix.queues[q]
	if s.ix.fcfs || (qi.within == polNever && (qi.cohort < 0 || qi.reclaim == polNever)) || !s.preemptionPossible(slot, c, place) {
		return nil
	}
	// Kueue tries other queues' workloads only when the queue is below
	// its nominal quota; otherwise (or when there are none) only its own,
	// with borrowing allowed. That search cannot succeed unless the
	// workload fits with all of them gone, which the shadows answer
	// cheaply; removing more only helps, so that answer is also the
	// search's. A reclaim search goes to greedyFits, which decides it
	// exactly, without a shadow (see shadow.go).
	reclaim := s.mayReclaim(q, f) && s.othersHaveCandidates(q, f, p)
	if (reclaimOnly && !reclaim) || (!reclaim && !s.fitsWithout(q, &x.w, x.w.Topology, c, place)) {
		return nil
	}
	sc := s.scratchBuf()
	own := sc.own[:0]
	defer func() { sc.own = own[:0] }()
	if qi.within != polNever && !reclaimOnly {
		// The queue's list is in victim order, lower priority first: the
		// lower-priority candidates are a prefix, counted by the sums per
		// priority, then the equal-priority run, created later only.
		l := &s.adm[q][f]
		lower, equal := 0, 0
		for _, ps := range l.prio {
			if ps.prio < p {
				lower += ps.n
			} else if ps.prio == p {
				equal = ps.n
			}
		}
		own = append(own, l.slots[:lower]...)
		if qi.within == polLowerOrNewerEqual {
			for _, v := range l.slots[lower : lower+equal] {
				if cmpCreated(&s.ws[v], x) > 0 {
					own = append(own, v)
				}
			}
		}
	}
	if !reclaim {
		return s.minimalSet(slot, c, own, true, place)
	}
	if s.cachedMiss(cl, i, &x.w, place) {
		return nil
	}
	// Other queues' candidates, merged in victim order from their
	// already ordered lists, before the queue's own.
	lists := sc.lists[:0]
	defer func() { clear(lists); sc.lists = lists[:0] }()
	for _, r := range s.ix.cohorts[qi.cohort].queues {
		if r == q || !s.borrowing(r, f) {
			continue
		}
		l := s.adm[r][f].slots
		if qi.reclaim == polLower {
			n := prefixLen(l, func(v int32) bool { return s.ws[v].w.Priority < p })
			l = l[:n]
		}
		if len(l) > 0 {
			lists = append(lists, l)
		}
	}
	// Reclaim without borrowing: run the removal on scratch counts first
	// (it succeeds iff the search does), then the search for the set.
	if visited, ok := s.greedyFits(q, x.w.GPUs, x.w.Topology, c, lists, own, place); ok {
		// The search removes candidates in the same order and stops at
		// the same point: the candidates greedyFits visited suffice.
		if v := s.minimalSet(slot, c, visited, false, place); len(v) > 0 {
			return v
		}
		return s.minimalSet(slot, c, append(s.mergeVictims(lists), own...), false, place)
	}
	if reclaimOnly {
		return nil
	}
	// Own workloads only, borrowing allowed.
	if len(own) > 0 && s.fitsWithout(q, &x.w, x.w.Topology, c, place) {
		return s.minimalSet(slot, c, own, true, place)
	}
	s.rememberMiss(cl, i, &x.w, place)
	return nil
}

// othersHaveCandidates reports whether another queue of q's cohort
// borrows flavor f and has workloads there that q's ReclaimWithinCohort
// policy lets a priority-p workload preempt.
func (s *Snapshot) othersHaveCandidates(q, f int, p int32) bool {
	qi := &s.ix.queues[q]
	for _, r := range s.ix.cohorts[qi.cohort].queues {
		if r == q || !s.borrowing(r, f) {
			continue
		}
		for _, ps := range s.adm[r][f].prio {
			if qi.reclaim == polAny || ps.prio < p {
				return true
			}
		}
	}
	return false
}

// greedyFits runs the removal loop of Kueue's reclaim search (other
// queues' workloads only while their queue borrows; no borrowing for the
// preemptor) on scratch counts, over lists merged in victim order and
// then own, and reports whether gpus GPUs of queue q fit on c at some
// point, and the candidates it removed up to there, in order (in a
// scratch buffer, valid until the next call). s is unchanged.
func (s *Snapshot) greedyFits(q, gpus int, topo Level, c cand, lists [][]int32, own []int32, place bool) ([]int32, bool) {
	f, pods, k := int(c.f), int(c.pods), int(c.per)
	// The preemptor must end within its nominal quota, and only its own
	// candidates lower its usage: if all of them together are not
	// enough, no point of the removal fits (most failing searches).
	nominal := s.ix.queues[q].quota[f].nominal
	ownGPUs := 0
	for _, v := range own {
		ownGPUs += s.ws[v].w.GPUs
	}
	if s.used[q][f]-ownGPUs+gpus > nominal {
		return nil, false
	}
	sc := s.liftScratch()
	defer s.unlift(sc)
	if len(sc.u) != len(s.used) {
		sc.u = make([]int, len(s.used))
	}
	for r := range sc.u {
		sc.u[r] = s.used[r][f]
	}
	st := &s.fl[f]
	placed := !place || s.feasible(c, topo)
	if !place {
		topo = -1 // nodes do not count: no placement bookkeeping below
	}
	have, maxFree := 0, 0
	switch topo {
	case LevelNone:
		have = podCount(st.cnt, k)
	case LevelHost:
		for v := len(st.cnt) - 1; v > 0; v-- {
			if st.cnt[v] > 0 {
				maxFree = v
				break
			}
		}
	case LevelRack, LevelBlock:
		n := len(s.rackCnt)
		if topo == LevelBlock {
			n = len(s.blockCnt)
		}
		if len(sc.domHave) < n {
			sc.domHave = make([]int, n)
			sc.domSeen = make([]bool, n)
		}
		sc.domTouched = sc.domTouched[:0]
		defer func() {
			for _, d := range sc.domTouched {
				sc.domSeen[d] = false
			}
		}()
	}
	freed := 0
	pos := sc.pos[:0]
	for range lists {
		pos = append(pos, 0)
	}
	sc.pos = pos
	ownAt := 0
	visited := sc.visited[:0]
	defer func() { sc.visited = visited[:0] }()
	for {
		// Next victim: the first of the merged lists, then own.
		best := -1
		for j, l := range lists {
			if pos[j] < len(l) && sc.u[s.ws[l[0]].q] <= s.ix.queues[s.ws[l[0]].q].quota[f].nominal {
				pos[j] = len(l) // that queue no longer borrows: skip the rest
			}
			if pos[j] < len(l) && (best < 0 || victimCmp(&s.ws[l[pos[j]]], &s.ws[lists[best][pos[best]]]) < 0) {
				best = j
			}
		}
		var v int32
		switch {
		case best >= 0:
			v = lists[best][pos[best]]
			pos[best]++
		case ownAt < len(own):
			v = own[ownAt]
			ownAt++
		default:
			return nil, false
		}
		visited = append(visited, v)
		x := &s.ws[v]
		r := int(x.q)
		g := x.w.GPUs
		if r != q {
			rq := &s.ix.queues[r].quota[f]
			if sc.u[r] <= rq.nominal {
				continue
			}
			freed += max(0, sc.u[r]-rq.guaranteed) - max(0, sc.u[r]-g-rq.guaranteed)
		}
		sc.u[r] -= g
		for _, n := range x.nodes {
			if !place {
				break
			}
			if !sc.seen[n] {
				sc.seen[n] = true
				sc.h[n] = s.nodeFree[n]
				sc.touched = append(sc.touched, n)
			}
			old := int(sc.h[n])
			sc.h[n] += x.per
			nw := int(sc.h[n])
			switch topo {
			case LevelNone:
				have += nw/k - old/k
			case LevelHost:
				maxFree = max(maxFree, nw)
			case LevelRack, LevelBlock:
				d := s.ix.nodes[n].rack
				cnt := s.rackCnt
				if topo == LevelBlock {
					d, cnt = s.ix.nodes[n].block, s.blockCnt
				}
				if !sc.domSeen[d] {
					sc.domSeen[d] = true
					sc.domHave[d] = podCount(cnt[d], k)
					sc.domTouched = append(sc.domTouched, d)
				}
				sc.domHave[d] += nw/k - old/k
				if sc.domHave[d] >= pods {
					placed = true
				}
			}
		}
		switch {
		case !place:
		case topo == LevelNone:
			placed = have >= pods
		case topo == LevelHost:
			placed = maxFree >= pods*k
		}
		if placed && sc.u[q]+gpus <= nominal && gpus <= s.availableWith(q, f, sc.u[q], freed) {
			return visited, true
		}
	}
}

// prefixLen returns the length of the prefix of l where keep holds (keep
// must hold on a prefix only).
func prefixLen(l []int32, keep func(int32) bool) int {
	lo, hi := 0, len(l)
	for lo < hi {
		m := (lo + hi) / 2
		if keep(l[m]) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// mergeVictims merges lists, each in victim order, into one.
func (s *Snapshot) mergeVictims(lists [][]int32) []int32 {
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return slices.Clone(lists[0])
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]int32, 0, n)
	pos := make([]int, len(lists))
	for len(out) < n {
		best := -1
		for j, l := range lists {
			if pos[j] == len(l) {
				continue
			}
			if best < 0 || victimCmp(&s.ws[l[pos[j]]], &s.ws[lists[best][pos[best]]]) < 0 {
				best = j
			}
		}
		out = append(out, lists[best][pos[best]])
		pos[best]++
	}
	return out
}

// minimalSet removes candidates in order until the workload in slot fits
// on c (on nodes too when place), then adds back every one it does not
// need. s is unchanged.
func (s *Snapshot) minimalSet(slot int32, c cand, cands []int32, allowBorrow, place bool) []int32 {
	x := &s.ws[slot]
	return s.minimal(int(x.q), x.w.GPUs, x.w.Topology, c, cands, allowBorrow, true, place)
}

// minimal is the search behind minimalSet and ProposeVictims for gpus GPUs
// of queue q. With onlyBorrowers, another queue's workload is skipped once
// that queue no longer borrows on the flavor.
func (s *Snapshot) minimal(q, gpus int, topo Level, c cand, cands []int32, allowBorrow, onlyBorrowers, place bool) []int32 {
	f := int(c.f)
	fit := func() bool { return s.fitsQuota(q, f, gpus, allowBorrow) && (!place || s.feasible(c, topo)) }
	skip := func(v int32) bool {
		r := int(s.ws[v].q)
		return onlyBorrowers && r != q && !s.borrowing(r, f)
	}
	return s.shrink(cands, skip, fit)
}

// shrink vacates candidates in order (but those skip names) until fit
// holds, then occupies again every one fit does not need, from the last
// but one back; it returns those that stay vacated (nil if fit never
// held). s is unchanged.
func (s *Snapshot) shrink(cands []int32, skip func(int32) bool, fit func() bool) []int32 {
	sc := s.scratchBuf()
	removed := sc.removed[:0]
	defer func() { sc.removed = removed[:0] }()
	fits := false
	for _, v := range cands {
		if skip != nil && skip(v) {
			continue
		}
		s.vacate(v)
		removed = append(removed, v)
		if fit() {
			fits = true
			break
		}
	}
	if fits {
		for i := len(removed) - 2; i >= 0; i-- {
			s.occupy(removed[i])
			if fit() {
				removed = slices.Delete(removed, i, i+1)
			} else {
				s.vacate(removed[i])
			}
		}
	}
	for i := len(removed) - 1; i >= 0; i-- {
		s.occupy(removed[i])
	}
	if !fits {
		return nil
	}
	return slices.Clone(removed)
}

// ProposeVictims returns a minimal set of admitted workloads, all of
// strictly lower priority than w, from any queue, whose eviction lets w
// fit now (w's own queue limits still apply), and the admission w would
// then get. Flavors are tried in w's assignment order; the one needing
// the fewest victims wins (ties: the earlier flavor). Within a flavor,
// candidates are taken lowest priority first, then most recently admitted,
// then by ID, and any not needed are added back (so no victim can be
// spared; the set is minimal, not necessarily minimum). If w already fits,
// victims is empty and ok true. ok is false if no set exists or w is
// invalid or already admitted in s. s is not changed.
func (s *Snapshot) ProposeVictims(w Workload) (victims []string, a Admission, ok bool) {
	if slot, in := s.byID[w.ID]; in && s.ws[slot].fl >= 0 {
		return nil, Admission{}, false
	}
	w.Admission = nil
	q, _, cands, err := s.resolve(&w)
	if err != nil {
		return nil, Admission{}, false
	}
	if ad, reason := s.Fit(w); reason == ReasonNone {
		return nil, ad, true
	}
	var best []int32
	var bestC cand
	found := false
	for _, c := range cands {
		if c.never {
			continue
		}
		f := int(c.f)
		var pool []int32
		for r := range s.ix.queues {
			for _, v := range s.adm[r][f].slots {
				if s.ws[v].w.Priority >= w.Priority {
					break
				}
				pool = append(pool, v)
			}
		}
		slices.SortFunc(pool, func(a, b int32) int { return victimCmp(&s.ws[a], &s.ws[b]) })
		var set []int32
		if s.ix.simple {
			set = s.minimal(q, w.GPUs, w.Topology, c, pool, true, false, true)
		} else {
			set = s.minimalGeneral(q, &w, c, pool)
		}
		if set != nil && (!found || len(set) < len(best)) {
			best, bestC, found = set, c, true
		}
	}
	if !found {
		return nil, Admission{}, false
	}
	for _, v := range best {
		s.vacate(v)
	}
	nodes := s.placeFor(bestC, &w)
	for i := len(best) - 1; i >= 0; i-- {
		s.occupy(best[i])
	}
	if nodes == nil {
		return nil, Admission{}, false
	}
	victims = make([]string, len(best))
	for i, v := range best {
		victims[i] = s.ws[v].w.ID
	}
	return victims, *s.newAdmission(int(bestC.f), nodes), true
}

// Preempt is the admin action: it evicts victims (EventPreempted, By=id)
// and then admits the pending workload id if it fits (EventAdmitted),
// with the fair-sharing entry penalty. Victims may be of any queue and
// priority. If id does not fit afterwards, everything is undone and an
// error returned.
func (s *Snapshot) Preempt(id string, victims []string) ([]Event, error) {
	slot, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	if s.ws[slot].fl >= 0 {
		return nil, fmt.Errorf("%w: workload %q is already admitted", ErrState, id)
	}
	seen := map[string]bool{}
	var vs []int32
	for _, v := range victims {
		if v == id || seen[v] {
			return nil, invalidf("victim %q named twice or is the preemptor", v)
		}
		seen[v] = true
		vslot, err := s.lookup(v)
		if err != nil {
			return nil, err
		}
		if s.ws[vslot].fl < 0 {
			return nil, fmt.Errorf("%w: victim %q is not admitted", ErrState, v)
		}
		vs = append(vs, vslot)
	}
	saved := make([]evicted, len(vs))
	for i, v := range vs {
		x := &s.ws[v]
		saved[i] = evicted{slot: v, c: cand{f: x.fl, pods: int32(len(x.nodes)), per: x.per}, nodes: x.nodes, a: x.w.Admission}
		s.unadmit(v, true)
	}
	x := &s.ws[slot]
	c, nodes, ok := s.fitAny(int(x.q), &x.w, s.classes[x.cls].cands)
	if !ok {
		reason := s.diagnoseSlot(slot)
		for i := len(saved) - 1; i >= 0; i-- {
			e := saved[i]
			s.admit(e.slot, e.c, e.nodes, e.a)
		}
		return nil, fmt.Errorf("%w: workload %q would still not fit after evicting %d workloads (%s)", ErrState, id, len(vs), reason)
	}
	var out []Event
	emit := func(k EventKind, sl, by int32) { out = append(out, s.event(k, sl, by)) }
	for _, v := range vs {
		emit(EventPreempted, v, slot)
	}
	s.admitNow(nil, slot, c, nodes, emit)
	s.ver++
	return out, nil
}

// minimalGeneral is minimal for ProposeVictims in the general engine:
// workload w of queue q, every resource and the tree's quota.
func (s *Snapshot) minimalGeneral(q int, w *Workload, c cand, cands []int32) []int32 {
	f, req := int(c.f), reqOf(w)
	fit := func() bool { return s.quotaFits(q, f, req) && s.feasibleFor(c, w, w.Topology) }
	return s.shrink(cands, nil, fit)
}
