package allocator

// The GPU-only engine's nomination: the flavor assignment of
// kueue_assign.go with one resource, one cohort level and Kueue's
// default flavorFungibility, on the arithmetic of quota.go: the first
// flavor where the GPUs fit the queue's available quota is taken (with
// or without borrowing); before it, a flavor where they do not fit but
// are within the queue's nominal quota gets the preemption oracle's
// answer (reclaim, preempt or no candidates), and among such flavors,
// when none fits, reclaim beats preempt beats none, then not borrowing
// after the preemption, then the earlier flavor.

// fastMode is fitsResourceQuota for the GPUs of the workload in slot on
// its class's i-th candidate, with the preemption targets found. best is
// the best mode found on earlier flavors: a preemption search that could
// not beat it is not run (its mode is then pmNoCandidates, which loses
// too).
func (s *Snapshot) fastMode(slot int32, i int, c cand, best gmode) (gmode, []int32) {
	x := &s.ws[slot]
	q, f, gpus := int(x.q), int(c.f), x.w.GPUs
	qi := &s.ix.queues[q]
	nom := qi.quota[f].nominal
	// The height of the smallest subtree that fits: 0 within the queue's
	// nominal quota, else the cohort's (1).
	height := func() int {
		if qi.cohort >= 0 && s.used[q][f]+gpus > nom {
			return 1
		}
		return 0
	}
	if gpus <= s.available(q, f) {
		return gmode{pm: pmFit, borrow: height()}, nil
	}
	if gpus > nom {
		return gmode{pm: pmNoFit, borrow: height()}, nil
	}
	// Only fit beats reclaiming without borrowing; only reclaim (other
	// queues' candidates) beats preempting without borrowing.
	if best.borrow == 0 && (best.pm == pmReclaim || (best.pm == pmPreempt && !s.othersHaveCandidates2(q, f, x.w.Priority))) {
		return gmode{pm: pmNoCandidates, borrow: height()}, nil
	}
	// After a flavor where it preempts without borrowing only reclaim
	// (all targets in other queues) can win here: a search that would
	// go on to the queue's own candidates is not finished.
	targets := s.getTargets(slot, i, true, best.pm == pmPreempt && best.borrow == 0)
	if len(targets) == 0 {
		return gmode{pm: pmNoCandidates, borrow: height()}, nil
	}
	own := false
	for _, v := range targets {
		s.vacate(v)
		own = own || int(s.ws[v].q) == q
	}
	b := height()
	for _, v := range targets {
		s.occupy(v)
	}
	if own {
		return gmode{pm: pmPreempt, borrow: b}, targets
	}
	return gmode{pm: pmReclaim, borrow: b}, targets
}

// assignFast is assignFrom for the GPU-only engine.
func (s *Snapshot) assignFast(slot int32, from int) assignment {
	x := &s.ws[slot]
	qi := &s.ix.queues[x.q]
	cands := s.classes[x.cls].cands
	best := assignment{ci: -1, mode: worstMode, last: from - 1}
	// With the default flavorFungibility the search stops at the first
	// flavor where the GPUs fit, and a fit beats every preemption mode
	// of the flavors before it: their preemption searches are not run.
	for i := from; i < len(cands); i++ {
		if c := cands[i]; !c.never && x.w.GPUs <= s.available(int(x.q), int(c.f)) {
			m, _ := s.fastMode(slot, i, c, best.mode)
			return assignment{ci: i, mode: m, last: i}
		}
	}
	for i := from; i < len(cands); i++ {
		best.last = i
		c := cands[i]
		if c.never {
			continue
		}
		m, targets := s.fastMode(slot, i, c, best.mode)
		if !qi.tryNext(m) {
			best.ci, best.mode, best.targets = i, m, targets
			break
		}
		if qi.preferred(m, best.mode) {
			best.ci, best.mode, best.targets = i, m, targets
		}
	}
	return best
}

// nominateFast is nominate for the GPU-only engine.
func (s *Snapshot) nominateFast(slot int32) nomination {
	x := &s.ws[slot]
	q := int(x.q)
	cands := s.classes[x.cls].cands
	from := 0
	for {
		a := s.assignFast(slot, from)
		if a.ci < 0 {
			return nomination{slot: slot, ci: -1}
		}
		c := cands[a.ci]
		n := nomination{slot: slot, ci: a.ci, mode: a.mode}
		if a.mode.pm == pmFit && s.feasible(c, x.w.Topology) {
			n.fit = true
			return n
		}
		switch a.mode.pm {
		case pmFit: // fits by quota, not on the nodes
			n.targets = s.getTargets(slot, a.ci, true, false)
		case pmPreempt, pmReclaim:
			n.targets = a.targets
		}
		if len(n.targets) > 0 {
			return n
		}
		if a.last < len(cands)-1 {
			from = a.last + 1
			continue
		}
		f := int(c.f)
		qt := &s.ix.queues[q].quota[f]
		u, v := s.used[q][f], x.w.GPUs
		switch {
		case a.mode.borrow > 0 && qt.borrowSet:
			v = min(v, qt.nominal+qt.borrow-u)
		case a.mode.borrow == 0:
			v = min(v, qt.nominal-u)
		}
		n.reserve[ResourceGPU] = int64(max(0, v))
		return n
	}
}

// othersHaveCandidates2 reports whether queue q may reclaim flavor f and
// another queue of its cohort has candidates for a priority-p preemptor.
func (s *Snapshot) othersHaveCandidates2(q, f int, p int32) bool {
	return s.mayReclaim(q, f) && s.othersHaveCandidates(q, f, p)
}
