package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The GPU-only engine skips classes, caches preemption answers and keeps
// shadows; these tests hold it to the general engine, the plain
// transcription of Kueue's cycle (kueue_cycle.go, kueue_assign.go,
// kueue_preempt.go), on the clusters both handle.

// toGeneral makes s, a snapshot of a simple cluster, run the general
// engine: its own index with the tree's usage built from what is
// admitted.
func toGeneral(s *Snapshot) *Snapshot {
	ix := *s.ix
	ix.simple = false
	s.ix = &ix
	s.tuse = make([][]int64, len(ix.tree.nodes))
	for n := range s.tuse {
		s.tuse[n] = make([]int64, ix.tree.nfr)
	}
	for slot := range s.ws {
		x := &s.ws[slot]
		if x.live && x.fl >= 0 {
			s.tAddReq(int(x.q), int(x.fl), reqOf(&x.w), 1)
		}
	}
	return s
}

// engineView is viewOf without what only the general engine keeps.
func engineView(s *Snapshot) stateView {
	v := viewOf(s)
	v.TreeUse = nil
	return v
}

// naiveSchedule runs the general engine's Schedule on s (which it turns
// into a general snapshot) and lists the events as evs does.
func naiveSchedule(s *Snapshot) []string {
	return evs(toGeneral(s).Schedule())
}

// TestScheduleMatchesDefinitionBusy compares the cycle with its definition
// on a busy, scaled-down copy of the benchmark cluster, through many
// cycles, so that the preemption caches see churn.
func TestScheduleMatchesDefinitionBusy(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 8))
			c := MakeCluster().Fair(6*time.Hour, 10*time.Minute)
			if seed%2 == 1 {
				c.Policy = Policy{}
			}
			for _, f := range []string{"h100", "a100"} {
				c.Flavor(f, 8).Nodes(f, 24, 8, 4, 2)
			}
			pol := []Preemption{
				{WithinClusterQueue: PreemptLowerPriority, ReclaimWithinCohort: PreemptAny},
				{WithinClusterQueue: PreemptLowerOrNewerEqualPriority, ReclaimWithinCohort: PreemptLowerPriority},
				{ReclaimWithinCohort: PreemptAny},
				{WithinClusterQueue: PreemptLowerPriority},
			}
			for q := range 4 {
				qw := MakeQueue(fmt.Sprintf("team%d", q)).Cohort("research").Quota("h100", 48).Quota("a100", 48)
				qw.Preemption = pol[q]
				c.Queue(qw)
			}
			s := newSnapshot(t, c.Obj(), benchWorkloads(r, 300, t0)...)
			kinds := map[EventKind]int{}
			for step := range 40 {
				naive := s.Clone()
				want := naiveSchedule(naive)
				events := s.Schedule()
				if diff := cmpDiff(engineView(naive), engineView(s)); diff != "" {
					t.Fatalf("step %d: state differs from the general engine's:\n%s", step, diff)
				}
				for _, e := range events {
					kinds[e.Kind]++
				}
				if diff := cmpDiff(want, evs(events)); diff != "" {
					t.Fatalf("step %d: Schedule differs from the general engine (-want +got):\n%s", step, diff)
				}
				// End a few running workloads and add new ones.
				for range 1 + r.IntN(6) {
					if id, ok := pick(r, s, true); ok {
						s.Release(id)
					}
				}
				for _, w := range benchWorkloads(r, 1+r.IntN(5), s.Now()) {
					w.ID = fmt.Sprintf("s%02d-%s", step, w.ID)
					s.Add(w)
				}
				s.accrue(s.Now().Add(time.Duration(r.IntN(60)) * time.Minute))
			}
			if kinds[EventAdmitted] < 100 || kinds[EventPreempted] == 0 {
				t.Errorf("too quiet to test much: %v", kinds)
			}
			checkInvariants(t, s)
		})
	}
}
