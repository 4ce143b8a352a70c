package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPropertyRunner holds Runner to its definition: the same operations
// through a Runner and directly on a clone give the same events and the
// same state, including when the snapshot is changed behind the runner.
func TestPropertyRunner(t *testing.T) {
	for seed := range uint64(propertyCases / 3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			s, _ := randomStateKind(t, r, seed%2 == 1)
			plain := s.Clone()
			// Ends: a per-workload runtime from its ID, so that both sides
			// agree and runtimes differ from Duration.
			end := func(w Workload) time.Time {
				h := 0
				for _, c := range w.ID {
					h = h*31 + int(c)
				}
				return w.Admission.At.Add(time.Duration(h%400) * time.Minute)
			}
			run := NewRunner(s, end)
			for step := range 40 {
				var want, got []Event
				switch op := r.IntN(7); op {
				case 0, 1:
					w := randomWorkload(r, s.Cluster(), fmt.Sprintf("n%03d", step))
					_, errWant := plain.Add(w)
					errGot := run.Add(w)
					if (errWant == nil) != (errGot == nil) {
						t.Fatalf("step %d: Add: %v vs %v", step, errWant, errGot)
					}
				case 2:
					want, got = plain.Schedule(), run.Schedule()
				case 3, 4:
					to := s.Now().Add(time.Duration(r.IntN(300)) * time.Minute)
					want, got = plain.Advance(to, end), run.Advance(to)
				case 5: // behind the runner's back
					if id, ok := pick(r, s, true); ok {
						d := time.Duration(r.IntN(5)) * time.Hour
						plain.Extend(id, d)
						s.Extend(id, d)
						plain.Evict(id)
						s.Evict(id)
					}
				case 6:
					if id, ok := pick(r, s, r.IntN(2) == 0); ok {
						plain.Release(id)
						if err := run.Release(id); err != nil {
							t.Fatal(err)
						}
					}
				}
				if diff := cmpDiff(evs(want), evs(got)); diff != "" {
					t.Fatalf("step %d: events differ (-plain +runner):\n%s", step, diff)
				}
				if diff := cmpDiff(viewOf(plain), viewOf(s)); diff != "" {
					t.Fatalf("step %d: state differs (-plain +runner):\n%s", step, diff)
				}
				checkInvariants(t, s)
			}
		})
	}
}
