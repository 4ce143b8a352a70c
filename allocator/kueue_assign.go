package allocator

import "math"

// Kueue's flavor assigner (pkg/scheduler/flavorassigner/flavorassigner.go,
// findFlavorForPodSets, fitsResourceQuota, isPreferred,
// shouldTryNextFlavor) for the general engine. A workload is one pod set
// whose resources (GPUs, CPU, memory) are in one resource group: every
// resource takes the same flavor. For each of the queue's flavors in
// order, every resource the workload asks for gets a mode:
//
//   - noFit when it is more than the queue could ever use there
//     (potentialAvailable), or when it does not fit now and preemption
//     may not be tried: only when the request is within the queue's
//     nominal quota, or reclaiming inside a subtree of the cohort tree
//     could make room, or the queue may preempt while borrowing
//     (borrowWithinCohort, or Fair Sharing with reclaimWithinCohort);
//   - fit when it fits the queue's available quota now, with the height
//     of the smallest cohort subtree it borrows from (0: none);
//   - otherwise what the preemption oracle (Kueue's SimulatePreemption:
//     the preemption search for this resource alone, ignoring nodes)
//     finds: reclaim when every target is in other queues, preempt when
//     some is the queue's own, noCandidates when there are none, with
//     the borrowing height after the preemption.
//
// The flavor's mode is its resources' worst. The search stops at the
// first flavor whose mode shouldTryNextFlavor rejects going past (a fit
// without borrowing; with whenCanBorrow MayStopSearch any fit; with
// whenCanPreempt MayStopSearch a flavor where preemption works), else
// the best flavor tried wins by isPreferred (BorrowingOverPreemption:
// fit, then reclaim, then preempt, then noCandidates, ties by the lower
// borrowing height, then the earlier flavor; PreemptionOverBorrowing:
// the lower height first, then the mode).

type pmode uint8

const (
	pmNoFit pmode = iota
	pmNoCandidates
	pmPreempt
	pmReclaim
	pmFit
)

type gmode struct {
	pm     pmode
	borrow int
}

var worstMode = gmode{pm: pmNoFit, borrow: math.MaxInt}

func (qi *queueInfo) preferred(a, b gmode) bool {
	if a.pm == pmNoFit {
		return false
	}
	if b.pm == pmNoFit {
		return true
	}
	if qi.preferPreempt {
		if a.borrow != b.borrow {
			return a.borrow < b.borrow
		}
		return a.pm > b.pm
	}
	if a.pm != b.pm {
		return a.pm > b.pm
	}
	return a.borrow < b.borrow
}

func (qi *queueInfo) tryNext(m gmode) bool {
	switch {
	case m.pm == pmNoFit || m.pm == pmNoCandidates:
		return true
	case (m.pm == pmPreempt || m.pm == pmReclaim) && !qi.preemptStop:
		return true
	case m.borrow > 0 && qi.borrowTryNext:
		return true
	}
	return false
}

// assignment is the flavor search's result on a class's candidates.
type assignment struct {
	ci   int // index of the chosen candidate; -1 for none
	mode gmode
	need []int // flavor-resources needing preemption
	last int   // index of the last candidate tried
	// targets the oracle found on the chosen candidate, when its request
	// is of one resource (then they are GetTargets' own)
	targets []int32
}

// assignFrom runs the flavor search for the pending workload in slot,
// from its class's candidate from on, on quota alone.
func (s *Snapshot) assignFrom(slot int32, from int) assignment {
	x := &s.ws[slot]
	q := int(x.q)
	qi := &s.ix.queues[q]
	cands := s.classes[x.cls].cands
	req := reqOf(&x.w)
	best := assignment{ci: -1, mode: worstMode, last: from - 1}
	for i := from; i < len(cands); i++ {
		best.last = i
		c := cands[i]
		if c.never {
			continue
		}
		f := int(c.f)
		mode := gmode{pm: pmFit}
		var need []int
		var targets []int32
		for r := range numResources {
			v := req[r]
			if v == 0 {
				continue
			}
			m, t := s.fitsResourceQuota(slot, q, c, r, v)
			if m.pm != pmFit && m.pm != pmNoFit {
				need = append(need, fr(f, r))
				targets = t
			}
			if qi.preferred(mode, m) {
				mode = m
			}
			if mode.pm == pmNoFit {
				break
			}
		}
		if len(need) != 1 || nonZero(req) != 1 {
			targets = nil
		}
		if !qi.tryNext(mode) {
			best.ci, best.mode, best.need, best.targets = i, mode, need, targets
			break
		}
		if qi.preferred(mode, best.mode) {
			best.ci, best.mode, best.need, best.targets = i, mode, need, targets
		}
	}
	return best
}

// fitsResourceQuota is Kueue's fitsResourceQuota for val of resource r
// on candidate c (one pod set: nothing assumed from earlier ones), with
// the oracle's targets.
func (s *Snapshot) fitsResourceQuota(slot int32, q int, c cand, r Resource, val int64) (gmode, []int32) {
	f := int(c.f)
	i := fr(f, r)
	t := s.ix.tree
	if val > t.potential(q, i) {
		return gmode{pm: pmNoFit}, nil
	}
	borrow, mayReclaim := s.lowestSubtreeThatFits(q, i, val)
	if val <= max(0, s.tAvailable(q, i)) {
		return gmode{pm: pmFit, borrow: borrow}, nil
	}
	if val <= t.nodes[q].nominal[i] || mayReclaim || s.canPreemptWhileBorrowing(q) {
		return s.oracle(slot, q, c, r, val)
	}
	return gmode{pm: pmNoFit, borrow: borrow}, nil
}

func nonZero(v resVec) int {
	n := 0
	for _, x := range v {
		if x != 0 {
			n++
		}
	}
	return n
}

func (s *Snapshot) canPreemptWhileBorrowing(q int) bool {
	qi := &s.ix.queues[q]
	return qi.bwc || (s.ix.fs != nil && qi.reclaim != polNever)
}

// oracle is Kueue's SimulatePreemption (preemption_oracle.go): the
// preemption search for val of resource r on candidate c alone, and the
// borrowing height once its targets are gone. Unlike Kueue's, it places
// the pods too (see the Caveats).
func (s *Snapshot) oracle(slot int32, q int, c cand, r Resource, val int64) (gmode, []int32) {
	f := int(c.f)
	var usage resVec
	usage[r] = val
	ctx := pctx{slot: slot, q: q, f: f, c: c, frs: []int{fr(f, r)}, usage: usage, place: true}
	targets := s.targets(&ctx)
	i := fr(f, r)
	if len(targets) == 0 {
		b, _ := s.lowestSubtreeThatFits(q, i, val)
		return gmode{pm: pmNoCandidates, borrow: b}, nil
	}
	for _, v := range targets {
		s.vacate(v)
	}
	b, _ := s.lowestSubtreeThatFits(q, i, val)
	for _, v := range targets {
		s.occupy(v)
	}
	for _, v := range targets {
		if int(s.ws[v].q) == q {
			return gmode{pm: pmPreempt, borrow: b}, targets
		}
	}
	return gmode{pm: pmReclaim, borrow: b}, targets
}

// nomination is what a cycle does with one head: fit, preempt (with or
// without targets) or noFit, on the chosen candidate.
type nomination struct {
	slot    int32
	ci      int
	mode    gmode
	fit     bool // fits by quota and on nodes
	targets []int32
	// reserve is what Kueue holds back for a head that needs preemption
	// but found no targets (quotaResourcesToReserve).
	reserve resVec
}

func (n *nomination) noFit() bool { return n.ci < 0 }

// nominate is Kueue's getAssignments for the head in slot, on the
// snapshot as it is: the flavor search on quota; a fit that has no room
// on the nodes becomes a preemption on that flavor (Kueue's TAS step);
// a preemption gets its targets, nodes included (GetTargets). A
// preemption without targets that stopped before the last flavor goes
// on from the next one, as Kueue does at the workload's next attempt
// (LastTriedFlavorIdx, PendingFlavors: it is requeued at once).
func (s *Snapshot) nominate(slot int32) nomination {
	x := &s.ws[slot]
	cands := s.classes[x.cls].cands
	req := reqOf(&x.w)
	from := 0
	for {
		a := s.assignFrom(slot, from)
		if a.ci < 0 {
			return nomination{slot: slot, ci: -1}
		}
		c := cands[a.ci]
		n := nomination{slot: slot, ci: a.ci, mode: a.mode}
		need := a.need
		if a.mode.pm == pmFit {
			if s.feasibleFor(c, &x.w, x.w.Topology) {
				n.fit = true
				return n
			}
			need = need[:0]
			for r := range numResources {
				if req[r] > 0 {
					need = append(need, fr(int(c.f), r))
				}
			}
		}
		switch {
		case a.targets != nil && a.mode.pm != pmFit:
			n.targets = a.targets // the oracle's search was GetTargets'
		case a.mode.pm != pmNoCandidates || nonZero(req) > 1:
			ctx := pctx{slot: slot, q: int(x.q), f: int(c.f), c: c, frs: need, usage: req, place: true}
			n.targets = s.targets(&ctx)
		}
		if len(n.targets) > 0 {
			return n
		}
		if a.last < len(cands)-1 {
			from = a.last + 1
			continue
		}
		n.reserve = s.toReserve(int(x.q), int(c.f), req, a.mode)
		return n
	}
}

// toReserve is Kueue's quotaResourcesToReserve: a head that needs
// preemption and has no targets holds, for the rest of the cycle, its
// request up to its borrowing limit if it would borrow, else up to its
// nominal quota.
func (s *Snapshot) toReserve(q, f int, req resVec, m gmode) resVec {
	nd := &s.ix.tree.nodes[q]
	var out resVec
	for r, v := range req {
		if v == 0 {
			continue
		}
		i := fr(f, Resource(r))
		u := s.tuse[q][i]
		if m.borrow > 0 {
			out[r] = v
			if nd.borrowSet[i] {
				out[r] = min(v, nd.nominal[i]+nd.borrow[i]-u)
			}
		} else {
			out[r] = min(v, nd.nominal[i]-u)
		}
		out[r] = max(0, out[r])
	}
	return out
}
