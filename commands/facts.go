package commands

import (
	"sync"
	"sync/atomic"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// viewFacts are what reads work out from a view's snapshot, worked out
// once per view and shared by every read of it: a view never changes,
// so neither do they. Capacity's table (per flavor, against the view's
// request mix, and bare) and the queues' standing (usage's table) are
// computed at the first read that needs them, on the view's snapshot
// itself: Capacity and Standing only read a snapshot (they fill no
// cache), so they may run on the shared one, beside readers cloning it.
// A new view (publish, setEstimates) starts with no facts.
type viewFacts struct {
	// computed counts the facts computed, for all views (for tests).
	computed *atomic.Uint64
	mu       sync.Mutex
	capacity *[]allocator.FlavorCapacity
	bare     *[]allocator.FlavorCapacity
	standing *[]allocator.QueueStanding
}

// once returns *slot, computing it with fn on snap (a view's: fn must
// only read it) the first time.
func once[T any](f *viewFacts, slot **[]T, snap *allocator.Snapshot, fn func(*allocator.Snapshot) []T) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *slot == nil {
		f.computed.Add(1)
		v := fn(snap)
		*slot = &v
	}
	return **slot
}

// newFacts are a new view's facts, none computed yet.
func (s *Service) newFacts() *viewFacts { return &viewFacts{computed: &s.factsComputed} }

// facts returns v's facts (made if v has none: a view built by hand in
// a test).
func (v *view) facts() *viewFacts {
	if v.memo == nil {
		return &viewFacts{computed: &atomic.Uint64{}}
	}
	return v.memo
}

// capacityFacts are /gpu capacity's tables for c, against the recent
// requests' mix and bare (no mix), and the cluster they are of. In a read
// with published estimates they are the view's, computed once per view
// (the mix is the view's too); otherwise they are worked out now. The
// slices and their maps are shared: read only.
func (s *Service) capacityFacts(c *call) (cl *allocator.Cluster, withMix, bare []allocator.FlavorCapacity, err error) {
	v := s.view()
	if c.writing || c.snap != nil || v.estAt.IsZero() {
		snap, err := s.snapshot(c)
		if err != nil {
			return nil, nil, nil, err
		}
		return snap.Cluster(), snap.Capacity(s.mix(c)), snap.Capacity(nil), nil
	}
	f := v.facts()
	withMix = once(f, &f.capacity, v.snap, func(sn *allocator.Snapshot) []allocator.FlavorCapacity { return sn.Capacity(v.mix) })
	bare = once(f, &f.bare, v.snap, func(sn *allocator.Snapshot) []allocator.FlavorCapacity { return sn.Capacity(nil) })
	return v.snap.Cluster(), withMix, bare, nil
}

// standing is every queue's standing for c (usage's table): in a read,
// the view's, computed once per view. Shared: read only.
func (s *Service) standing(c *call) ([]allocator.QueueStanding, error) {
	if c.writing || c.snap != nil {
		snap, err := s.snapshot(c)
		if err != nil {
			return nil, err
		}
		return snap.Standing(), nil
	}
	v := s.view()
	f := v.facts()
	return once(f, &f.standing, v.snap, (*allocator.Snapshot).Standing), nil
}

// isRunning is usage's filter of the requests running now.
func isRunning(r records.Request) bool { return r.State == records.StateRunning }

// scorable is calibration's filter, but for the period and the team: a
// request that started unpreempted after a known first estimate.
func scorable(r records.Request) bool {
	return !r.AdmittedAt.IsZero() && r.Preemptions == 0 && r.FirstEstimate != nil && r.FirstEstimate.Known && !r.FirstEstimate.At.After(r.AdmittedAt)
}

// requestsIn are the requests in one of the cache's sets (running,
// scorable: kept with every change, so that usage does not look through
// every request), in ID order, shallow (read only); with writes pending
// in c, the requests keep accepts, read through them.
func (s *Service) requestsIn(c *call, set func(*requestCache) map[string]bool, keep func(records.Request) bool) []records.Request {
	if len(c.w.order) > 0 {
		rs, _ := s.listRequests(c, keep)
		return rs
	}
	return s.cache.listIn(set)
}
