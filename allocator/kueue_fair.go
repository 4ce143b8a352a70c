package allocator

import (
	"cmp"
	"math"
	"slices"
)

// Kueue's Fair Sharing (pkg/cache/scheduler/fair_sharing.go for the
// dominant resource share, pkg/scheduler/fair_sharing_iterator.go for the
// order of heads, pkg/scheduler/preemption/fairsharing and
// preemption.go fairPreemptions for preemption).
//
// A node of the cohort tree (a queue or a cohort with a parent) borrows
// what its usage exceeds its subtree quota by, per flavor-resource; per
// resource, that over what its parent could lend it in all (Σ over
// flavors of the parent's potentialAvailable), × 1000, is a ratio; the
// largest is the dominant resource share, divided by the node's weight
// for comparisons (a borrowing node of weight 0 compares above all).
// Roots and nodes that borrow nothing have share 0.

type fsStrategy uint8

const (
	fsFinal   fsStrategy = iota // LessThanOrEqualToFinalShare
	fsInitial                   // LessThanInitialShare
)

func parseStrategies(names []string) ([]fsStrategy, error) {
	switch {
	case len(names) == 0:
		return []fsStrategy{fsFinal, fsInitial}, nil
	case len(names) == 1 && names[0] == LessThanOrEqualToFinalShare:
		return []fsStrategy{fsFinal}, nil
	case len(names) == 1 && names[0] == LessThanInitialShare:
		return []fsStrategy{fsInitial}, nil
	case len(names) == 2 && names[0] == LessThanOrEqualToFinalShare && names[1] == LessThanInitialShare:
		return []fsStrategy{fsFinal, fsInitial}, nil
	}
	return nil, invalidf("policy: fair-sharing preemption strategies %q (want %s, %s, or both in that order)", names, LessThanOrEqualToFinalShare, LessThanInitialShare)
}

// drs is Kueue's DRS.
type drs struct {
	weight    float64
	ratio     float64
	res       Resource
	borrowing bool
	borrowed  []int // flavor-resources it borrows
}

var negativeDRS = drs{ratio: -1, weight: 1}

func (d drs) zeroWeightBorrows() bool { return d.weight <= ZeroWeight && d.ratio != 0 }

// share is Kueue's PreciseWeightedShare.
func (d drs) share() float64 {
	switch {
	case d.ratio == 0:
		return 0
	case d.weight <= ZeroWeight:
		return math.Inf(1)
	}
	return d.ratio / d.weight
}

// cmpDRS is Kueue's CompareDRS: lower goes first in admission, higher
// is preempted first.
func cmpDRS(a, b drs) int {
	switch za, zb := a.zeroWeightBorrows(), b.zeroWeightBorrows(); {
	case za && zb:
		return cmp.Compare(a.ratio, b.ratio)
	case za:
		return 1
	case zb:
		return -1
	}
	return cmp.Compare(a.share(), b.share())
}

// borrowsOn is Kueue's IsBorrowingOn for a request of req on flavor f.
func (d drs) borrowsOn(f int, req resVec) bool {
	for _, i := range d.borrowed {
		if frFlavor(i) == f && req[frResource(i)] > 0 {
			return true
		}
	}
	return false
}

// drsOrder is the order in which Kueue's resource names compare ("cpu",
// "memory", "nvidia.com/gpu"): ties between resources go to the first.
var drsOrder = [...]Resource{ResourceCPU, ResourceMemory, ResourceGPU}

// drsOf is Kueue's dominantResourceShare of tree node n now.
func (s *Snapshot) drsOf(n int) drs {
	t := s.ix.tree
	nd := &t.nodes[n]
	d := drs{weight: nd.weight}
	if nd.parent < 0 {
		return d
	}
	var borrowing resVec
	for i := range t.nfr {
		if !t.defined[n][i] {
			continue
		}
		if b := s.tuse[n][i] - nd.subtree[i]; b > 0 {
			borrowing[frResource(i)] += b
			d.borrowed = append(d.borrowed, i)
		}
	}
	if len(d.borrowed) == 0 {
		return d
	}
	d.borrowing = true
	lend := t.lendable[nd.parent]
	for _, r := range drsOrder {
		if b := borrowing[r]; b > 0 && lend[r] > 0 {
			if ratio := float64(b) * 1000 / float64(lend[r]); ratio > d.ratio {
				d.ratio, d.res = ratio, r
			}
		}
	}
	return d
}

// Standing: the dominant share of each queue, for the replies.

// DominantShare is a queue's dominant resource share under Kueue's Fair
// Sharing: the share of what its cohort tree could lend it that it
// borrows, of the resource where that share is largest, in per mille,
// divided by its weight (Kueue reports it as the ClusterQueue's
// status.fairSharing.weightedShare, rounded up).
type DominantShare struct {
	WeightedShare float64 // +Inf for a borrowing queue of weight 0
	Resource      Resource
	Borrowing     bool
}

// DominantShares returns every queue's dominant resource share, in
// Cluster order, or nil when Kueue's Fair Sharing is off.
func (s *Snapshot) DominantShares() []DominantShare {
	if s.ix.fs == nil {
		return nil
	}
	out := make([]DominantShare, len(s.ix.queues))
	for q := range out {
		d := s.drsOf(q)
		out[q] = DominantShare{WeightedShare: d.share(), Resource: d.res, Borrowing: d.borrowing}
	}
	return out
}

// The tournament (fair_sharing_iterator.go): at every cohort, from the
// leaves up, the child whose dominant share with its nominated workload
// admitted is lowest wins (FairSharingPrioritizeNonBorrowing, on by
// default in v0.17: first a child that does not borrow on the flavor
// the workload asks for); ties by priority, then arrival. The winner at
// the root is processed next; the shares are computed again for the
// next pop, with what was admitted meanwhile.

type drsKey struct {
	cohort int
	slot   int32
}

// nextFair pops the next entry of a cycle under Fair Sharing.
func (s *Snapshot) nextFair(entries []*gentry) int {
	t := s.ix.tree
	// Entries of queues without a cohort first, then one tree at a
	// time (Kueue takes them in no defined order); the tree whose
	// winner comes first by priority, then arrival, first.
	best := -1
	for i, e := range entries {
		if t.nodes[e.q].parent < 0 {
			if best < 0 || s.staticCmp(&s.ws[e.n.slot], &s.ws[entries[best].n.slot]) < 0 {
				best = i
			}
		}
	}
	if best >= 0 {
		return best
	}
	roots := map[int]bool{}
	for _, e := range entries {
		roots[t.root(e.q)] = true
	}
	winner := -1
	for _, root := range slices.Sorted(mapKeys(roots)) {
		vals := s.tournamentDRS(root, entries)
		if w := s.tournament(root, entries, vals); w >= 0 &&
			(winner < 0 || s.staticCmp(&s.ws[entries[w].n.slot], &s.ws[entries[winner].n.slot]) < 0) {
			winner = w
		}
	}
	return winner
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// tournamentDRS is Kueue's computeDRS: for each entry under root, with
// its request added to its queue, the share of every node on its path,
// keyed by that node's parent.
func (s *Snapshot) tournamentDRS(root int, entries []*gentry) map[drsKey]drs {
	t := s.ix.tree
	vals := map[drsKey]drs{}
	for _, e := range entries {
		if t.root(e.q) != root || e.n.noFit() {
			continue
		}
		f := int(s.classes[s.ws[e.n.slot].cls].cands[e.n.ci].f)
		req := reqOf(&s.ws[e.n.slot].w)
		s.tAddReq(e.q, f, req, 1)
		d := s.drsOf(e.q)
		for a := t.nodes[e.q].parent; a >= 0; a = t.nodes[a].parent {
			vals[drsKey{a, e.n.slot}] = d
			d = s.drsOf(a)
		}
		s.tAddReq(e.q, f, req, -1)
	}
	return vals
}

// tournament is Kueue's runTournament below cohort, returning the
// winning entry's index or -1.
func (s *Snapshot) tournament(cohort int, entries []*gentry, vals map[drsKey]drs) int {
	t := s.ix.tree
	nd := &t.nodes[cohort]
	var cands []int
	for _, c := range nd.cohorts {
		if w := s.tournament(c, entries, vals); w >= 0 {
			cands = append(cands, w)
		}
	}
	for i, e := range entries {
		if t.nodes[e.q].parent == cohort && slices.Contains(nd.queues, e.q) {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return -1
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if s.fairLess(entries[c], entries[best], cohort, vals) {
			best = c
		}
	}
	return best
}

func (s *Snapshot) fairLess(a, b *gentry, cohort int, vals map[drsKey]drs) bool {
	da, db := vals[drsKey{cohort, a.n.slot}], vals[drsKey{cohort, b.n.slot}]
	if !a.n.noFit() && !b.n.noFit() {
		ba := da.borrowsOn(s.entryFlavor(a), reqOf(&s.ws[a.n.slot].w))
		bb := db.borrowsOn(s.entryFlavor(b), reqOf(&s.ws[b.n.slot].w))
		if ba != bb {
			return !ba
		}
	}
	if c := cmpDRS(da, db); c != 0 {
		return c < 0
	}
	wa, wb := &s.ws[a.n.slot].w, &s.ws[b.n.slot].w
	if wa.Priority != wb.Priority {
		return wa.Priority > wb.Priority
	}
	return wa.Created.Before(wb.Created)
}

func (s *Snapshot) entryFlavor(e *gentry) int {
	return int(s.classes[s.ws[e.n.slot].cls].cands[e.n.ci].f)
}

// Fair-sharing preemption (fairPreemptions): the candidates are the
// queue's own under WithinClusterQueue and, under ReclaimWithinCohort,
// those of every queue in its cohort tree that borrows on a
// flavor-resource needing preemption; in Kueue's CandidatesOrdering.
// With the preemptor's request added to its queue, the target queues
// are visited from the root down, always entering the child with the
// highest share that borrows and has candidates (TargetClusterQueue
// Ordering). Own workloads are taken as they come. While the queue
// stays within nominal quota on what needs preemption
// (FairSharingPreemptWithinNominal, on by default in v0.17), other
// queues' are taken too. Otherwise a candidate is taken if the first
// strategy holds between the shares of the two children of the lowest
// common ancestor (the preemptor's side with its request; the target's
// side without the candidate for LessThanOrEqualToFinalShare, with it for
// LessThanInitialShare), and the candidates it rejects are retried with
// the second strategy, LessThanInitialShare, one per queue. The
// preemptor must then fit (borrowing allowed); the set is filled back
// as in the classical search.

func (s *Snapshot) fairTargets(ctx *pctx) []int32 {
	q, f := ctx.q, ctx.f
	qi := &s.ix.queues[q]
	t := s.ix.tree
	var cands []int32
	if qi.within != polNever {
		for _, v := range s.adm[q][f].slots {
			if s.usesFRs(v, ctx.frs) && s.satisfies(ctx.slot, v, qi.within) {
				cands = append(cands, v)
			}
		}
	}
	if t.nodes[q].parent >= 0 && qi.reclaim != polNever {
		for _, cq := range t.subtreeQueues(t.root(q)) {
			if cq == q || !s.borrowsOnAny(cq, ctx.frs) {
				continue
			}
			for _, v := range s.adm[cq][f].slots {
				if s.usesFRs(v, ctx.frs) && s.satisfies(ctx.slot, v, qi.reclaim) {
					cands = append(cands, v)
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	slices.SortFunc(cands, s.candidateCmp(q))
	s.tAddReq(q, f, ctx.usage, 1)
	fits, removed, retry := s.fairFirst(ctx, cands, s.ix.fs[0])
	if !fits && len(s.ix.fs) > 1 {
		fits, removed = s.fairSecond(ctx, retry, removed)
	}
	s.tAddReq(q, f, ctx.usage, -1)
	if !fits {
		for _, v := range removed {
			s.occupy(v)
		}
		return nil
	}
	removed = s.fillBack(ctx, removed, true)
	for _, v := range removed {
		s.occupy(v)
	}
	return removed
}

// borrowsOnAny is Kueue's cqIsBorrowing.
func (s *Snapshot) borrowsOnAny(q int, frs []int) bool {
	if s.ix.tree.nodes[q].parent < 0 {
		return false
	}
	for _, i := range frs {
		if s.tBorrowingWith(q, i, 0) {
			return true
		}
	}
	return false
}

// fitsFair is workloadFitsForFairSharing: the preemptor's request, added
// for the shares, is taken out again for the check.
func (s *Snapshot) fitsFair(ctx *pctx) bool {
	s.tAddReq(ctx.q, ctx.f, ctx.usage, -1)
	ok := s.workloadFits(ctx, true)
	s.tAddReq(ctx.q, ctx.f, ctx.usage, 1)
	return ok
}

// targetOrdering is Kueue's TargetClusterQueueOrdering.
type targetOrdering struct {
	s         *Snapshot
	q         int
	ancestors map[int]bool
	byQueue   map[int][]int32
	prunedQ   map[int]bool
	prunedC   map[int]bool
}

func (s *Snapshot) newTargetOrdering(q int, cands []int32) *targetOrdering {
	o := &targetOrdering{s: s, q: q, ancestors: map[int]bool{}, byQueue: map[int][]int32{}, prunedQ: map[int]bool{}, prunedC: map[int]bool{}}
	t := s.ix.tree
	for a := t.nodes[q].parent; a >= 0; a = t.nodes[a].parent {
		o.ancestors[a] = true
	}
	for _, v := range cands {
		cq := int(s.ws[v].q)
		o.byQueue[cq] = append(o.byQueue[cq], v)
	}
	return o
}

// next returns the next target queue, or -1 when there is none.
func (o *targetOrdering) next() int {
	t := o.s.ix.tree
	if t.nodes[o.q].parent < 0 {
		if len(o.byQueue[o.q]) > 0 {
			return o.q
		}
		return -1
	}
	root := t.root(o.q)
	for !o.prunedC[root] {
		if cq := o.nextTarget(root); cq >= 0 {
			return cq
		}
	}
	return -1
}

func (o *targetOrdering) nextTarget(cohort int) int {
	s, t := o.s, o.s.ix.tree
	nd := &t.nodes[cohort]
	bestQ, bestQD := -1, negativeDRS
	for _, cq := range nd.queues {
		if o.prunedQ[cq] {
			continue
		}
		d := s.drsOf(cq)
		switch c := cmpDRS(d, bestQD); {
		case (!d.borrowing && cq != o.q) || len(o.byQueue[cq]) == 0:
			o.prunedQ[cq] = true
		case c == 0:
			if s.candidateCmp(o.q)(o.byQueue[cq][0], o.byQueue[bestQ][0]) < 0 {
				bestQ = cq
			}
		case c > 0:
			bestQ, bestQD = cq, d
		}
	}
	bestC, bestCD := -1, negativeDRS
	for _, c := range nd.cohorts {
		if o.prunedC[c] {
			continue
		}
		d := s.drsOf(c)
		if !d.borrowing && !o.ancestors[c] {
			o.prunedC[c] = true
		} else if cmpDRS(d, bestCD) >= 0 {
			bestC, bestCD = c, d
		}
	}
	if bestC < 0 && bestQ < 0 {
		o.prunedC[cohort] = true
		return -1
	}
	if bestC >= 0 && cmpDRS(bestCD, bestQD) >= 0 {
		return o.nextTarget(bestC)
	}
	return bestQ
}

func (o *targetOrdering) pop(cq int) int32 {
	v := o.byQueue[cq][0]
	o.byQueue[cq] = o.byQueue[cq][1:]
	return v
}

// almostLCAs returns the children of the lowest common ancestor of
// queues p and c on the way to each.
func (s *Snapshot) almostLCAs(p, c int) (int, int) {
	t := s.ix.tree
	onPath := map[int]bool{}
	for a := t.nodes[p].parent; a >= 0; a = t.nodes[a].parent {
		onPath[a] = true
	}
	lca := -1
	for a := t.nodes[c].parent; a >= 0; a = t.nodes[a].parent {
		if onPath[a] {
			lca = a
			break
		}
	}
	below := func(n int) int {
		for t.nodes[n].parent != lca {
			n = t.nodes[n].parent
		}
		return n
	}
	return below(p), below(c)
}

func (s *Snapshot) strategyHolds(st fsStrategy, preemptorNew, targetOld, targetNew drs) bool {
	if st == fsFinal {
		return cmpDRS(preemptorNew, targetNew) <= 0
	}
	return cmpDRS(preemptorNew, targetOld) < 0
}

// fairFirst is runFirstFsStrategy.
func (s *Snapshot) fairFirst(ctx *pctx, cands []int32, st fsStrategy) (bool, []int32, []int32) {
	o := s.newTargetOrdering(ctx.q, cands)
	var removed, retry []int32
	withinNominal := !s.borrowsOnAny(ctx.q, ctx.frs)
	for {
		cq := o.next()
		if cq < 0 {
			return false, removed, retry
		}
		if cq == ctx.q || withinNominal {
			v := o.pop(cq)
			s.vacate(v)
			removed = append(removed, v)
			if s.fitsFair(ctx) {
				return true, removed, nil
			}
			continue
		}
		pa, ta := s.almostLCAs(ctx.q, cq)
		pNew, tOld := s.drsOf(pa), s.drsOf(ta)
		for len(o.byQueue[cq]) > 0 {
			v := o.pop(cq)
			x := &s.ws[v]
			s.tAddReq(cq, int(x.fl), reqOf(&x.w), -1)
			tNew := s.drsOf(ta)
			s.tAddReq(cq, int(x.fl), reqOf(&x.w), 1)
			if s.strategyHolds(st, pNew, tOld, tNew) {
				s.vacate(v)
				removed = append(removed, v)
				if s.fitsFair(ctx) {
					return true, removed, nil
				}
				break
			}
			retry = append(retry, v)
		}
	}
}

// fairSecond is runSecondFsStrategy (rule S2-b).
func (s *Snapshot) fairSecond(ctx *pctx, retry, removed []int32) (bool, []int32) {
	o := s.newTargetOrdering(ctx.q, retry)
	for {
		cq := o.next()
		if cq < 0 {
			return false, removed
		}
		pa, ta := s.almostLCAs(ctx.q, cq)
		if s.strategyHolds(fsInitial, s.drsOf(pa), s.drsOf(ta), drs{}) {
			v := o.pop(cq)
			s.vacate(v)
			removed = append(removed, v)
			if s.fitsFair(ctx) {
				return true, removed
			}
		}
		o.prunedQ[cq] = true
	}
}
