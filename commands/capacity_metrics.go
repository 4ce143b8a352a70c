package commands

import (
	"context"
	"fmt"

	"github.com/gpubot/gpubot/allocator"
)

// Capacity is the per-flavor capacity view that /gpu capacity shows
// (used, free, fragmentation against the recent request mix), for
// metrics and other readers outside a chat.
func (s *Service) Capacity(ctx context.Context) ([]allocator.FlavorCapacity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, err := s.deps.Cluster.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	return snap.Capacity(s.mix(&call{ctx: ctx, now: s.deps.Clock.Now()})), nil
}
