package allocator

import "time"

// One head a cycle (the AdmissionFairSharing and FirstComeFirstServed
// modes), a head that cannot be admitted has no effect but its class's
// drop: the quota it holds back is given back before the next head. So
// a nomination known to fail need not be run. Most failures repeat: a
// class's next head is nominated again in the same state, or after
// changes that only take room (admissions), and fails the same way. A
// failMemo records a class's failure and what could undo it, per
// candidate flavor f:
//
//   - freedGPUs[f]: GPUs given back on f (an end, a preemption, an
//     eviction): more quota and free nodes;
//   - flipGen[f] and reclaimGen[f], only if the queue may reclaim f
//     (mayReclaim): a queue starting or stopping to borrow, or admitting
//     while it borrows, changes the other queues' candidates;
//   - whether the GPUs fitted the queue's available quota on f: a fit
//     stops the flavor search there (the flavors before it are not
//     searched), so losing it opens the search to them.
//
// Without those, nothing else makes a failed head admissible: an
// admission by anyone takes quota and nodes, and one that becomes a
// preemption candidate gives back, with all candidates gone, only what
// it took (mayReclaim cannot turn true without a release). One head a
// cycle, no quota is held back for a head (there is no other head in
// its cycle to hold it from), so no nomination sees such a hold. A later head of the class (lower priority,
// or equal and not earlier Created) has no more candidates than the one
// recorded.
//
// A release (or a borrowing change, or an earlier head) does not undo
// the memo on a flavor where the head has no preemption candidates now
// (noCandidates: it may not reclaim there, and its queue has no admitted
// workload there it may preempt). There the flavor fails exactly when
// the GPUs exceed the queue's available quota now, or the pods do not
// fit on the free nodes; the memo keeps whether they did not fit
// (noNodes) and the flavor's rise counter at the pod's size: whether
// pods fit depends only on each node's ⌊free/m⌋ (m the pod's GPUs, the
// whole request for LevelHost: podCap, also per rack and block), which
// admissions only lower, so while no node's ⌊free/m⌋ has grown since,
// they still do not fit; otherwise (they fitted then, or a node's
// ⌊free/m⌋ grew) the free nodes are asked now (feasible). These facts do not depend on the head, so they
// hold for every head of the class, and a success does not undo them.
// Where the head has candidates the memo keeps to the counters above.
//
// The memo is a cache (the nominations are exact without it);
// TestFailMemoChangesNothing, TestPropertyEstimator and the reference
// tests compare against runs that do not share it.
type failMemo struct {
	ok      bool
	prio    int32
	created time.Time
	per     []memoFlavor // per candidate flavor of the class
}

type memoFlavor struct {
	freed   int64
	flip    uint64
	reclaim uint64
	rise    uint64 // the flavor's rise[riseAt(c)]
	mayRec  bool
	fits    bool
	noNodes bool // the pods did not fit on the free nodes
}

// riseAt is the free count whose multiples decide c's node fit: the
// whole request on one node for LevelHost, else one pod (podCap sums
// ⌊free/per⌋ over the nodes, or a rack's or a block's). Capped at the
// index that never moves.
func (s *Snapshot) riseAt(c cand, topo Level) int {
	m := int(c.per)
	if topo == LevelHost {
		m *= int(c.pods)
	}
	return min(m, len(s.fl[c.f].rise)-1)
}

// noCandidates reports whether the head w of queue q has no preemption
// candidates on flavor f now: it may not reclaim there, and its queue
// has no admitted workload on f it may preempt (with
// LowerOrNewerEqualPriority any admitted one of equal priority counts).
func (s *Snapshot) noCandidates(q, f int, w *Workload) bool {
	if s.ix.fcfs {
		return true
	}
	if s.mayReclaim(q, f) {
		return false
	}
	qi := &s.ix.queues[q]
	if qi.within == polNever {
		return true
	}
	for _, ps := range s.adm[q][f].prio {
		if ps.n > 0 && (ps.prio < w.Priority || (ps.prio == w.Priority && qi.within == polLowerOrNewerEqual)) {
			return false
		}
	}
	return true
}

// memoFails reports whether the head w of class c (queue q) is known to
// fail its nomination.
func (s *Snapshot) memoFails(m *failMemo, c *class, q int, w *Workload) bool {
	if !m.ok {
		return false
	}
	later := (w.Priority < m.prio || (w.Priority == m.prio && !w.Created.Before(m.created)))
	for i, k := range c.cands {
		if k.never {
			continue // never tried
		}
		e := &m.per[i]
		f := k.f
		if later {
			if e.fits && w.GPUs > s.available(q, int(f)) {
				return false
			}
			if e.freed == s.freedGPUs[f] && (!e.mayRec || (e.flip == s.flipGen[f] && e.reclaim == s.reclaimGen[f])) {
				continue
			}
		}
		// Without candidates the flavor fails exactly when the GPUs
		// exceed the quota or the pods the nodes; the nodes hold no
		// more pods than when they did not fit as long as no node's
		// free count has reached a new multiple of the pod's GPUs, and
		// otherwise the free nodes say it now.
		if !s.noCandidates(q, int(f), w) ||
			(w.GPUs <= s.available(q, int(f)) && (!e.noNodes || e.rise != s.fl[f].rise[s.riseAt(k, w.Topology)]) &&
				s.feasible(k, w.Topology)) {
			return false
		}
	}
	return true
}

// memoFailure records that head w of class c (queue q) failed.
func (s *Snapshot) memoFailure(m *failMemo, c *class, q int, w *Workload) {
	if len(m.per) != len(c.cands) {
		m.per = make([]memoFlavor, len(c.cands))
	}
	m.ok, m.prio, m.created = true, w.Priority, w.Created
	for i, k := range c.cands {
		f := int(k.f)
		m.per[i] = memoFlavor{freed: s.freedGPUs[f], flip: s.flipGen[f], reclaim: s.reclaimGen[f],
			rise: s.fl[f].rise[s.riseAt(k, w.Topology)], mayRec: s.mayReclaim(q, f),
			fits: w.GPUs <= s.available(q, f), noNodes: !s.feasible(k, w.Topology)}
	}
}
