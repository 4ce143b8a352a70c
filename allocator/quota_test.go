package allocator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The examples of Kueue's ClusterQueue concept page (borrowing,
// borrowingLimit, lendingLimit), with GPUs for CPUs. The flavor has
// one-GPU nodes so that only quota matters.
func TestQuotaKueueExamples(t *testing.T) {
	cases := map[string]struct {
		a, b     *queueWrapper
		admitted []Workload
		queue    string
		// largest request that fits, and the reason one GPU more gets
		want       int
		wantReason Reason
	}{
		"borrowing: team-b idle, team-a can use 9+12": {
			a:     MakeQueue("a").Cohort("ab").Quota("f", 9),
			b:     MakeQueue("b").Cohort("ab").Quota("f", 12),
			queue: "a", want: 21, wantReason: ReasonCohort,
		},
		"borrowing: team-b busy with its nominal quota, team-a gets its own 9": {
			a: MakeQueue("a").Cohort("ab").Quota("f", 9),
			b: MakeQueue("b").Cohort("ab").Quota("f", 12),
			admitted: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(12).Obj(),
			},
			queue: "a", want: 9, wantReason: ReasonCohort,
		},
		"borrowingLimit 1: team-a can use 9+1": {
			a:     MakeQueue("a").Cohort("ab").Quota("f", 9).BorrowingLimit("f", 1),
			b:     MakeQueue("b").Cohort("ab").Quota("f", 12),
			queue: "a", want: 10, wantReason: ReasonQuota,
		},
		"no borrowingLimit: team-b can use 12+9": {
			a:     MakeQueue("a").Cohort("ab").Quota("f", 9).BorrowingLimit("f", 1),
			b:     MakeQueue("b").Cohort("ab").Quota("f", 12),
			queue: "b", want: 21, wantReason: ReasonCohort,
		},
		"lendingLimit 1: team-a can use 9+1": {
			a:     MakeQueue("a").Cohort("ab").Quota("f", 9),
			b:     MakeQueue("b").Cohort("ab").Quota("f", 12).LendingLimit("f", 1),
			queue: "a", want: 10, wantReason: ReasonCohort,
		},
		"lendingLimit 1: team-b can still use 9+12": {
			a:     MakeQueue("a").Cohort("ab").Quota("f", 9),
			b:     MakeQueue("b").Cohort("ab").Quota("f", 12).LendingLimit("f", 1),
			queue: "b", want: 21, wantReason: ReasonCohort,
		},
		"lendingLimit 1: team-b using 11 (its guaranteed part) still lends 1": {
			a: MakeQueue("a").Cohort("ab").Quota("f", 9),
			b: MakeQueue("b").Cohort("ab").Quota("f", 12).LendingLimit("f", 1),
			admitted: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(11).Obj(),
			},
			queue: "a", want: 10, wantReason: ReasonCohort,
		},
		"lendingLimit 1: team-b using 12 lends nothing": {
			a: MakeQueue("a").Cohort("ab").Quota("f", 9),
			b: MakeQueue("b").Cohort("ab").Quota("f", 12).LendingLimit("f", 1),
			admitted: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(12).Obj(),
			},
			queue: "a", want: 9, wantReason: ReasonCohort,
		},
		"lendingLimit keeps the lender's guaranteed quota while it borrows elsewhere": {
			a: MakeQueue("a").Cohort("ab").Quota("f", 9).LendingLimit("f", 0),
			b: MakeQueue("b").Cohort("ab").Quota("f", 12),
			admitted: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(12).Obj(),
			},
			queue: "b", want: 0, wantReason: ReasonCohort,
		},
		"no cohort: nominal only": {
			a:     MakeQueue("a").Quota("f", 9),
			b:     MakeQueue("b").Quota("f", 12),
			queue: "a", want: 9, wantReason: ReasonQuota,
		},
		"no cohort: usage counts": {
			a: MakeQueue("a").Quota("f", 9),
			b: MakeQueue("b").Quota("f", 12),
			admitted: []Workload{
				MakeWorkload("a1").Queue("a").GPUs(5).Obj(),
			},
			queue: "a", want: 4, wantReason: ReasonQuota,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := MakeCluster().Flavor("f", 1).Nodes("f", 40, 1, 0, 0).Queue(tc.a).Queue(tc.b).Obj()
			s := newSnapshot(t, c)
			for _, w := range tc.admitted {
				if _, err := s.Add(w); err != nil {
					t.Fatal(err)
				}
			}
			s.Schedule()
			got, gotReason := 0, ReasonNone
			for g := 1; g <= 40; g++ {
				_, r := s.Fit(MakeWorkload("x").Queue(tc.queue).GPUs(g).Obj())
				if r != ReasonNone {
					gotReason = r
					break
				}
				got = g
			}
			if got != tc.want || gotReason != tc.wantReason {
				t.Errorf("largest fit %d then %q, want %d then %q", got, gotReason, tc.want, tc.wantReason)
			}
		})
	}
}

// TestAvailableFormula checks the closed form against Kueue's recursive
// definition (LocalAvailable + min(parent available, borrowing cap)).
func TestAvailableFormula(t *testing.T) {
	c := MakeCluster().Flavor("f", 1).Nodes("f", 64, 1, 0, 0).
		Queue(MakeQueue("a").Cohort("x").Quota("f", 10).LendingLimit("f", 4).BorrowingLimit("f", 6)).
		Queue(MakeQueue("b").Cohort("x").Quota("f", 8).LendingLimit("f", 8)).
		Queue(MakeQueue("c").Cohort("x").Quota("f", 6)).Obj()
	for ua := 0; ua <= 16; ua += 3 {
		for ub := 0; ub <= 12; ub += 4 {
			s := newSnapshot(t, c)
			s.addUsed(0, 0, ua)
			s.addUsed(1, 0, ub)
			// Kueue: local = max(0, guaranteed-u); cohort available =
			// subtree - usage; capped by storedInParent - usedInParent + B.
			sub := (10 - 6) + 8 + 6
			used := max(0, ua-6) + max(0, ub-0)
			parent := sub - used
			capA := (10 - 6) - max(0, ua-6) + 6
			want := max(0, 6-ua) + min(parent, capA)
			if got := s.available(0, 0); got != want {
				t.Errorf("ua=%d ub=%d: available(a)=%d, want %d", ua, ub, got, want)
			}
			// undo the raw usage so the cleanup invariant check passes
			s.addUsed(0, 0, -ua)
			s.addUsed(1, 0, -ub)
		}
	}
}

func TestNewSnapshotValidation(t *testing.T) {
	good := func() *clusterWrapper {
		return MakeCluster().Flavor("h100", 8).Nodes("h100", 2, 8, 0, 0).Queue(MakeQueue("a").Quota("h100", 8))
	}
	cases := map[string]struct {
		c  *Cluster
		ws []Workload
	}{
		"duplicate flavor":        {c: good().Flavor("h100", 8).Obj()},
		"node of unknown flavor":  {c: good().Node("x", "a100", 8, "", "").Obj()},
		"node without GPUs":       {c: good().Node("x", "h100", 0, "", "").Obj()},
		"duplicate node":          {c: good().Node("h100-00", "h100", 8, "", "").Obj()},
		"queue of unknown flavor": {c: good().Queue(MakeQueue("b").Quota("a100", 1)).Obj()},
		"lending above nominal":   {c: good().Queue(MakeQueue("b").Quota("h100", 1).LendingLimit("h100", 2)).Obj()},
		"bad policy":              {c: good().Queue(MakeQueue("b").Quota("h100", 1).Preempt("Any", "")).Obj()},
		"duplicate workload": {c: good().Obj(), ws: []Workload{
			MakeWorkload("w").Queue("a").Obj(), MakeWorkload("w").Queue("a").Obj()}},
		"unknown queue":   {c: good().Obj(), ws: []Workload{MakeWorkload("w").Queue("zz").Obj()}},
		"no valid shape":  {c: good().Obj(), ws: []Workload{MakeWorkload("w").Queue("a").GPUs(9).Obj()}},
		"unknown node":    {c: good().Obj(), ws: []Workload{MakeWorkload("w").Queue("a").GPUs(8).Admitted("h100", 0, "nope").Obj()}},
		"too many pods":   {c: good().Obj(), ws: []Workload{MakeWorkload("w").Queue("a").GPUs(8).Admitted("h100", 0, "h100-00", "h100-01").Obj()}},
		"node overcommit": {c: good().Obj(), ws: []Workload{MakeWorkload("w").Queue("a").GPUs(16).Admitted("h100", 0, "h100-00", "h100-00").Obj()}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := NewSnapshot(tc.c, t0, tc.ws, nil); err == nil {
				t.Error("NewSnapshot succeeded, want an error")
			}
		})
	}
	if _, err := NewSnapshot(good().Obj(), t0, nil, map[string]float64{"nope": 1}); err == nil {
		t.Error("usage of an unknown queue accepted")
	}
}

func TestPodShape(t *testing.T) {
	type shape struct{ Pods, PerPod int }
	cases := map[string]struct {
		gpus, gpn int
		want      shape
		wantErr   string
	}{
		"one gpu":          {gpus: 1, gpn: 8, want: shape{1, 1}},
		"a node":           {gpus: 8, gpn: 8, want: shape{1, 8}},
		"less than a node": {gpus: 5, gpn: 8, want: shape{1, 5}},
		"two nodes":        {gpus: 16, gpn: 8, want: shape{2, 8}},
		"two half nodes":   {gpus: 10, gpn: 8, want: shape{2, 5}},
		"three of six":     {gpus: 18, gpn: 8, want: shape{3, 6}},
		"nine":             {gpus: 9, gpn: 8, wantErr: "9 GPUs cannot be split into 2 equal pods of at most 8 GPUs (one pod per node); the nearest sizes that can are 8 and 10"},
		"seventeen":        {gpus: 17, gpn: 8, wantErr: "17 GPUs cannot be split into 3 equal pods of at most 8 GPUs (one pod per node); the nearest sizes that can are 16 and 18"},
		"zero":             {gpus: 0, gpn: 8, wantErr: "a request needs at least 1 GPU, not 0"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pods, per, err := PodShape(tc.gpus, tc.gpn)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, shape{pods, per}); diff != "" {
				t.Error(diff)
			}
		})
	}
}
