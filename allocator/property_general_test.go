package allocator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Random clusters for the general engine: nodes that count CPU and
// memory, CPU and memory quotas, cohort trees with quota and limits of
// their own, borrowWithinCohort, flavorFungibility, weights and Kueue's
// Fair Sharing. The property tests run half their seeds on these
// (randomStateKind).

func randomGeneralCluster(r *rand.Rand) *Cluster {
	c := MakeCluster()
	nf := 1 + r.IntN(2)
	names := []string{"h100", "a100"}[:nf]
	for _, f := range names {
		gpn := []int{4, 8}[r.IntN(2)]
		c.Flavor(f, gpn)
		counted := r.IntN(2) == 0
		for i := range 2 + r.IntN(6) {
			n := Node{Name: fmt.Sprintf("%s-%02d", f, i), Flavor: f, GPUs: gpn,
				Block: fmt.Sprintf("b%d", i/4), Rack: fmt.Sprintf("r%d", i/2)}
			if counted {
				n.CPU, n.Memory = int64(16+r.IntN(4)*16)*1000, int64(64+r.IntN(4)*64)<<30
			}
			c.Cluster.Nodes = append(c.Cluster.Nodes, n)
		}
	}
	cohorts := []string{""}
	quota := func(parent bool) Quota {
		q := Quota{Nominal: r.IntN(9)}
		if parent && r.IntN(3) == 0 {
			b := r.IntN(5)
			q.BorrowingLimit = &b
		}
		if parent && r.IntN(3) == 0 {
			l := r.IntN(q.Nominal + 1)
			q.LendingLimit = &l
		}
		if r.IntN(3) == 0 {
			q.CPU = &ResourceQuota{Nominal: int64(r.IntN(5)) * 16000}
		}
		return q
	}
	if r.IntN(4) > 0 {
		c.CohortTree("R", "")
		cohorts = append(cohorts, "R")
		for _, name := range []string{"X", "Y"}[:r.IntN(3)] {
			c.CohortTree(name, "R").CohortWeight(float64(r.IntN(3)))
			cohorts = append(cohorts, name)
			if r.IntN(2) == 0 {
				c.Cohorts[len(c.Cohorts)-1].Quotas[names[r.IntN(nf)]] = quota(true)
			}
		}
	}
	within := []string{"", PreemptLowerPriority, PreemptLowerOrNewerEqualPriority}
	reclaim := []string{"", PreemptLowerPriority, PreemptAny}
	for q := range 1 + r.IntN(4) {
		qw := MakeQueue(fmt.Sprintf("q%d", q)).Weight([]float64{0, 1, 2, ZeroWeight}[r.IntN(4)]).
			Cohort(cohorts[r.IntN(len(cohorts))])
		for _, i := range r.Perm(nf)[:1+r.IntN(nf)] {
			f := names[i]
			qt := quota(qw.Queue.Cohort != "")
			qt.Nominal = r.IntN(17)
			if qt.LendingLimit != nil {
				l := r.IntN(qt.Nominal + 1)
				qt.LendingLimit = &l
			}
			if r.IntN(4) == 0 {
				qt.Memory = &ResourceQuota{Nominal: int64(r.IntN(4)) * (128 << 30)}
			}
			qw.Flavors = append(qw.Flavors, f)
			qw.Quotas[f] = qt
		}
		qw.Preempt(within[r.IntN(3)], reclaim[r.IntN(3)])
		if qw.Queue.Cohort != "" && r.IntN(3) == 0 {
			qw.BorrowWithin([]int32{0, 1, 2}[r.IntN(3)])
		}
		switch r.IntN(4) {
		case 1:
			qw.Fungibility(TryNextFlavor, "", "")
		case 2:
			qw.Fungibility("", MayStopSearch, "")
		case 3:
			qw.Fungibility(TryNextFlavor, TryNextFlavor, []string{BorrowingOverPreemption, PreemptionOverBorrowing}[r.IntN(2)])
		}
		c.Queue(qw)
	}
	switch r.IntN(4) {
	case 0:
		c.KueueFairSharing([][]string{nil, {LessThanOrEqualToFinalShare}, {LessThanInitialShare}}[r.IntN(3)]...)
	case 1:
		c.Fair(time.Duration(r.IntN(4))*time.Hour, time.Duration(r.IntN(3))*10*time.Minute)
	}
	return c.Obj()
}

func randomGeneralWorkload(r *rand.Rand, c *Cluster, id string) Workload {
	w := randomWorkload(r, c, id)
	if r.IntN(2) == 0 {
		w.CPU = int64(1+r.IntN(4)) * 4000 * int64(w.GPUs)
	}
	if r.IntN(4) == 0 {
		w.Memory = int64(1+r.IntN(4)) * (16 << 30) * int64(w.GPUs)
	}
	return w
}

// randomStateKind is randomState, on a general cluster when general.
func randomStateKind(t *testing.T, r *rand.Rand, general bool) (*Snapshot, []Workload) {
	t.Helper()
	if !general {
		return randomState(t, r)
	}
	var c *Cluster
	for {
		c = randomGeneralCluster(r)
		if simpleCluster(c) { // make it the general engine's
			q := &c.Queues[0]
			qt := q.Quotas[q.Flavors[0]]
			qt.CPU = &ResourceQuota{Nominal: 64000}
			q.Quotas[q.Flavors[0]] = qt
		}
		if _, err := buildIndex(cloneCluster(c)); err == nil {
			break
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
	}
	s, err := NewSnapshot(c, t0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kept []Workload
	for i := range 5 + r.IntN(25) {
		w := randomGeneralWorkload(r, c, fmt.Sprintf("w%02d", i))
		if _, err := s.Add(w); err == nil {
			kept = append(kept, w)
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Add: %v", err)
		}
	}
	s.Schedule()
	return s, kept
}

// TestPropertyGeneralInvariants runs random operations on general
// clusters: after each, the invariants hold (no node and no queue,
// anywhere in its cohort tree, exceeds what it has in any resource), and
// in BestEffortFIFO mode Schedule reaches a state where another Schedule
// does nothing.
func TestPropertyGeneralInvariants(t *testing.T) {
	for seed := range uint64(propertyCases) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 21))
			s, _ := randomStateKind(t, r, true)
			checkInvariants(t, s)
			for step := range 30 {
				switch r.IntN(6) {
				case 0:
					s.Add(randomGeneralWorkload(r, s.Cluster(), fmt.Sprintf("n%02d", step)))
				case 1:
					s.Schedule()
					// Kueue's cycles run until no head is left; the one-head
					// modes pass over what they did not retry.
					if evs := s.Schedule(); len(evs) > 0 && !s.ix.fair && !s.ix.fcfs {
						t.Fatalf("step %d: a second Schedule did %v", step, evs)
					}
				case 2:
					if id, ok := pick(r, s, true); ok {
						s.Release(id)
					}
				case 3:
					s.Advance(s.Now().Add(time.Duration(r.IntN(300))*time.Minute), nil)
				case 4:
					if id, ok := pick(r, s, false); ok {
						w, _ := s.Workload(id)
						if a, reason := s.Fit(w); reason == ReasonNone {
							if _, err := s.Reserve(id, a); err != nil {
								t.Fatalf("step %d: Reserve of Fit's admission: %v", step, err)
							}
						}
					}
				case 5:
					if id, ok := pick(r, s, false); ok {
						w, _ := s.Workload(id)
						if victims, _, ok := s.ProposeVictims(w); ok && len(victims) > 0 {
							if _, err := s.Preempt(id, victims); err != nil {
								t.Fatalf("step %d: Preempt with ProposeVictims' set: %v", step, err)
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
