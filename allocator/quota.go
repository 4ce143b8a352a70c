package allocator

import "math"

// Quota arithmetic, with Kueue's meaning for one cohort level. For queue
// q and flavor f let N be the nominal quota, L the lending limit (N when
// unset), B the borrowing limit (unlimited when unset) and u the GPUs q
// has admitted on f. G = N−L is guaranteed: never lent. The cohort's pool
// is P = Σ L over its queues and its use is C = Σ max(0, u−G). Then
//
//	Available(q) = min(N+B−u, max(0, G−u) + (P−C))
//
// and, for a queue without a cohort, N−u. This is Kueue's
// available(): LocalAvailable plus the parent's available capped by the
// borrowing limit (pkg/cache/scheduler/resource_node.go).

// addUsed changes queue q's admitted GPUs on flavor f by delta and keeps
// the cohort's use C in step.
func (s *Snapshot) addUsed(q, f, delta int) {
	old := s.used[q][f]
	nu := old + delta
	s.used[q][f] = nu
	s.running[q] += delta
	qi := &s.ix.queues[q]
	if co := qi.cohort; co >= 0 {
		g := qi.quota[f].guaranteed
		s.cohortC[co][f] += max(0, nu-g) - max(0, old-g)
	}
}

// available is how many more GPUs of flavor f queue q may admit.
// It may be negative after over-admission.
func (s *Snapshot) available(q, f int) int {
	// availableWith at u = the usage and freed = 0, where the cohort's
	// use is the kept one as it is.
	qi := &s.ix.queues[q]
	qt := &qi.quota[f]
	if !qt.has {
		return 0
	}
	u := s.used[q][f]
	if qi.cohort < 0 {
		return qt.nominal - u
	}
	avail := max(0, qt.guaranteed-u) + s.ix.cohorts[qi.cohort].pool[f] - max(s.cohortC[qi.cohort][f], 0)
	if qt.borrowSet {
		avail = min(avail, qt.nominal+qt.borrow-u)
	}
	return avail
}

// availableWith is available() if q's usage on f were u and the cohort's
// use were lower by freed (reclaimable GPUs of other queues).
func (s *Snapshot) availableWith(q, f, u, freed int) int {
	qi := &s.ix.queues[q]
	qt := &qi.quota[f]
	if !qt.has {
		return 0
	}
	if qi.cohort < 0 {
		return qt.nominal - u
	}
	cur := s.used[q][f]
	// Cohort use with q at u instead of cur, and others lowered by freed.
	c := s.cohortC[qi.cohort][f] - max(0, cur-qt.guaranteed) + max(0, u-qt.guaranteed) - freed
	c = max(c, 0)
	avail := max(0, qt.guaranteed-u) + s.ix.cohorts[qi.cohort].pool[f] - c
	if qt.borrowSet {
		avail = min(avail, qt.nominal+qt.borrow-u)
	}
	return avail
}

// ownLimit is how many more GPUs q may admit on f by its own limits
// alone: N+B−u with a borrowing limit, N−u without a cohort, otherwise
// unlimited.
func (s *Snapshot) ownLimit(q, f int) int {
	qi := &s.ix.queues[q]
	qt := &qi.quota[f]
	switch {
	case !qt.has:
		return 0
	case qi.cohort < 0:
		return qt.nominal - s.used[q][f]
	case qt.borrowSet:
		return qt.nominal + qt.borrow - s.used[q][f]
	}
	return math.MaxInt
}

// fitsQuota reports whether gpus more GPUs fit q's quota on f; with
// allowBorrow false they must also fit within the nominal quota.
func (s *Snapshot) fitsQuota(q, f, gpus int, allowBorrow bool) bool {
	if !allowBorrow && s.used[q][f]+gpus > s.ix.queues[q].quota[f].nominal {
		return false
	}
	return gpus <= s.available(q, f)
}

// borrowing reports whether queue q uses more than its nominal quota of
// flavor f (only queues in a cohort can).
func (s *Snapshot) borrowing(q, f int) bool {
	qi := &s.ix.queues[q]
	return qi.cohort >= 0 && s.used[q][f] > qi.quota[f].nominal
}
