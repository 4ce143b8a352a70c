package commands

import "github.com/gpubot/gpubot/allocator"

// LockWaiters is how many calls hold or wait for request id's lock (for
// tests of concurrent operations on one request).
func (s *Service) LockWaiters(id string) int {
	s.reqs.mu.Lock()
	defer s.reqs.mu.Unlock()
	if e := s.reqs.m[id]; e != nil {
		return e.refs
	}
	return 0
}

// MarkEstimatesStale marks the estimates stale as a change would, without
// changing anything.
func (s *Service) MarkEstimatesStale() { s.estimates.changed() }

// SpotSimulations is how many simulations the spot offers have made.
func (s *Service) SpotSimulations() uint64 { return s.spotSims.Load() }

// SnapshotCopies is how many copies of the cluster's state the service
// has made.
func (s *Service) SnapshotCopies() uint64 { return s.copies.Load() }

// BareSnapshots is how many empty snapshots the elastic offers' checks
// have made.
func (s *Service) BareSnapshots() uint64 { return s.bares.Load() }

// WhatIfSimulations is how many simulations what-ifs have made.
func (s *Service) WhatIfSimulations() uint64 { return s.hypos.sims.Load() }

// FactsComputed is how many of the views' facts (facts.go) reads have
// computed.
func (s *Service) FactsComputed() uint64 { return s.factsComputed.Load() }

// HoldOwnEstimates makes every request's own estimate signal started and
// then wait for a value from hold before it is computed.
func (s *Service) HoldOwnEstimates(started chan<- struct{}, hold <-chan struct{}) {
	s.estimateOne = func(snap *allocator.Snapshot, id string, opts allocator.EstimateOptions) allocator.Estimate {
		started <- struct{}{}
		<-hold
		return allocator.EstimateFor(snap, id, opts)
	}
}

// LateEstimates is how many requests' own estimates missed the wait, and
// how many of those have completed since.
func (s *Service) LateEstimates() (late, done uint64) { return s.ownLate.Load(), s.lateDone.Load() }

// ViewSnapshot is the current view's snapshot (not a copy: read only).
func (s *Service) ViewSnapshot() *allocator.Snapshot { return s.view().snap }

// SetPostChunk sets how many moved estimates a refresh posts in one write
// section, until the returned restore.
func SetPostChunk(n int) (restore func()) {
	old := postChunk
	postChunk = n
	return func() { postChunk = old }
}

// SetBetweenChunks has fn run between a refresh's chunks of posts, until
// the returned restore.
func SetBetweenChunks(fn func()) (restore func()) {
	old := betweenChunks
	betweenChunks = fn
	return func() { betweenChunks = old }
}

// BusyChanges is how many changes since the last refresh make the queue
// busy (no checkpoints kept).
const BusyChanges = busyChanges
