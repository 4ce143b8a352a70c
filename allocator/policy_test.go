package allocator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of the policy options: Placement (BestFit, Spread, Random) and
// the FirstComeFirstServed mode.

// withPolicy returns c with its placement, seed and mode replaced.
func withPolicy(c *Cluster, mode Mode, p Placement, seed uint64) *Cluster {
	cc := *c
	cc.Policy.Mode, cc.Policy.Placement, cc.Policy.Seed = mode, p, seed
	return &cc
}

func TestPlacementPolicies(t *testing.T) {
	// x has 4 free GPUs, y 5 and z 8.
	xyz := MakeCluster().Flavor("f", 8).Node("x", "f", 8, "", "").Node("y", "f", 8, "", "").Node("z", "f", 8, "", "").
		Queue(MakeQueue("a").Quota("f", 24)).Obj()
	xyzRunning := []Workload{
		MakeWorkload("r4").Queue("a").GPUs(4).Admitted("f", 0, "x").Obj(),
		MakeWorkload("r3").Queue("a").GPUs(3).Admitted("f", 0, "y").Obj(),
	}
	// Two pods of 4 GPUs: node a has 8 GPUs, b 4.
	ab := MakeCluster().Flavor("f", 4).Node("a", "f", 8, "", "").Node("b", "f", 4, "", "").
		Queue(MakeQueue("a").Quota("f", 16)).Obj()
	// tasCluster with f-00 using 1 GPU (rack r0: 15 free) and f-02 using
	// 6 (rack r1: 10 free); racks r2 and r3 are empty (16 free each);
	// block b0 has 25 free, b1 32.
	tasRunning := []Workload{
		MakeWorkload("r1").Queue("a").GPUs(1).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("r6").Queue("a").GPUs(6).Admitted("f", 0, "f-02").Obj(),
	}
	cases := map[string]struct {
		cluster   *Cluster
		placement Placement
		running   []Workload
		req       Workload
		want      []string
	}{
		"fragmentation-aware (default) keeps x's 4-GPU hole": {
			cluster: xyz, running: xyzRunning,
			req:  MakeWorkload("new").Queue("a").GPUs(1).Obj(),
			want: []string{"y"},
		},
		"best fit: the fullest node that fits": {
			cluster: xyz, placement: PlacementBestFit, running: xyzRunning,
			req:  MakeWorkload("new").Queue("a").GPUs(1).Obj(),
			want: []string{"x"},
		},
		"best fit: skips nodes too small": {
			cluster: xyz, placement: PlacementBestFit, running: xyzRunning,
			req:  MakeWorkload("new").Queue("a").GPUs(5).Obj(),
			want: []string{"y"},
		},
		"spread: the emptiest node": {
			cluster: xyz, placement: PlacementSpread, running: xyzRunning,
			req:  MakeWorkload("new").Queue("a").GPUs(1).Obj(),
			want: []string{"z"},
		},
		"best fit: pods one by one, the small node first": {
			cluster: ab, placement: PlacementBestFit,
			req:  MakeWorkload("new").Queue("a").GPUs(8).Obj(),
			want: []string{"b", "a"},
		},
		"spread: pods one by one, ties to the name": {
			// a (8 free) takes the first pod; then a and b have 4 each.
			cluster: ab, placement: PlacementSpread,
			req:  MakeWorkload("new").Queue("a").GPUs(8).Obj(),
			want: []string{"a", "a"},
		},
		"best fit, host: the fullest node with room for all pods": {
			cluster: tasCluster(), placement: PlacementBestFit, running: tasRunning,
			req:  MakeWorkload("new").Queue("a").GPUs(2).Topology(LevelHost).Obj(),
			want: []string{"f-02"},
		},
		"best fit, rack: the rack with the fewest free GPUs that fits": {
			cluster: tasCluster(), placement: PlacementBestFit, running: tasRunning,
			req:  MakeWorkload("new").Queue("a").GPUs(8).Topology(LevelRack).Obj(),
			want: []string{"f-03"},
		},
		"spread, rack: the emptiest rack, ties to the name": {
			cluster: tasCluster(), placement: PlacementSpread, running: tasRunning,
			req:  MakeWorkload("new").Queue("a").GPUs(8).Topology(LevelRack).Obj(),
			want: []string{"f-04"},
		},
		"best fit, block: the fuller block, then the first node that fits": {
			cluster: tasCluster(), placement: PlacementBestFit, running: tasRunning,
			req:  MakeWorkload("new").Queue("a").GPUs(8).Topology(LevelBlock).Obj(),
			want: []string{"f-01"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSnapshot(t, withPolicy(tc.cluster, "", tc.placement, 0), tc.running...)
			a, reason := s.Fit(tc.req)
			if reason != ReasonNone {
				t.Fatalf("Fit: %q", reason)
			}
			if diff := cmp.Diff(tc.want, a.Nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			// Schedule places it where Fit said.
			if _, err := s.Add(tc.req); err != nil {
				t.Fatal(err)
			}
			evs := s.Schedule()
			if len(evs) != 1 || evs[0].Kind != EventAdmitted {
				t.Fatalf("Schedule: %v", evs)
			}
			if diff := cmp.Diff(tc.want, evs[0].Admission.Nodes); diff != "" {
				t.Errorf("Schedule's nodes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlacementRandom(t *testing.T) {
	c := MakeCluster().Flavor("f", 8).Node("w", "f", 8, "", "").Node("x", "f", 8, "", "").
		Node("y", "f", 8, "", "").Node("z", "f", 8, "", "").
		Queue(MakeQueue("a").Quota("f", 32)).Obj()
	running := []Workload{
		MakeWorkload("r8").Queue("a").GPUs(8).Admitted("f", 0, "w").Obj(),
		MakeWorkload("r4").Queue("a").GPUs(4).Admitted("f", 0, "x").Obj(),
		MakeWorkload("r3").Queue("a").GPUs(3).Admitted("f", 0, "y").Obj(),
	}
	counts := func(seed uint64, gpus int) (map[string]int, []string) {
		s := newSnapshot(t, withPolicy(c, "", PlacementRandom, seed), running...)
		got := map[string]int{}
		var seq []string
		for i := range 300 {
			w := MakeWorkload(fmt.Sprintf("w%03d", i)).Queue("a").GPUs(gpus).Obj()
			a, reason := s.Fit(w)
			if reason != ReasonNone {
				t.Fatalf("Fit(%s): %q", w.ID, reason)
			}
			again, _ := s.Clone().Fit(w)
			if diff := cmp.Diff(a.Nodes, again.Nodes); diff != "" {
				t.Fatalf("Fit(%s) differs on a clone:\n%s", w.ID, diff)
			}
			got[a.Nodes[0]]++
			seq = append(seq, a.Nodes[0])
		}
		return got, seq
	}
	// One GPU fits x, y and z (w is full): each about a third of the time.
	got, seq1 := counts(1, 1)
	if got["w"] != 0 {
		t.Errorf("a full node was chosen %d times", got["w"])
	}
	for _, n := range []string{"x", "y", "z"} {
		if got[n] < 70 || got[n] > 130 { // expected 100, sd ≈ 8
			t.Errorf("node %s chosen %d of 300 times, want about 100: %v", n, got[n], got)
		}
	}
	// Five GPUs fit only y and z.
	got, _ = counts(1, 5)
	if got["w"]+got["x"] != 0 || got["y"] < 110 || got["z"] < 110 {
		t.Errorf("5-GPU choices %v, want only y and z, about 150 each", got)
	}
	// The seed changes the choices; the same seed repeats them.
	_, seq2 := counts(2, 1)
	_, again := counts(1, 1)
	if cmp.Equal(seq1, seq2) {
		t.Errorf("seeds 1 and 2 chose the same nodes")
	}
	if diff := cmp.Diff(seq1, again); diff != "" {
		t.Errorf("seed 1 chose differently the second time:\n%s", diff)
	}
}

func TestFirstComeFirstServed(t *testing.T) {
	// One 8-GPU node held by a low-priority workload for an hour; an
	// older normal-priority request and a newer high-priority one of 6
	// GPUs each wait. The queue may preempt lower priorities.
	c := MakeCluster().Flavor("f", 8).Node("n", "f", 8, "", "").
		Queue(MakeQueue("a").Quota("f", 8).Preempt(PreemptLowerPriority, "")).Obj()
	ws := []Workload{
		MakeWorkload("low").Queue("a").GPUs(8).Priority(0).Duration(time.Hour).Admitted("f", 0, "n").Obj(),
		MakeWorkload("old").Queue("a").GPUs(6).Priority(1).Created(time.Minute).Duration(time.Hour).Obj(),
		MakeWorkload("new").Queue("a").GPUs(6).Priority(2).Created(2 * time.Minute).Duration(time.Hour).Obj(),
	}
	cases := map[string]struct {
		mode      Mode
		order     []string
		schedule  []string // the cycle at t0
		at1h      []string // Advance to t0+1h
		newAhead  int      // EstimateFor("new").Ahead
		newJumped int      // EstimateFor("new").AheadHigherPriority, and of "old"
	}{
		"BestEffortFIFO: priority first, preemption": {
			mode:     BestEffortFIFO,
			order:    []string{"new", "old"},
			schedule: []string{"preempted:low<new", "admitted:new"},
			at1h:     []string{"finished:new", "admitted:old"},
		},
		"FirstComeFirstServed: arrival only, never preempts": {
			mode:     FirstComeFirstServed,
			order:    []string{"old", "new"},
			schedule: nil,
			at1h:     []string{"finished:low", "admitted:old"},
			newAhead: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSnapshot(t, withPolicy(c, tc.mode, "", 0), ws...)
			if diff := cmp.Diff(tc.order, s.Order()); diff != "" {
				t.Errorf("Order (-want +got):\n%s", diff)
			}
			if tc.mode == FirstComeFirstServed {
				e := EstimateFor(s, "new", EstimateOptions{Factors: map[string]Range{"a": {1, 1}}})
				if e.Ahead != tc.newAhead || e.AheadHigherPriority != 0 || !e.Known || !e.Earliest.Equal(t0.Add(2*time.Hour)) {
					t.Errorf("EstimateFor(new) = %+v, want 1 ahead, none jumping, start at t0+2h", e)
				}
				all := Estimates(s, EstimateOptions{})
				if all["old"].AheadHigherPriority != 0 || all["new"].AheadHigherPriority != 0 {
					t.Errorf("Estimates count queue jumpers in FCFS: %+v", all)
				}
			}
			if diff := cmp.Diff(tc.schedule, evs(s.Schedule())); diff != "" {
				t.Errorf("Schedule (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.at1h, evs(s.Advance(t0.Add(time.Hour), nil))); diff != "" {
				t.Errorf("Advance (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPolicyValidation(t *testing.T) {
	base := MakeCluster().Flavor("f", 8).Node("n", "f", 8, "", "").Queue(MakeQueue("a").Quota("f", 8)).Obj()
	for name, c := range map[string]*Cluster{
		"unknown placement": withPolicy(base, "", "Tetris", 0),
		"unknown mode":      withPolicy(base, "StrictFIFO", "", 0),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewSnapshot(c, t0, nil, nil); !errors.Is(err, ErrInvalid) {
				t.Errorf("NewSnapshot: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestPropertyPolicies runs the random operations of
// TestPropertyInvariants and the cycle-against-definition check under
// every mode and placement.
func TestPropertyPolicies(t *testing.T) {
	variants := []struct {
		mode Mode
		p    Placement
	}{
		{FirstComeFirstServed, ""}, {"", PlacementBestFit}, {FairSharing, PlacementSpread},
		{"", PlacementRandom}, {FirstComeFirstServed, PlacementRandom},
	}
	for seed := range uint64(propertyCases / 3) {
		v := variants[seed%uint64(len(variants))]
		t.Run(fmt.Sprintf("%d-%s-%s", seed, v.mode, v.p), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 9))
			orig, _ := randomState(t, r)
			s, err := NewSnapshot(withPolicy(orig.Cluster(), v.mode, v.p, seed), orig.Now(), orig.Workloads(), orig.Usage())
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, s)
			for step := range 30 {
				switch op := r.IntN(5); op {
				case 0:
					for i := range 3 {
						s.Add(randomWorkload(r, s.Cluster(), fmt.Sprintf("n%02d-%d", step, i)))
					}
				case 1:
					naive := s.Clone()
					want := naiveSchedule(naive)
					if diff := cmpDiff(want, evs(s.Schedule())); diff != "" {
						t.Fatalf("step %d: Schedule differs from its definition (-want +got):\n%s", step, diff)
					}
					if diff := cmpDiff(engineView(naive), engineView(s)); diff != "" {
						t.Fatalf("step %d: state differs:\n%s", step, diff)
					}
				case 2:
					s.Advance(s.Now().Add(time.Duration(r.IntN(300))*time.Minute), nil)
				case 3:
					if id, ok := pick(r, s, true); ok {
						s.Release(id)
					}
				case 4:
					if id, ok := pick(r, s, false); ok {
						w, _ := s.Workload(id)
						if a, reason := s.Fit(w); reason == ReasonNone {
							if _, err := s.Reserve(id, a); err != nil {
								t.Fatalf("step %d: Reserve of Fit's admission: %v", step, err)
							}
						}
					}
				}
				checkInvariants(t, s)
				if t.Failed() {
					t.Fatalf("after step %d", step)
				}
			}
		})
	}
}
