package commands

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/gpubot/gpubot/allocator"
)

// Capacity is the per-flavor capacity view that /gpu capacity shows
// (used, free, fragmentation against the recent request mix), for
// metrics and other readers outside a chat. Like every read, it answers
// from the latest view.
func (s *Service) Capacity(ctx context.Context) ([]allocator.FlavorCapacity, error) {
	c := &call{ctx: ctx, now: s.deps.Clock.Now()}
	_, withMix, _, err := s.capacityFacts(c)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	return cloneCapacity(withMix), nil
}

// cloneCapacity copies shared capacity rows for a caller that may keep
// or change them.
func cloneCapacity(in []allocator.FlavorCapacity) []allocator.FlavorCapacity {
	out := slices.Clone(in)
	for i := range out {
		out[i].Largest = maps.Clone(out[i].Largest)
	}
	return out
}
