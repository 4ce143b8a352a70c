package allocator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The scheduling cycle skips classes, caches preemption answers and
// keeps shadows; these tests hold it to its definition, written plainly.

// naiveSchedule is the cycle's definition, without classes: repeatedly
// take the untried pending workload first in order (shares recomputed),
// fit it or preempt for it; victims are not retried in the same cycle.
func naiveSchedule(s *Snapshot) []string {
	var out []string
	emit := func(k EventKind, slot, by int32) {
		e := string(k) + ":" + s.ws[slot].w.ID
		if by >= 0 {
			e += "<" + s.ws[by].w.ID
		}
		out = append(out, e)
	}
	tried := map[int32]bool{}
	for {
		best := int32(-1)
		var bestKey orderKey
		for _, c := range s.classes {
			for _, m := range c.members {
				if tried[m] {
					continue
				}
				if k := s.keyOf(m); best < 0 || cmpKey(&k, &bestKey) < 0 {
					best, bestKey = m, k
				}
			}
		}
		if best < 0 {
			return out
		}
		tried[best] = true
		x := &s.ws[best]
		if c, nodes, ok := s.fitClass(s.classes[x.cls].cands, x.w.GPUs, int(x.q), x.w.Topology, x.w.ID); ok {
			s.admitNow(nil, best, c, nodes, emit)
			continue
		}
		if victims, c, ok := referencePreempt(s, best); ok {
			if s.preemptAndAdmit(nil, best, victims, c, emit) {
				for _, v := range victims {
					tried[v] = true
				}
			}
		}
	}
}

// referencePreempt is Kueue's GetTargets written plainly: no quick
// checks, shadows or caches.
func referencePreempt(s *Snapshot, slot int32) ([]int32, cand, bool) {
	if s.ix.fcfs { // FirstComeFirstServed never preempts
		return nil, cand{}, false
	}
	x := &s.ws[slot]
	q, p := int(x.q), x.w.Priority
	qi := &s.ix.queues[q]
	for _, c := range s.classes[x.cls].cands {
		f := int(c.f)
		var own, others []int32
		for v := range s.ws {
			y := &s.ws[v]
			if !y.live || int(y.fl) != f {
				continue
			}
			switch {
			case int(y.q) == q:
				if qi.within != polNever && (y.w.Priority < p ||
					(qi.within == polLowerOrNewerEqual && y.w.Priority == p && y.w.Created.After(x.w.Created))) {
					own = append(own, int32(v))
				}
			case qi.cohort >= 0 && qi.reclaim != polNever && s.ix.queues[y.q].cohort == qi.cohort && s.borrowing(int(y.q), f):
				if qi.reclaim == polAny || y.w.Priority < p {
					others = append(others, int32(v))
				}
			}
		}
		byVictim := func(a, b int32) int { return victimCmp(&s.ws[a], &s.ws[b]) }
		slices.SortFunc(own, byVictim)
		slices.SortFunc(others, byVictim)
		var t []int32
		switch {
		case len(own)+len(others) == 0:
		case len(others) == 0:
			t = s.minimalSet(slot, c, own, true)
		default:
			if s.used[q][f] < qi.quota[f].nominal {
				t = s.minimalSet(slot, c, append(slices.Clone(others), own...), false)
			}
			if len(t) == 0 {
				t = s.minimalSet(slot, c, own, true)
			}
		}
		if len(t) > 0 {
			return t, c, true
		}
	}
	return nil, cand{}, false
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
				for _, e := range events {
					kinds[e.Kind]++
				}
				if diff := cmpDiff(want, evs(events)); diff != "" {
					t.Fatalf("step %d: Schedule differs from its definition (-want +got):\n%s", step, diff)
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
