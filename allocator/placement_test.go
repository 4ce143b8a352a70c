package allocator

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// A small TAS cluster: blocks b0 (racks r0, r1) and b1 (racks r2, r3),
// two 8-GPU nodes per rack: f-00 f-01 | f-02 f-03 || f-04 f-05 | f-06 f-07.
func tasCluster() *Cluster {
	return MakeCluster().Flavor("f", 8).Nodes("f", 8, 8, 2, 2).
		Queue(MakeQueue("a").Quota("f", 64)).Obj()
}

func TestPlacement(t *testing.T) {
	cases := map[string]struct {
		cluster *Cluster
		running []Workload
		req     Workload
		want    []string
	}{
		"fragmentation-aware: keeps the 4-GPU hole": {
			// x has 4 free, y 5; the requests seen are of 3 and 4 GPUs.
			// A 1-GPU pod on x turns 4 usable GPUs into 3 that fit no
			// 4-GPU pod (+3); on y it leaves 4 (+0). Best fit would pick x.
			cluster: MakeCluster().Flavor("f", 8).Node("x", "f", 8, "", "").Node("y", "f", 8, "", "").
				Queue(MakeQueue("a").Quota("f", 16)).Obj(),
			running: []Workload{
				MakeWorkload("r4").Queue("a").GPUs(4).Admitted("f", 0, "x").Obj(),
				MakeWorkload("r3").Queue("a").GPUs(3).Admitted("f", 0, "y").Obj(),
			},
			req:  MakeWorkload("new").Queue("a").GPUs(1).Obj(),
			want: []string{"y"},
		},
		"fragmentation-aware: best fit when it also fragments least": {
			cluster: MakeCluster().Flavor("f", 8).Node("x", "f", 8, "", "").Node("y", "f", 8, "", "").
				Queue(MakeQueue("a").Quota("f", 16)).Obj(),
			running: []Workload{
				MakeWorkload("r6").Queue("a").GPUs(6).Admitted("f", 0, "x").Obj(),
				MakeWorkload("r2").Queue("a").GPUs(2).Admitted("f", 0, "y").Obj(),
			},
			req:  MakeWorkload("new").Queue("a").GPUs(2).Obj(),
			want: []string{"x"},
		},
		"ties go to the node name": {
			cluster: MakeCluster().Flavor("f", 8).Node("b", "f", 8, "", "").Node("a", "f", 8, "", "").
				Queue(MakeQueue("a").Quota("f", 16)).Obj(),
			req:  MakeWorkload("new").Queue("a").GPUs(8).Obj(),
			want: []string{"a"},
		},
		"pods one by one: two pods may share a node": {
			cluster: MakeCluster().Flavor("f", 4).Node("a", "f", 8, "", "").Node("b", "f", 4, "", "").
				Queue(MakeQueue("a").Quota("f", 16)).Obj(),
			req:  MakeWorkload("new").Queue("a").GPUs(8).Obj(),
			want: []string{"b", "a"},
		},
		"host: one node": {
			cluster: tasCluster(),
			running: []Workload{MakeWorkload("r").Queue("a").GPUs(1).Admitted("f", 0, "f-00").Obj()},
			req:     MakeWorkload("new").Queue("a").GPUs(8).Topology(LevelHost).Obj(),
			want:    []string{"f-01"},
		},
		"rack: the only empty rack": {
			cluster: tasCluster(),
			running: []Workload{
				MakeWorkload("r0").Queue("a").GPUs(1).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("r1").Queue("a").GPUs(1).Admitted("f", 0, "f-02").Obj(),
				MakeWorkload("r2").Queue("a").GPUs(1).Admitted("f", 0, "f-04").Obj(),
			},
			req:  MakeWorkload("new").Queue("a").GPUs(16).Topology(LevelRack).Obj(),
			want: []string{"f-06", "f-07"},
		},
		"rack: equal racks, first by name": {
			cluster: tasCluster(),
			req:     MakeWorkload("new").Queue("a").GPUs(16).Topology(LevelRack).Obj(),
			want:    []string{"f-00", "f-01"},
		},
		"block: the block with room": {
			cluster: tasCluster(),
			running: []Workload{
				MakeWorkload("r0").Queue("a").GPUs(1).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("r1").Queue("a").GPUs(1).Admitted("f", 0, "f-02").Obj(),
				MakeWorkload("r2").Queue("a").GPUs(1).Admitted("f", 0, "f-04").Obj(),
			},
			req:  MakeWorkload("new").Queue("a").GPUs(24).Topology(LevelBlock).Obj(),
			want: []string{"f-05", "f-06", "f-07"},
		},
		"block: the domain that fragments least, not the first by name": {
			// b0 has a full node and three empty ones; b1 a node with a
			// 4-GPU hole. The requests seen are of 4 and 8 GPUs: filling
			// the hole lowers the measure, breaking into an 8 raises it.
			cluster: tasCluster(),
			running: []Workload{
				MakeWorkload("r8").Queue("a").GPUs(8).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("r4").Queue("a").GPUs(4).Admitted("f", 0, "f-04").Obj(),
			},
			req:  MakeWorkload("new").Queue("a").GPUs(4).Topology(LevelBlock).Obj(),
			want: []string{"f-04"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSnapshot(t, tc.cluster, tc.running...)
			a, reason := s.Fit(tc.req)
			if reason != ReasonNone {
				t.Fatalf("Fit: %q", reason)
			}
			if diff := cmp.Diff(tc.want, a.Nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if !a.At.Equal(t0) {
				t.Errorf("At = %v, want Now", a.At)
			}
			// The same admission is accepted by Reserve.
			if _, err := s.Add(tc.req); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Reserve(tc.req.ID, a); err != nil {
				t.Errorf("Reserve of Fit's admission: %v", err)
			}
		})
	}
}

func TestDiagnose(t *testing.T) {
	cases := map[string]struct {
		cluster *Cluster
		running []Workload
		pending Workload
		want    Reason
	}{
		"quota: own nominal without a cohort": {
			cluster: MakeCluster().Flavor("f", 8).Nodes("f", 2, 8, 0, 0).Queue(MakeQueue("a").Quota("f", 4)).Obj(),
			pending: MakeWorkload("p").Queue("a").GPUs(8).Obj(),
			want:    ReasonQuota,
		},
		"quota: borrowing limit": {
			cluster: MakeCluster().Flavor("f", 8).Nodes("f", 2, 8, 0, 0).
				Queue(MakeQueue("a").Cohort("c").Quota("f", 4).BorrowingLimit("f", 2)).
				Queue(MakeQueue("b").Cohort("c").Quota("f", 12)).Obj(),
			pending: MakeWorkload("p").Queue("a").GPUs(8).Obj(),
			want:    ReasonQuota,
		},
		"cohort: the pool is used by others": {
			cluster: MakeCluster().Flavor("f", 8).Nodes("f", 4, 8, 0, 0).
				Queue(MakeQueue("a").Cohort("c").Quota("f", 4)).
				Queue(MakeQueue("b").Cohort("c").Quota("f", 12)).Obj(),
			running: []Workload{MakeWorkload("r").Queue("b").GPUs(12).Admitted("f", 0, "f-00", "f-01").Obj()},
			pending: MakeWorkload("p").Queue("a").GPUs(8).Obj(),
			want:    ReasonCohort,
		},
		"capacity: not enough free GPUs": {
			cluster: MakeCluster().Flavor("f", 8).Nodes("f", 2, 8, 0, 0).Queue(MakeQueue("a").Quota("f", 32)).Obj(),
			running: []Workload{MakeWorkload("r").Queue("a").GPUs(12).Admitted("f", 0, "f-00", "f-01").Obj()},
			pending: MakeWorkload("p").Queue("a").GPUs(8).Obj(),
			want:    ReasonCapacity,
		},
		"fragmentation: enough GPUs, scattered": {
			cluster: MakeCluster().Flavor("f", 8).Nodes("f", 2, 8, 0, 0).Queue(MakeQueue("a").Quota("f", 32)).Obj(),
			running: []Workload{
				MakeWorkload("r0").Queue("a").GPUs(4).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("r1").Queue("a").GPUs(4).Admitted("f", 0, "f-01").Obj(),
			},
			pending: MakeWorkload("p").Queue("a").GPUs(8).Obj(),
			want:    ReasonFragmentation,
		},
		"topology: fits, but not in one rack": {
			cluster: tasCluster(),
			running: []Workload{
				MakeWorkload("r0").Queue("a").GPUs(1).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("r1").Queue("a").GPUs(1).Admitted("f", 0, "f-02").Obj(),
				MakeWorkload("r2").Queue("a").GPUs(1).Admitted("f", 0, "f-04").Obj(),
				MakeWorkload("r3").Queue("a").GPUs(1).Admitted("f", 0, "f-06").Obj(),
			},
			pending: MakeWorkload("p").Queue("a").GPUs(16).Topology(LevelRack).Obj(),
			want:    ReasonTopology,
		},
		"priority: fits alone now": {
			cluster: MakeCluster().Flavor("f", 8).Nodes("f", 1, 8, 0, 0).Queue(MakeQueue("a").Quota("f", 8)).Obj(),
			pending: MakeWorkload("p").Queue("a").GPUs(8).Obj(),
			want:    ReasonPriority,
		},
		"closest flavor wins: capacity on one beats quota on the other": {
			cluster: MakeCluster().Flavor("h", 8).Flavor("a", 8).Nodes("h", 1, 8, 0, 0).Nodes("a", 1, 8, 0, 0).
				Queue(MakeQueue("q").Quota("h", 0).Quota("a", 16)).Obj(),
			running: []Workload{MakeWorkload("r").Queue("q").GPUs(4).Admitted("a", 0, "a-00").Obj()},
			pending: MakeWorkload("p").Queue("q").GPUs(8).Obj(),
			want:    ReasonCapacity,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSnapshot(t, tc.cluster, append(tc.running, tc.pending)...)
			if got := s.Diagnose(tc.pending.ID); got != tc.want {
				t.Errorf("Diagnose = %q, want %q", got, tc.want)
			}
			_, fit := s.Fit(tc.pending)
			want := tc.want
			if want == ReasonPriority {
				want = ReasonNone
			}
			if fit != want {
				t.Errorf("Fit reason = %q, want %q", fit, want)
			}
		})
	}
	if got := newSnapshot(t, tasCluster()).Diagnose("nope"); got != ReasonNone {
		t.Errorf("unknown workload: %q", got)
	}
}

func TestFragmentation(t *testing.T) {
	cases := map[string]struct {
		free []int
		mix  Mix
		want float64
	}{
		// p = 1/4 each of 1, 2, 4, 8. A node with 4 free cannot host
		// an 8 (4·¼), with 2 free no 4 or 8 (2·½), with 1 free no 2, 4,
		// 8 (1·¾): 1 + 1 + 0.75.
		"uniform default":      {free: []int{8, 4, 2, 1, 0}, want: 2.75},
		"only whole nodes":     {free: []int{8, 4, 2, 1}, mix: Mix{8: 5}, want: 7},
		"small jobs":           {free: []int{8, 4, 2, 1}, mix: Mix{1: 3, 4: 1}, want: 0.75},
		"nothing free":         {free: []int{0, 0}, want: 0},
		"invalid shares drop":  {free: []int{4}, mix: Mix{8: 1, -2: 5, 3: -1}, want: 4},
		"all invalid: uniform": {free: []int{4}, mix: Mix{0: 1}, want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Fragmentation(tc.free, tc.mix); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Fragmentation = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	s := newSnapshot(t, tasCluster(),
		MakeWorkload("r0").Queue("a").GPUs(4).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("r1").Queue("a").GPUs(8).Admitted("f", 0, "f-02").Obj(),
		MakeWorkload("r2").Queue("a").GPUs(8).Admitted("f", 0, "f-05").Obj(),
	)
	// Free: f-00 4, f-01 8 | f-02 0, f-03 8 || f-04 8, f-05 0 | f-06 8, f-07 8.
	want := []FlavorCapacity{{
		Flavor: "f", Nodes: 8, Total: 64, Used: 20, Free: 44,
		// None: 5 whole nodes → 40; host 8; rack r3 → 16; block b1 → 24.
		Largest: map[Level]int{LevelNone: 40, LevelHost: 8, LevelRack: 16, LevelBlock: 24},
		// Mix {8: 1}: the 4 free GPUs of f-00 cannot host an 8.
		Fragmented: 4, FragPctAll: 6.25, FragPctFree: 100 * 4.0 / 44,
	}}
	got := s.Capacity(Mix{8: 1})
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Capacity (-want +got):\n%s", diff)
	}
	// Default mix for 8-GPU nodes: uniform over 1, 2, 4, 8: 4·¼.
	if got := s.Capacity(nil)[0].Fragmented; got != 1 {
		t.Errorf("default mix: Fragmented = %v, want 1", got)
	}
}

func TestDecayUsage(t *testing.T) {
	cases := map[string]struct {
		usage        float64
		running      int
		dt, halfLife time.Duration
		want         float64
	}{
		"halves after one half-life": {usage: 10, dt: time.Hour, halfLife: time.Hour, want: 5},
		"quarter after two":          {usage: 10, dt: 2 * time.Hour, halfLife: time.Hour, want: 2.5},
		"running for one half-life":  {running: 8, dt: time.Hour, halfLife: time.Hour, want: 4 / math.Ln2},
		"both":                       {usage: 10, running: 8, dt: time.Hour, halfLife: time.Hour, want: 5 + 4/math.Ln2},
		"no decay":                   {usage: 3, running: 2, dt: 90 * time.Minute, want: 6},
		"no time":                    {usage: 3, running: 2, halfLife: time.Hour, want: 3},
		"long run tends to R·H/ln 2": {running: 1, dt: 1000 * time.Hour, halfLife: time.Hour, want: 1 / math.Ln2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := DecayUsage(tc.usage, tc.running, tc.dt, tc.halfLife); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("DecayUsage = %v, want %v", got, tc.want)
			}
		})
	}
}
