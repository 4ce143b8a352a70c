package allocator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestPropertyScheduleWithUndo: what-ifs asked one after another on one
// copy through ScheduleWith and its undo answer exactly as each asked on
// a fresh copy (the same events, the same estimate), and each undo puts
// the copy back as it was, slots and all; undo is offered exactly when
// the cycles changed nothing but the what-if's own workload.
func TestPropertyScheduleWithUndo(t *testing.T) {
	for seed := range uint64(propertyCases) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 31))
			base, _ := randomStateKind(t, r, seed%2 == 1)
			base.Advance(base.Now().Add(time.Hour), nil)
			base.Schedule()
			sim := base.Clone()
			undone := 0
			for i := range 12 {
				w := randomWorkload(r, base.Cluster(), fmt.Sprintf("whatif%02d", i))
				w.Created = base.Now()
				if ws := base.Workloads(); len(ws) > 0 && r.IntN(2) == 0 {
					w.Created = ws[r.IntN(len(ws))].Created // ties broken by ID
				}
				fresh := base.Clone()
				_, wantErr := fresh.Add(w)
				want := fresh.Schedule()
				before, slots, free := viewOf(sim), len(sim.ws), slices.Clone(sim.freeSlots)
				got, undo, err := sim.ScheduleWith(w)
				if (err != nil) != (wantErr != nil) {
					t.Fatalf("what-if %d: error %v, on a fresh copy %v", i, err, wantErr)
				}
				if err != nil {
					if d := cmpDiff(before, viewOf(sim)); d != "" {
						t.Fatalf("what-if %d failed but changed the copy:\n%s", i, d)
					}
					continue
				}
				if d := cmpDiff(want, got); d != "" {
					t.Fatalf("what-if %d: events differ from a fresh copy's (-fresh +reused):\n%s", i, d)
				}
				if d := cmpDiff(EstimateFor(fresh, w.ID, EstimateOptions{}), EstimateFor(sim, w.ID, EstimateOptions{})); d != "" {
					t.Fatalf("what-if %d: estimate differs from a fresh copy's:\n%s", i, d)
				}
				others := slices.ContainsFunc(got, func(e Event) bool { return e.ID != w.ID })
				if others != (undo == nil) {
					t.Fatalf("what-if %d: undo offered %v with events %v", i, undo != nil, got)
				}
				if undo == nil {
					sim = base.Clone()
					continue
				}
				undo()
				undo() // a second call does nothing
				undone++
				if d := cmpDiff(before, viewOf(sim)); d != "" {
					t.Fatalf("what-if %d: undo left the copy changed (-before +after):\n%s", i, d)
				}
				if len(sim.ws) != slots || !slices.Equal(sim.freeSlots, free) {
					t.Fatalf("what-if %d: undo left %d slots (free %v), want %d (free %v)", i, len(sim.ws), sim.freeSlots, slots, free)
				}
				checkInvariants(t, sim)
				checkShadows(t, sim)
			}
			if undone > 0 {
				// A stale undo is ignored.
				_, undo, err := sim.ScheduleWith(randomWorkload(r, base.Cluster(), "late"))
				if err == nil && undo != nil {
					if id, ok := pick(r, sim, true); ok {
						sim.Evict(id)
						after := viewOf(sim)
						undo()
						if d := cmpDiff(after, viewOf(sim)); d != "" {
							t.Fatalf("a stale undo changed the copy:\n%s", d)
						}
					}
				}
			}
		})
	}
}
