package simcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// Elastic capacity in the simulated cluster. A provisioned flavor's work
// is held, outside the allocator, for the flavor's provisioning time after
// it is submitted (the simulated ProvisioningRequest), then submitted to
// the allocator, which admits it onto the flavor's nodes (the most the
// pool provisions at once) as quota and room allow; its check is reported
// Pending while held and Ready after. A spot flavor's nodes are reclaimed
// from work that has run ReclaimAfter on them: the work is evicted and
// requeued (EventPreempted with no By and a Detail), as Kueue does when a
// spot node goes away. Both happen on the clock, in time order with
// everything else.
//
// Caveat: held work holds no quota (Kueue reserves quota before it
// provisions), and provisioning never fails in the simulated cluster.

// ElasticFlavor is how the simulated cluster treats one elastic flavor.
type ElasticFlavor struct {
	// Check names the provisioned flavor's admission check ("" for spot).
	Check string
	// Provisioning: a provisioned flavor's nodes come this long after the
	// work is submitted. Zero with a Check: at once.
	Provisioning time.Duration
	// ReclaimAfter: a spot flavor's nodes are reclaimed from work that has
	// run this long (0: never).
	ReclaimAfter time.Duration
}

// WithElastic gives the cluster its elastic flavors, by name. Default:
// none (every flavor is reserved).
func WithElastic(fs map[string]ElasticFlavor) Option {
	return func(c *Cluster) { c.elastic = fs }
}

// held is provisioned work waiting for its nodes.
type held struct {
	Workload allocator.Workload `json:"workload"`
	Asked    time.Time          `json:"asked"`
	Ready    time.Time          `json:"ready"`
}

// provisioned says when held work got its nodes.
type provisioned struct {
	Asked time.Time `json:"asked"`
	Ready time.Time `json:"ready"`
}

// elasticState is the elastic part of the saved state.
type elasticState struct {
	Held        []held                 `json:"held,omitempty"`
	Provisioned map[string]provisioned `json:"provisioned,omitempty"`
}

func (e elasticState) clone() elasticState {
	out := elasticState{Held: slices.Clone(e.Held), Provisioned: map[string]provisioned{}}
	for k, v := range e.Provisioned {
		out.Provisioned[k] = v
	}
	return out
}

func (e *elasticState) holding(id string) int {
	return slices.IndexFunc(e.Held, func(h held) bool { return h.Workload.ID == id })
}

// hold takes w if its flavor is provisioned, reporting whether it did.
func (c *Cluster) hold(s *allocator.Snapshot, e *elasticState, w allocator.Workload) bool {
	f, ok := c.elastic[w.Flavor]
	if !ok || f.Check == "" || w.Admission != nil {
		return false
	}
	if e.holding(w.ID) < 0 {
		if _, in := s.Workload(w.ID); !in {
			e.Held = append(e.Held, held{Workload: w, Asked: s.Now(), Ready: s.Now().Add(f.Provisioning)})
		}
	}
	return true
}

// unhold drops id from the held work and its provisioning record.
func unhold(e *elasticState, id string) bool {
	delete(e.Provisioned, id)
	if i := e.holding(id); i >= 0 {
		e.Held = slices.Delete(e.Held, i, i+1)
		return true
	}
	return false
}

// dueElastic is the next elastic happening after s.Now() and at or before
// to: held work whose nodes are ready, or a spot workload to reclaim.
func (c *Cluster) dueElastic(s *allocator.Snapshot, e *elasticState, to time.Time) (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(to) {
			return
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, h := range e.Held {
		consider(h.Ready)
	}
	for _, w := range s.Workloads() {
		if t, ok := c.reclaimAt(w); ok {
			consider(t)
		}
	}
	if next.Before(s.Now()) && !next.IsZero() {
		next = s.Now()
	}
	return next, !next.IsZero()
}

// reclaimAt is when admitted spot workload w loses its nodes.
func (c *Cluster) reclaimAt(w allocator.Workload) (time.Time, bool) {
	if w.Admission == nil {
		return time.Time{}, false
	}
	f, ok := c.elastic[w.Admission.Flavor]
	if !ok || f.ReclaimAfter <= 0 {
		return time.Time{}, false
	}
	t := w.Admission.At.Add(f.ReclaimAfter)
	if w.Duration > 0 && !t.Before(w.Admission.At.Add(w.Duration)) {
		return time.Time{}, false // it ends first
	}
	return t, true
}

// advance moves s to now, releasing held work and reclaiming spot nodes
// in time order with the admissions and ends Advance makes.
func (c *Cluster) advance(s *allocator.Snapshot, e *elasticState, now time.Time) []allocator.Event {
	var events []allocator.Event
	for {
		at, ok := c.dueElastic(s, e, now)
		if !ok {
			break
		}
		events = append(events, s.Advance(at, nil)...)
		for i := 0; i < len(e.Held); {
			h := e.Held[i]
			if h.Ready.After(at) {
				i++
				continue
			}
			e.Held = slices.Delete(e.Held, i, i+1)
			if _, err := s.Add(h.Workload); err == nil {
				e.Provisioned[h.Workload.ID] = provisioned{Asked: h.Asked, Ready: h.Ready}
			}
		}
		for _, w := range s.Workloads() {
			if t, ok := c.reclaimAt(w); ok && !t.After(at) {
				nodes := w.Admission.Nodes
				if _, err := s.Evict(w.ID); err == nil {
					events = append(events, allocator.Event{Kind: allocator.EventPreempted, ID: w.ID, At: at,
						Detail: fmt.Sprintf("spot node %s reclaimed (simulated)", firstOr(nodes, w.Admission.Flavor))})
				}
			}
		}
		events = append(events, s.Schedule()...)
	}
	return append(events, s.Advance(now, nil)...)
}

func firstOr(xs []string, def string) string {
	if len(xs) > 0 {
		return xs[0]
	}
	return def
}

// ProvisioningChecks implements commands.Provisioning: held work's check
// is Pending since it was submitted, and Ready since its nodes came for
// as long as the workload is in the cluster.
func (c *Cluster) ProvisioningChecks(context.Context) (map[string]commands.CheckState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]commands.CheckState{}
	for _, h := range c.el.Held {
		f := c.elastic[h.Workload.Flavor]
		pods := 1
		for _, fl := range c.snap.Cluster().Flavors {
			if fl.Name == h.Workload.Flavor {
				pods, _, _ = allocator.PodShape(h.Workload.GPUs, fl.GPUsPerNode)
			}
		}
		out[h.Workload.ID] = commands.CheckState{Check: f.Check, State: commands.CheckPending, Attempt: 1, Since: h.Asked, Nodes: pods,
			Message: "simulated provisioning"}
	}
	for id, p := range c.el.Provisioned {
		w, ok := c.snap.Workload(id)
		if !ok {
			continue
		}
		out[id] = commands.CheckState{Check: c.elastic[w.Flavor].Check, State: commands.CheckReady, Attempt: 1, Since: p.Ready,
			Message: "simulated provisioning done"}
	}
	return out, nil
}

// withHeld is a copy of s with the held work added as pending, so that
// callers see every workload the cluster has.
func withHeld(s *allocator.Snapshot, e elasticState) *allocator.Snapshot {
	out := s.Clone()
	for _, h := range e.Held {
		_, _ = out.Add(h.Workload)
	}
	return out
}
