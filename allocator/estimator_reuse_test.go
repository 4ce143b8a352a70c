package allocator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEstimatorReuseSeries: through a series of admissions, each as
// Kueue makes them at Now after some running work finished, the
// Estimator's estimates rebuilt from its last simulations equal a fresh
// Estimates of the same state, deep-equal. The series run in every
// ordering mode, with the entry penalty (the queues' shares change with
// each admission, and several queues may share one) and without (they
// do not), with and without arrivals, and with the counts of higher
// priority taken out one by one or counted again. The test cluster is
// the benchmarks' on 32 nodes.
func TestEstimatorReuseSeries(t *testing.T) {
	modes := map[string]func(*Cluster){
		"fair sharing": func(*Cluster) {},
		"fair sharing, equal shares": func(c *Cluster) {
			for i := range c.Queues {
				c.Queues[i].Weight = 1
			}
		},
		"fair sharing, no penalty": func(c *Cluster) { c.Policy.EntryPenalty = 0 },
		"fifo":                     func(c *Cluster) { c.Policy = Policy{Mode: BestEffortFIFO} },
		"fcfs":                     func(c *Cluster) { c.Policy = Policy{Mode: FirstComeFirstServed} },
	}
	reused := map[string]int{}
	defer func(m int) { maxUncounted = m }(maxUncounted)
	for name, mode := range modes {
		for _, arrivals := range []bool{false, true} {
			// Arrivals or not, the counts of higher priority taken out
			// one by one or counted again.
			maxUncounted = 32
			if arrivals {
				maxUncounted = 0
			}
			t.Run(fmt.Sprintf("%s, arrivals %v", name, arrivals), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(len(name)), 7))
				c := memoCluster(16, false)
				mode(c)
				usage := map[string]float64{"team0": 50, "team1": 200, "team3": 50}
				if name == "fair sharing, equal shares" {
					usage = nil
				}
				s, err := NewSnapshot(c, t0, benchWorkloads(r, 500, t0), usage)
				if err != nil {
					t.Fatal(err)
				}
				s.Schedule()
				if name == "fair sharing, equal shares" {
					// Shares close enough for the entry penalties to
					// reorder the queues, two of them equal.
					if s, err = NewSnapshot(c, t0, s.Workloads(), map[string]float64{"team0": 10, "team1": 10.3, "team2": 10.1, "team3": 10}); err != nil {
						t.Fatal(err)
					}
				}
				opts := EstimateOptions{Factors: map[string]Range{}}
				for _, q := range c.Queues {
					opts.Factors[q.Name] = Range{Low: 1, High: 1.5} // none overdue at Now
				}
				if arrivals {
					opts.Arrivals = []ArrivalRate{{Queue: "team1", Priority: 0, GPUs: 20, Over: time.Hour},
						{Queue: "team3", Priority: 100, GPUs: 10, Over: time.Hour}, {Queue: "team2", Priority: 100, GPUs: 8, Size: 2}}
				}
				est := NewEstimator()
				for step := range 6 {
					// Some running work finishes: a few workloads, or many
					// small ones.
					n := 1 + r.IntN(6)
					if step%3 == 2 {
						n = 60
					}
					for _, w := range s.Workloads() {
						if n > 0 && w.Admission != nil && (step%3 != 2 || w.GPUs <= 2) {
							s.Release(w.ID)
							n--
						}
					}
					before, err := NewSnapshot(s.Cluster(), s.Now(), s.Workloads(), s.Usage())
					if err != nil {
						t.Fatal(err)
					}
					est.Estimates(before, opts)
					admitted := 0
					for _, ev := range s.Schedule() {
						if ev.Kind == EventAdmitted {
							admitted++
						}
					}
					after, err := NewSnapshot(s.Cluster(), s.Now(), s.Workloads(), s.Usage())
					if err != nil {
						t.Fatal(err)
					}
					if step%2 == 1 {
						after = s // its slots are not the fresh snapshot's
					}
					was := est.Reused
					got := est.Estimates(after, opts)
					if want := Estimates(after, opts); !cmp.Equal(got, want) {
						t.Fatalf("step %d (%d admitted, reused %v): rebuilt estimates differ from Estimates:\n%s",
							step, admitted, est.Reused > was, cmp.Diff(want, got))
					}
					if est.Reused > was {
						reused[name]++
					}
				}
			})
		}
	}
	for name := range modes {
		if reused[name] == 0 {
			t.Errorf("%s: no state was reused: the test does not test the reuse", name)
		}
	}
	t.Logf("reused: %v", reused)
}

// TestMergeByShare: the admission order after the queues' shares
// changed, merged from the order before, is the order sorted afresh,
// with ties in the shares before and after, and in every ordering mode.
func TestMergeByShare(t *testing.T) {
	levels := []float64{0, 0, 40, 100, 100, 250}
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 8))
		c := memoCluster(4, false)
		switch seed % 3 {
		case 1:
			c.Policy.Mode = FirstComeFirstServed
		case 2:
			for i := range c.Queues {
				c.Queues[i].Weight = 1
			}
		}
		s, err := NewSnapshot(c, t0, benchWorkloads(r, 200, t0), nil)
		if err != nil {
			t.Fatal(err)
		}
		for q := range s.usage {
			s.usage[q] = levels[r.IntN(len(levels))]
		}
		order := s.pendingInOrder()
		pos := make([]int32, len(order))
		for i := range pos {
			pos[i] = int32(i)
		}
		// Some are admitted meanwhile: drop them.
		var kept, keptPos []int32
		for i, slot := range order {
			if r.IntN(8) > 0 {
				kept, keptPos = append(kept, slot), append(keptPos, pos[i])
			}
		}
		for q := range s.usage {
			s.usage[q] = levels[r.IntN(len(levels))]
		}
		got, gotPos := s.mergeByShare(kept, keptPos, s.shares())
		want := s.pendingInOrder()
		want = slices.DeleteFunc(want, func(slot int32) bool { return !slices.Contains(kept, slot) })
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: merged order differs from the sorted one:\n%s", seed, diff)
		}
		for k, p := range gotPos {
			if order[p] != got[k] {
				t.Fatalf("seed %d: position %d of the merged order is %d, which was at %d before", seed, k, got[k], p)
			}
		}
	}
}

// TestEstimatorRebuildRefuses: a rebuild gives up, and the Estimator
// recomputes, when the state is not the one the last simulations
// reached (which the fingerprint already tells, but a rebuild does not
// take it on trust): another time, another pending workload, one instead of another,
// or a share that is not a number.
func TestEstimatorRebuildRefuses(t *testing.T) {
	c := memoCluster(4, false)
	r := rand.New(rand.NewPCG(1, 9))
	s, err := NewSnapshot(c, t0, benchWorkloads(r, 100, t0), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := EstimateOptions{}
	for name, change := range map[string]func(*Snapshot) *Snapshot{
		"time": func(s *Snapshot) *Snapshot {
			o, _ := NewSnapshot(s.Cluster(), s.Now().Add(time.Second), s.Workloads(), s.Usage())
			return o
		},
		"new request": func(s *Snapshot) *Snapshot {
			o := s.Clone()
			if _, err := o.Add(MakeWorkload("new").Queue("team0").GPUs(1).Obj()); err != nil {
				t.Fatal(err)
			}
			return o
		},
		"request replaced": func(s *Snapshot) *Snapshot {
			o := s.Clone()
			if _, err := o.Release(o.Order()[0]); err != nil {
				t.Fatal(err)
			}
			if _, err := o.Add(MakeWorkload("new").Queue("team0").GPUs(1).Obj()); err != nil {
				t.Fatal(err)
			}
			return o
		},
		"share": func(s *Snapshot) *Snapshot {
			o := s.Clone()
			o.usage[0] = math.NaN()
			return o
		},
	} {
		e := NewEstimator()
		e.Estimates(s, opts)
		after := s.Clone()
		after.Schedule()
		if _, ok := e.rebuild(after, opts); !ok {
			t.Fatalf("%s: the state the simulations reached is not rebuilt", name)
		}
		if _, ok := e.rebuild(change(after), opts); ok {
			t.Errorf("%s: rebuilt", name)
		}
	}
}
