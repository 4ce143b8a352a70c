package allocator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The reclaim-miss cache (pcache, shadow.go) skips a reclaim search that
// failed before while nothing that could make it succeed has happened:
// no GPUs freed on the flavor, no queue starting or stopping to borrow
// there, no borrowing queue admitting more there, and a head with no
// more candidates than the one it was computed for. These tests make
// such a miss go stale in each of those ways, one at a time, and hold
// the GPU-only engine to the general engine (which has no such cache),
// cycle by cycle, so that a validity check removed or loosened shows.

// reclaimCluster is a small cohort where reclaim searches often fail:
// three queues that may reclaim from each other, quotas adding up to
// the cluster, nodes of 8 GPUs.
func reclaimCluster(r *rand.Rand) *Cluster {
	c := MakeCluster()
	if r.IntN(2) == 0 {
		c.Fair(time.Duration(1+r.IntN(3))*time.Hour, 0)
	}
	nf := 1 + r.IntN(2)
	names := []string{"h100", "a100"}[:nf]
	nodes := map[string]int{}
	for _, f := range names {
		nodes[f] = 3 + r.IntN(4)
		c.Flavor(f, 8).Nodes(f, nodes[f], 8, 2, 0)
	}
	within := []string{"", PreemptLowerPriority, PreemptLowerOrNewerEqualPriority}
	reclaim := []string{PreemptLowerPriority, PreemptAny}
	for q := range 3 {
		qw := MakeQueue(fmt.Sprintf("q%d", q)).Cohort("c")
		for _, f := range names {
			qw.Quota(f, nodes[f]*8/3)
		}
		qw.Preempt(within[r.IntN(3)], reclaim[r.IntN(2)])
		c.Queue(qw)
	}
	return c.Obj()
}

func reclaimWorkload(r *rand.Rand, c *Cluster, id string, now time.Time) Workload {
	w := Workload{
		ID:       id,
		Queue:    c.Queues[r.IntN(len(c.Queues))].Name,
		GPUs:     []int{2, 4, 4, 6, 8, 8, 12, 16}[r.IntN(8)],
		Priority: int32(r.IntN(3)),
		Created:  now.Add(-time.Duration(r.IntN(120)) * time.Minute),
		Duration: time.Duration(1+r.IntN(8)) * time.Hour,
	}
	if r.IntN(3) == 0 {
		w.Topology = LevelHost
	}
	if r.IntN(6) == 0 {
		w.Flavor = c.Flavors[r.IntN(len(c.Flavors))].Name
	}
	return w
}

// rememberedMisses counts the classes' valid-looking pcache entries.
func rememberedMisses(s *Snapshot) int {
	n := 0
	for i := range s.classes {
		for _, e := range s.classes[i].pcache {
			if e.ok {
				n++
			}
		}
	}
	return n
}

// TestReclaimMissCacheMatchesDefinition changes the state between cycles
// by one small step at a time (a release, an arrival, time passing), so
// that a miss remembered in one cycle is looked up again after exactly
// one kind of change, and compares every cycle with the general engine.
func TestReclaimMissCacheMatchesDefinition(t *testing.T) {
	remembered, preempted := 0, 0
	for seed := range uint64(120) {
		r := rand.New(rand.NewPCG(seed, 12))
		c := reclaimCluster(r)
		var ws []Workload
		for i := range 10 + r.IntN(15) {
			ws = append(ws, reclaimWorkload(r, c, fmt.Sprintf("w%02d", i), t0))
		}
		s := newSnapshot(t, c, ws...)
		for step := range 40 {
			naive := s.Clone()
			want := naiveSchedule(naive)
			events := s.Schedule()
			if diff := cmpDiff(want, evs(events)); diff != "" {
				t.Fatalf("seed %d step %d: Schedule differs from the general engine (-want +got):\n%s", seed, step, diff)
			}
			if diff := cmpDiff(engineView(naive), engineView(s)); diff != "" {
				t.Fatalf("seed %d step %d: state differs from the general engine's:\n%s", seed, step, diff)
			}
			for _, e := range events {
				if e.Kind == EventPreempted {
					preempted++
				}
			}
			remembered += rememberedMisses(s)
			switch r.IntN(4) {
			case 0:
				if id, ok := pick(r, s, true); ok {
					if _, err := s.Release(id); err != nil {
						t.Fatalf("Release(%s): %v", id, err)
					}
				}
			case 1:
				w := reclaimWorkload(r, c, fmt.Sprintf("s%02d", step), s.Now())
				if _, err := s.Add(w); err != nil {
					t.Fatalf("Add(%s): %v", w.ID, err)
				}
			case 2:
				// Nothing changes but the time: a remembered miss holds.
			case 3:
				if id, ok := pick(r, s, false); ok {
					if _, err := s.Release(id); err != nil {
						t.Fatalf("Release(%s): %v", id, err)
					}
				}
			}
			s.accrue(s.Now().Add(time.Duration(r.IntN(20)) * time.Minute))
		}
	}
	if remembered < 1000 || preempted < 100 {
		t.Errorf("too quiet to test the cache: %d remembered misses, %d preemptions", remembered, preempted)
	}
	t.Logf("%d remembered misses held after a cycle (summed over cycles), %d preemptions", remembered, preempted)
}

// staleMissCase is a cohort of three queues that may reclaim anything
// from each other (nominal 8 GPUs each on every flavor, 3 nodes of 8
// GPUs per flavor), where a head of q0 (8 GPUs on one node) fails its
// reclaim search in the first Schedule call and its miss is remembered;
// then change makes the same search succeed, by one thing alone that
// invalidates the miss, and the following calls must preempt for it.
// With change nil, the first call must already preempt.
type staleMissCase struct {
	name     string
	flavors  []string
	within   string // q0's WithinClusterQueue
	admitted []Workload
	pending  []Workload
	change   func(t *testing.T, s *Snapshot)
	want     string // the preemption event
}

// adm is workload id of queue q admitted on one node at t0−ago.
func adm(id, q string, gpus int, prio int32, flavor, node string, ago time.Duration) Workload {
	return MakeWorkload(id).Queue(q).GPUs(gpus).Priority(prio).Created(-ago-time.Hour).
		Topology(LevelHost).Duration(10*time.Hour).Admitted(flavor, -ago, node).Obj()
}

// pend is a pending one-node workload of queue q created at t0+created.
func pend(id, q string, gpus int, prio int32, created time.Duration) Workload {
	return MakeWorkload(id).Queue(q).GPUs(gpus).Priority(prio).Created(created).
		Topology(LevelHost).Duration(time.Hour).Obj()
}

func staleMissCases() []staleMissCase {
	// On h100, q1 borrows by b1 alone: reclaiming b1 brings q1 back to
	// nominal, which ends its part of the search (a1 is not taken).
	base := []Workload{
		adm("a1", "q1", 8, 2, "h100", "h100-02", 3*time.Hour),
		adm("b1", "q1", 1, 0, "h100", "h100-01", 2*time.Hour),
	}
	with := func(ws ...Workload) []Workload { return append(append([]Workload{}, base...), ws...) }
	add := func(w Workload) func(*testing.T, *Snapshot) {
		return func(t *testing.T, s *Snapshot) {
			if _, err := s.Add(w); err != nil {
				t.Fatalf("Add(%s): %v", w.ID, err)
			}
		}
	}
	return []staleMissCase{{
		// GPUs freed on the flavor (freedGPUs): q2, within nominal both
		// before and after, ends z2 on h100-01; H still does not fit
		// (7 free there), but reclaiming b1 now makes the node whole.
		name:    "freed",
		flavors: []string{"h100"},
		admitted: with(
			adm("o2", "q2", 4, 2, "h100", "h100-00", time.Hour),
			adm("z2", "q2", 3, 2, "h100", "h100-01", time.Hour),
		),
		pending: []Workload{pend("H", "q0", 8, 1, 0)},
		change: func(t *testing.T, s *Snapshot) {
			if _, err := s.Release("z2"); err != nil {
				t.Fatalf("Release(z2): %v", err)
			}
		},
		want: "preempted:b1<H",
	}, {
		// A queue starts borrowing (flipGen alone): W takes q2 from 7 to
		// 11 GPUs on h100-01, which makes q2's o2 a candidate; taking it
		// frees h100-00.
		name:    "flip",
		flavors: []string{"h100"},
		admitted: with(
			adm("o2", "q2", 5, 0, "h100", "h100-00", time.Hour),
			adm("w2", "q2", 2, 2, "h100", "h100-01", time.Hour),
		),
		pending: []Workload{pend("H", "q0", 8, 1, 0)},
		change:  add(pend("W", "q2", 4, 2, time.Minute)),
		want:    "preempted:o2<H",
	}, {
		// A borrowing queue admits more (reclaimGen alone): q2 borrows 1
		// GPU, so reclaiming its newest workload y2 ends its part of the
		// search; W takes it to 13, and then o2 is taken too, freeing
		// h100-00.
		name:    "reclaim",
		flavors: []string{"h100"},
		admitted: with(
			adm("o2", "q2", 6, 0, "h100", "h100-00", time.Hour),
			adm("y2", "q2", 2, 0, "h100", "h100-01", 10*time.Minute),
			adm("w2", "q2", 1, 2, "h100", "h100-01", time.Hour),
		),
		pending: []Workload{pend("H", "q0", 8, 1, 0)},
		change:  add(pend("W", "q2", 4, 2, time.Minute)),
		want:    "preempted:o2<H",
	}, {
		// A head of the same class, equal priority but created earlier,
		// has more candidates (LowerOrNewerEqualPriority): q0's e0 is
		// newer than H2 but not than H, and taking it frees h100-00.
		name:    "created",
		flavors: []string{"h100"},
		within:  PreemptLowerOrNewerEqualPriority,
		admitted: with(
			MakeWorkload("e0").Queue("q0").GPUs(4).Priority(1).Created(-20*time.Minute).
				Topology(LevelHost).Duration(10*time.Hour).Admitted("h100", -15*time.Minute, "h100-00").Obj(),
			adm("z2", "q2", 7, 2, "h100", "h100-01", time.Hour),
		),
		pending: []Workload{pend("H", "q0", 8, 1, -10*time.Minute)},
		change:  add(pend("H2", "q0", 8, 1, -30*time.Minute)),
		want:    "preempted:e0<H2",
	}, {
		// A head of the same class of higher priority has more
		// candidates: e0 is of H's priority, lower than H2's.
		name:    "priority",
		flavors: []string{"h100"},
		within:  PreemptLowerPriority,
		admitted: with(
			adm("e0", "q0", 4, 1, "h100", "h100-00", 15*time.Minute),
			adm("z2", "q2", 7, 2, "h100", "h100-01", time.Hour),
		),
		pending: []Workload{pend("H", "q0", 8, 1, -10*time.Minute)},
		change:  add(pend("H2", "q0", 8, 2, 0)),
		want:    "preempted:e0<H2",
	}, {
		// A miss is remembered per candidate flavor: the search fails
		// on h100 (remembered) and must still run, and succeed, on
		// a100, where nothing has been freed yet either. (An entry never
		// remembered cannot pass for a miss even without its ok flag:
		// a reclaim search needs a borrowing queue, which moved flipGen
		// off zero.)
		name:    "flavor",
		flavors: []string{"h100", "a100"},
		admitted: with(
			adm("o2", "q2", 4, 2, "h100", "h100-00", time.Hour),
			adm("z2", "q2", 3, 2, "h100", "h100-01", time.Hour),
			adm("c1", "q1", 4, 0, "a100", "a100-00", time.Hour),
			adm("d1", "q1", 5, 2, "a100", "a100-01", time.Hour),
			adm("e2", "q2", 8, 2, "a100", "a100-02", time.Hour),
		),
		pending: []Workload{pend("H", "q0", 8, 0, 0)},
		want:    "preempted:c1<H",
	}}
}

// TestReclaimMissGoesStale holds each staleMissCase to the general
// engine call by call and to its expected preemption.
func TestReclaimMissGoesStale(t *testing.T) {
	for _, tc := range staleMissCases() {
		t.Run(tc.name, func(t *testing.T) {
			c := MakeCluster()
			for _, f := range tc.flavors {
				c.Flavor(f, 8).Nodes(f, 3, 8, 0, 0)
			}
			for q := range 3 {
				qw := MakeQueue(fmt.Sprintf("q%d", q)).Cohort("c")
				for _, f := range tc.flavors {
					qw.Quota(f, 8)
				}
				within := ""
				if q == 0 {
					within = tc.within
				}
				c.Queue(qw.Preempt(within, PreemptAny))
			}
			s := newSnapshot(t, c.Obj(), append(append([]Workload{}, tc.admitted...), tc.pending...)...)
			schedule := func(call int) []string {
				naive := s.Clone()
				want := naiveSchedule(naive)
				got := evs(s.Schedule())
				if diff := cmpDiff(want, got); diff != "" {
					t.Fatalf("call %d: Schedule differs from the general engine (-want +got):\n%s", call, diff)
				}
				if diff := cmpDiff(engineView(naive), engineView(s)); diff != "" {
					t.Fatalf("call %d: state differs from the general engine's:\n%s", call, diff)
				}
				return got
			}
			first := schedule(0)
			if tc.change == nil {
				if !slices.Contains(first, tc.want) {
					t.Fatalf("first call: events %v, want %s", first, tc.want)
				}
				return
			}
			if len(first) > 0 || rememberedMisses(s) == 0 {
				t.Fatalf("first call: events %v, %d remembered misses; want none and a remembered miss", first, rememberedMisses(s))
			}
			tc.change(t, s)
			var got []string
			for call := 1; call <= 3 && !slices.Contains(got, tc.want); call++ {
				got = append(got, schedule(call)...)
			}
			if !slices.Contains(got, tc.want) {
				t.Errorf("after the change: events %v, want %s", got, tc.want)
			}
		})
	}
}
