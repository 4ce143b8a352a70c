package commands

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

// WhatIfSimulations is how many simulations what-ifs have made.
func (s *Service) WhatIfSimulations() uint64 { return s.hypos.sims.Load() }
