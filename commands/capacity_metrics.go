package commands

import (
	"context"
	"fmt"

	"github.com/gpubot/gpubot/allocator"
)

// Capacity is the per-flavor capacity view that /gpu capacity shows
// (used, free, fragmentation against the recent request mix), for
// metrics and other readers outside a chat. Like every read, it answers
// from the latest view.
func (s *Service) Capacity(ctx context.Context) ([]allocator.FlavorCapacity, error) {
	c := &call{ctx: ctx, now: s.deps.Clock.Now()}
	snap, err := s.snapshot(c)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	return snap.Capacity(s.mix(c)), nil
}
