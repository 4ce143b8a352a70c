package config

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/allocator"
)

const kueueFeatures = `priorities: [{name: low, value: 100}, {name: normal, value: 200}]
admission: {mode: FairSharing, preemptionStrategies: [LessThanInitialShare]}
requests: {cpuPerGPU: 12, memoryPerGPU: 96Gi}
flavors:
  - {name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2, cpu: 112, memory: 1800Gi}}
cohorts:
  - {name: org}
  - name: research
    parent: org
    weight: 2
    quota: {h100: {nominal: 4, lendingLimit: 2, cpu: 48, memory: 384Gi}}
people: [{name: alice}]
teams:
  - name: nlp
    cohort: research
    members: [alice]
    quota: {h100: {nominal: 8, cpu: {nominal: 96, borrowingLimit: 24}, memory: 768Gi}}
    preemption: {reclaimWithinCohort: Any, borrowWithinCohort: LowerPriority, borrowWithinCohortMaxPriority: low}
    flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: PreemptionOverBorrowing}
`

func TestKueueFeatures(t *testing.T) {
	c, err := Parse("gpubot.yaml", []byte(kueueFeatures))
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Cluster()
	i64 := func(v int64) *int64 { return &v }
	i32 := func(v int32) *int32 { return &v }
	wantQueue := allocator.Queue{Name: "nlp", Cohort: "research", Flavors: []string{"h100"}, Weight: 1,
		Quotas: map[string]allocator.Quota{"h100": {Nominal: 8,
			CPU:    &allocator.ResourceQuota{Nominal: 96000, BorrowingLimit: i64(24000)},
			Memory: &allocator.ResourceQuota{Nominal: 768 << 30}}},
		Preemption: allocator.Preemption{WithinClusterQueue: allocator.PreemptNever, ReclaimWithinCohort: allocator.PreemptAny,
			BorrowWithinCohort: allocator.PreemptLowerPriority, BorrowWithinCohortMaxPriority: i32(100)},
		FlavorFungibility: allocator.FlavorFungibility{WhenCanBorrow: allocator.TryNextFlavor, WhenCanPreempt: allocator.TryNextFlavor,
			Preference: allocator.PreemptionOverBorrowing},
	}
	if diff := cmp.Diff(wantQueue, cl.Queues[0]); diff != "" {
		t.Errorf("queue (-want +got):\n%s", diff)
	}
	two := 2
	wantCohorts := []allocator.Cohort{
		{Name: "org", Quotas: map[string]allocator.Quota{}},
		{Name: "research", Parent: "org", Weight: 2, Quotas: map[string]allocator.Quota{"h100": {Nominal: 4, LendingLimit: &two,
			CPU: &allocator.ResourceQuota{Nominal: 48000}, Memory: &allocator.ResourceQuota{Nominal: 384 << 30}}}},
	}
	if diff := cmp.Diff(wantCohorts, cl.Cohorts); diff != "" {
		t.Errorf("cohorts (-want +got):\n%s", diff)
	}
	if fs := cl.Policy.FairSharing; fs == nil || cl.Policy.Mode != allocator.BestEffortFIFO ||
		!cmp.Equal(fs.PreemptionStrategies, []string{allocator.LessThanInitialShare}) {
		t.Errorf("policy %+v (fair sharing %+v), want BestEffortFIFO with Kueue's Fair Sharing, LessThanInitialShare", cl.Policy, fs)
	}
	if n := cl.Nodes[0]; n.CPU != 112000 || n.Memory != 1800<<30 {
		t.Errorf("node %+v, want 112 cores and 1800Gi", n)
	}
	if s := c.Settings(); s.CPUPerGPU != 12000 || s.MemoryPerGPU != 96<<30 {
		t.Errorf("per GPU: %d millicores, %d bytes; want 12000, 96Gi", s.CPUPerGPU, s.MemoryPerGPU)
	}
	// The allocator takes it as it is.
	if _, err := allocator.NewSnapshot(cl, time.Time{}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestKueueFeatureErrors(t *testing.T) {
	base := `priorities: [{name: normal, value: 1}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: alice}]
`
	tests := map[string]struct {
		yaml string
		want []string
	}{
		"strategies without Kueue's Fair Sharing, and a wrong pair": {
			yaml: base + "admission: {preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]}\nteams: [{name: nlp, members: [alice], quota: {h100: {nominal: 16}}}]\n",
			want: []string{
				"gpubot.yaml:4:13: admission.preemptionStrategies: is only used with mode FairSharing; set admission.mode or remove it",
				"gpubot.yaml:4:35: admission.preemptionStrategies: must be one strategy, or LessThanOrEqualToFinalShare then LessThanInitialShare (as Kueue allows)",
			},
		},
		"limits on a root cohort": {
			yaml: base + "cohorts: [{name: org, quota: {h100: {nominal: 4, borrowingLimit: 2}}}]\nteams: [{name: nlp, cohort: org, members: [alice], quota: {h100: {nominal: 16}}}]\n",
			want: []string{"gpubot.yaml:4:66: cohorts[0].quota.h100.borrowingLimit: needs a parent cohort (Kueue rejects limits on a root cohort)"},
		},
		"a cycle of parents": {
			yaml: base + "cohorts: [{name: a, parent: b}, {name: b, parent: a}]\nteams: [{name: nlp, cohort: a, members: [alice], quota: {h100: {nominal: 16}}}]\n",
			want: []string{`gpubot.yaml:4:10: cohorts: cohort "a" is in a cycle of parents`},
		},
		"fungibility": {
			yaml: base + "teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 16}}, flavorFungibility: {whenCanBorrow: Borrow, preference: PreemptionOverBorrowing}}]\n",
			want: []string{
				`gpubot.yaml:4:104: teams[0].flavorFungibility.whenCanBorrow: unknown value "Borrow" (known: MayStopSearch, TryNextFlavor)`,
				"gpubot.yaml:4:124: teams[0].flavorFungibility.preference: needs whenCanBorrow and whenCanPreempt TryNextFlavor (Kueue rejects it otherwise)",
			},
		},
		"borrowWithinCohort without a cohort, and an unknown priority": {
			yaml: base + "teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 16}}, preemption: {borrowWithinCohort: LowerPriority}},\n" +
				"  {name: cv, cohort: x, members: [alice], quota: {h100: {nominal: 0}}, preemption: {borrowWithinCohort: LowerPriority, borrowWithinCohortMaxPriority: hihg}}]\n",
			want: []string{
				"gpubot.yaml:4:102: teams[0].preemption.borrowWithinCohort: needs a cohort; set the team's cohort or remove it",
				`gpubot.yaml:5:151: teams[1].preemption.borrowWithinCohortMaxPriority: unknown priority "hihg" (known: normal)`,
			},
		},
		"CPU on one flavor of two": {
			yaml: `priorities: [{name: normal, value: 1}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}, {name: a100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: alice}]
teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 8, cpu: 64}, a100: {nominal: 8}}}]
`,
			want: []string{"gpubot.yaml:4:46: teams[0].quota: gives a cpu quota on h100 but not on a100: a ClusterQueue's flavors must all give it (write cpu: 0 where there is none)"},
		},
		"CPU per GPU without CPU quota, and bad amounts": {
			yaml: base + "requests: {cpuPerGPU: 12}\nteams: [{name: nlp, members: [alice], quota: {h100: {nominal: 16, memory: 12Gx}}}]\n",
			want: []string{
				"gpubot.yaml:4:23: requests.cpuPerGPU: team nlp has no cpu quota on h100: Kueue admits nothing that asks for CPU where its ClusterQueue has no CPU quota; give teams[0].quota.h100 a cpu, or remove requests.cpuPerGPU",
				`gpubot.yaml:5:75: teams[0].quota.h100.memory: "12Gx" is not an amount of memory: write a whole number with Ki, Mi, Gi or Ti (binary) or k, M, G, T (decimal), like "512Gi"`,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("gpubot.yaml", []byte(tc.yaml))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse() = %v, want Errors", err)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
