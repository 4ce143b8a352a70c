package allocator

import (
	"cmp"
	"slices"
	"strings"
)

// Kueue's classical preemption for the general engine
// (pkg/scheduler/preemption/preemption.go classicalPreemptions, and
// classical/hierarchical_preemption.go, candidate_generator.go), over
// the cohort tree:
//
//   - Candidates are admitted workloads using a flavor-resource that
//     needs preemption: the queue's own under WithinClusterQueue
//     (variant WithinCQ); and, under ReclaimWithinCohort, those of other
//     queues that exceed their nominal quota, found walking up from the
//     queue: while the request does not fit within the subtrees walked
//     so far, a candidate is a priority candidate (ReclaimWithoutBorrowing,
//     or with borrowWithinCohort ReclaimWhileBorrowing when it is of
//     lower priority and at most the threshold); once it fits in a
//     subtree, the preemptor has a hierarchical advantage over the
//     workloads using that subtree's quota (HierarchicalReclaim, any
//     priority the policy allows). Subtrees within their nominal quota
//     are skipped.
//   - They are ordered hierarchical ones, then priority ones, then the
//     queue's own, each by Kueue's CandidatesOrdering: lower priority
//     first, then the most recently admitted.
//   - The search removes them in order until the preemptor fits, then
//     adds back, in reverse, each one it still fits without. A candidate
//     of another queue is skipped once that queue, or a cohort on its
//     path below the common ancestor, is back within nominal; a
//     ReclaimWithoutBorrowing one when the preemptor may borrow.
//   - It runs with borrowing allowed, or not, or both in an order that
//     depends on the candidates (see classicalTargets).

// pctx is one preemption search: the preemptor in slot, of queue q, on
// flavor f (candidate c when nodes count), the flavor-resources needing
// preemption, and its request.
type pctx struct {
	slot  int32
	q, f  int
	c     cand
	frs   []int
	usage resVec
	place bool // nodes count (GetTargets); the oracle ignores them
}

// Kueue's preemption variants.
type pvariant uint8

const (
	pvWithinCQ pvariant = iota + 1
	pvHierarchical
	pvReclaimWithoutBorrowing
	pvReclaimWhileBorrowing
)

type pcand struct {
	v       int32
	lca     int // the subtree root it was found under; -1 for own
	variant pvariant
}

// targets is Kueue's GetTargets: Fair Sharing's or the classical
// search. s is unchanged.
func (s *Snapshot) targets(ctx *pctx) []int32 {
	if s.ix.fcfs || len(ctx.frs) == 0 {
		return nil
	}
	if s.ix.fs != nil {
		return s.fairTargets(ctx)
	}
	return s.classicalTargets(ctx)
}

// usesFRs reports whether admitted workload v uses one of frs.
func (s *Snapshot) usesFRs(v int32, frs []int) bool {
	x := &s.ws[v]
	for _, i := range frs {
		if frFlavor(i) != int(x.fl) {
			continue
		}
		switch frResource(i) {
		case ResourceGPU:
			return true // every workload has GPUs
		case ResourceCPU:
			if x.w.CPU > 0 {
				return true
			}
		case ResourceMemory:
			if x.w.Memory > 0 {
				return true
			}
		}
	}
	return false
}

// satisfies is Kueue's SatisfiesPreemptionPolicy for the preemptor in
// slot and candidate v.
func (s *Snapshot) satisfies(slot, v int32, pol policyKind) bool {
	p, c := &s.ws[slot].w, &s.ws[v].w
	switch pol {
	case polLower:
		return p.Priority > c.Priority
	case polLowerOrNewerEqual:
		return p.Priority > c.Priority || (p.Priority == c.Priority && p.Created.Before(c.Created))
	case polAny:
		return true
	}
	return false
}

// candidateCmp is Kueue's CandidatesOrdering: other queues' workloads
// before the preemptor queue's, then lower priority, then the most
// recently admitted, then (Kueue: UID) the ID.
func (s *Snapshot) candidateCmp(q int) func(a, b int32) int {
	return func(a, b int32) int {
		x, y := &s.ws[a], &s.ws[b]
		if ox, oy := int(x.q) != q, int(y.q) != q; ox != oy {
			if ox {
				return -1
			}
			return 1
		}
		if x.w.Priority != y.w.Priority {
			return cmp.Compare(x.w.Priority, y.w.Priority)
		}
		if c := y.w.Admission.At.Compare(x.w.Admission.At); c != 0 {
			return c
		}
		return strings.Compare(x.w.ID, y.w.ID)
	}
}

// workloadFits is Kueue's workloadFits: the preemptor's request fits its
// queue's available quota (without borrowing unless allowed) and, when
// nodes count, its pods fit.
func (s *Snapshot) workloadFits(ctx *pctx, allowBorrow bool) bool {
	for r, v := range ctx.usage {
		if v == 0 {
			continue
		}
		i := fr(ctx.f, Resource(r))
		if !allowBorrow && s.tBorrowingWith(ctx.q, i, v) {
			return false
		}
		if v > max(0, s.tAvailable(ctx.q, i)) {
			return false
		}
	}
	if ctx.place {
		w := &s.ws[ctx.slot].w
		return s.feasibleFor(ctx.c, w, w.Topology)
	}
	return true
}

// fitsInQuota is Kueue's QuantitiesFitInQuota on flavor f: whether
// requests fit node n's subtree quota, and what exceeds what n keeps
// locally.
func (s *Snapshot) fitsInQuota(n, f int, req resVec) (bool, resVec) {
	nd := &s.ix.tree.nodes[n]
	ok := true
	var rem resVec
	for r, v := range req {
		if v == 0 {
			continue
		}
		i := fr(f, Resource(r))
		if s.tuse[n][i]+v > nd.subtree[i] {
			ok = false
		}
		rem[r] = max(0, v-s.tLocalAvailable(n, i))
	}
	return ok, rem
}

func (s *Snapshot) classicalTargets(ctx *pctx) []int32 {
	q, f := ctx.q, ctx.f
	qi := &s.ix.queues[q]
	t := s.ix.tree
	if !s.mayFitWithout(ctx) {
		return nil
	}
	sc := s.scratchBuf()
	same, hier, prio := sc.same[:0], sc.hier[:0], sc.prio[:0]
	defer func() { sc.same, sc.hier, sc.prio = same[:0], hier[:0], prio[:0] }()
	if qi.within != polNever {
		for _, v := range s.adm[q][f].slots {
			if s.usesFRs(v, ctx.frs) && s.satisfies(ctx.slot, v, qi.within) {
				same = append(same, pcand{v: v, lca: -1, variant: pvWithinCQ})
			}
		}
	}
	if t.nodes[q].parent >= 0 && qi.reclaim != polNever {
		adv, rem := s.fitsInQuota(q, f, ctx.usage)
		prev := -1
		for n := t.nodes[q].parent; n >= 0; n = t.nodes[n].parent {
			list := &prio
			if adv {
				list = &hier
			}
			s.collectSubtree(ctx, n, n, prev, adv, list)
			var fits bool
			fits, rem = s.fitsInQuota(n, f, rem)
			adv = adv || fits
			prev = n
		}
	}
	// Each list comes from the queues' admitted lists, already in victim
	// order; sort what several queues made (Kueue's CandidatesOrdering,
	// which within one list is victim order).
	byOrder := s.candidateCmp(q)
	for _, l := range [][]pcand{hier, prio} {
		if !slices.IsSortedFunc(l, func(a, b pcand) int { return byOrder(a.v, b.v) }) {
			slices.SortStableFunc(l, func(a, b pcand) int { return byOrder(a.v, b.v) })
		}
	}
	all := append(append(append(sc.all[:0], hier...), prio...), same...)
	defer func() { sc.all = all[:0] }()
	noOthers, noHier := len(hier) == 0 && len(prio) == 0, len(hier) == 0
	var attempts []bool
	switch {
	case noOthers || (!qi.bwc && !s.underNominal(q, ctx.frs)):
		attempts = []bool{true}
	case !qi.bwc && noHier:
		attempts = []bool{false, true}
	default:
		attempts = []bool{true, false}
	}
	for _, borrow := range attempts {
		var removed []int32
		for _, e := range all {
			if !s.validCandidate(ctx, e, borrow) {
				continue
			}
			s.vacate(e.v)
			removed = append(removed, e.v)
			if s.workloadFits(ctx, borrow) {
				removed = s.fillBack(ctx, removed, borrow)
				for _, v := range removed {
					s.occupy(v)
				}
				return removed
			}
		}
		for _, v := range removed {
			s.occupy(v)
		}
	}
	return nil
}

// mayFitWithout is a necessary condition for a preemption search to
// succeed when nodes count: the preemptor's GPUs fit what is free on the
// flavor plus what every workload its policy could make a candidate
// holds there.
func (s *Snapshot) mayFitWithout(ctx *pctx) bool {
	if !ctx.place {
		return true
	}
	q, f := ctx.q, ctx.f
	w := &s.ws[ctx.slot].w
	qi := &s.ix.queues[q]
	room := s.fl[f].free
	if room >= w.GPUs {
		return true
	}
	add := func(r int, pol policyKind) {
		for _, ps := range s.adm[r][f].prio {
			if pol == polAny || ps.prio < w.Priority || (pol == polLowerOrNewerEqual && ps.prio == w.Priority) {
				room += ps.gpus
			}
		}
	}
	if qi.within != polNever {
		add(q, qi.within)
	}
	if t := s.ix.tree; t.nodes[q].parent >= 0 && qi.reclaim != polNever {
		for _, r := range t.subtreeQueues(t.root(q)) {
			if r != q {
				add(r, qi.reclaim)
			}
		}
	}
	return room >= w.GPUs
}

// collectSubtree is Kueue's collectCandidatesInSubtree.
func (s *Snapshot) collectSubtree(ctx *pctx, cur, root, skip int, adv bool, out *[]pcand) {
	t := s.ix.tree
	nd := &t.nodes[cur]
	for _, c := range nd.cohorts {
		if c == skip || s.withinNominal(c, ctx.frs) {
			continue
		}
		s.collectSubtree(ctx, c, root, skip, adv, out)
	}
	qi := &s.ix.queues[ctx.q]
	for _, cq := range nd.queues {
		if cq == ctx.q || s.withinNominal(cq, ctx.frs) {
			continue
		}
		for _, v := range s.adm[cq][ctx.f].slots {
			if !s.usesFRs(v, ctx.frs) || !s.satisfies(ctx.slot, v, qi.reclaim) {
				continue
			}
			variant := pvHierarchical
			if !adv {
				variant = pvReclaimWithoutBorrowing
				if qi.bwc && !aboveThreshold(s.ws[v].w.Priority, s.ws[ctx.slot].w.Priority, qi.bwcMax) {
					variant = pvReclaimWhileBorrowing
				}
			}
			*out = append(*out, pcand{v: v, lca: root, variant: variant})
		}
	}
}

// aboveThreshold is Kueue's isAboveBorrowingThreshold.
func aboveThreshold(candidate, incoming int32, threshold *int32) bool {
	if candidate >= incoming {
		return true
	}
	return threshold != nil && candidate > *threshold
}

// underNominal is Kueue's queueUnderNominalInResourcesNeedingPreemption.
func (s *Snapshot) underNominal(q int, frs []int) bool {
	nd := &s.ix.tree.nodes[q]
	for _, i := range frs {
		if s.tuse[q][i] >= nd.nominal[i] {
			return false
		}
	}
	return true
}

// validCandidate is Kueue's candidateIsValid.
func (s *Snapshot) validCandidate(ctx *pctx, e pcand, borrow bool) bool {
	cq := int(s.ws[e.v].q)
	if cq == ctx.q {
		return true
	}
	if borrow && e.variant == pvReclaimWithoutBorrowing {
		return false
	}
	if s.withinNominal(cq, ctx.frs) {
		return false
	}
	t := s.ix.tree
	for n := t.nodes[cq].parent; n >= 0 && n != e.lca; n = t.nodes[n].parent {
		if s.withinNominal(n, ctx.frs) {
			return false
		}
	}
	return true
}

// fillBack is Kueue's fillBackWorkloads: every removed workload but the
// last is put back, in reverse order, if the preemptor still fits. The
// removed ones stay removed from s.
func (s *Snapshot) fillBack(ctx *pctx, removed []int32, borrow bool) []int32 {
	for i := len(removed) - 2; i >= 0; i-- {
		s.occupy(removed[i])
		if s.workloadFits(ctx, borrow) {
			removed = slices.Delete(removed, i, i+1)
		} else {
			s.vacate(removed[i])
		}
	}
	return removed
}
