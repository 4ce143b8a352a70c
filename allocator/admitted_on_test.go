package allocator

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPropertyAdmittedOn: AdmittedOn(f) is exactly the workloads
// Workloads shows admitted on f, through random histories (both engines'
// states: GPU-only and with CPU, memory and the cohort tree).
func TestPropertyAdmittedOn(t *testing.T) {
	seen := 0
	for seed := range uint64(propertyCases) {
		r := rand.New(rand.NewPCG(seed, 7))
		s, _ := randomStateKind(t, r, seed%2 == 1)
		for step := range 4 {
			for _, f := range s.Cluster().Flavors {
				var want []string
				for _, w := range s.Workloads() {
					if w.Admission != nil && w.Admission.Flavor == f.Name {
						want = append(want, w.ID)
					}
				}
				var got []string
				for _, w := range s.AdmittedOn(f.Name) {
					got = append(got, w.ID)
				}
				slices.Sort(got)
				seen += len(want)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d step %d flavor %s: AdmittedOn = %v, Workloads admitted there = %v", seed, step, f.Name, got, want)
				}
			}
			if id, ok := pick(r, s, true); ok {
				if _, err := s.Release(id); err != nil {
					t.Fatal(err)
				}
			}
			s.Schedule()
		}
		if got := s.AdmittedOn("no-such-flavor"); got != nil {
			t.Fatalf("an unknown flavor has %v", got)
		}
	}
	if seen == 0 {
		t.Fatal("no admitted workload in any case: the property says nothing")
	}
}
