package allocator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Property tests over random clusters and workloads, seeded so that a
// failure names its case.

const propertyCases = 300

func randomCluster(r *rand.Rand) *Cluster {
	c := MakeCluster()
	nf := 1 + r.IntN(2)
	names := []string{"h100", "a100"}[:nf]
	for _, f := range names {
		gpn := []int{4, 8}[r.IntN(2)]
		c.Flavor(f, gpn)
		n := 2 + r.IntN(6)
		for i := range n {
			g := gpn
			if r.IntN(5) == 0 {
				g = []int{gpn / 2, 2 * gpn}[r.IntN(2)]
			}
			rack, block := fmt.Sprintf("r%d", i/2), fmt.Sprintf("b%d", i/4)
			if r.IntN(8) == 0 {
				rack = ""
			}
			c.Node(fmt.Sprintf("%s-%02d", f, i), f, g, block, rack)
		}
	}
	within := []string{"", PreemptLowerPriority, PreemptLowerOrNewerEqualPriority}
	reclaim := []string{"", PreemptLowerPriority, PreemptAny}
	for q := range 1 + r.IntN(3) {
		qw := MakeQueue(fmt.Sprintf("q%d", q)).Weight(float64(r.IntN(3)))
		if r.IntN(10) < 7 {
			qw.Cohort("c")
		}
		for _, i := range r.Perm(nf)[:1+r.IntN(nf)] {
			f := names[i]
			qw.Quota(f, r.IntN(17))
			if r.IntN(3) == 0 {
				qw.BorrowingLimit(f, r.IntN(9))
			}
			if r.IntN(3) == 0 {
				qw.LendingLimit(f, r.IntN(qw.Quotas[f].Nominal+1))
			}
		}
		qw.Preempt(within[r.IntN(3)], reclaim[r.IntN(3)])
		c.Queue(qw)
	}
	if r.IntN(2) == 0 {
		c.Fair(time.Duration(r.IntN(4))*time.Hour, time.Duration(r.IntN(3))*10*time.Minute)
	}
	return c.Obj()
}

func randomWorkload(r *rand.Rand, c *Cluster, id string) Workload {
	q := c.Queues[r.IntN(len(c.Queues))]
	w := MakeWorkload(id).Queue(q.Name).
		GPUs([]int{1, 1, 2, 3, 4, 4, 6, 8, 8, 12, 16}[r.IntN(11)]).
		Priority(int32(r.IntN(3))).
		Created(time.Duration(r.IntN(600)) * time.Minute).
		Duration(time.Duration(r.IntN(10)) * time.Hour)
	if r.IntN(4) == 0 {
		w.Topology(Level(1 + r.IntN(3)))
	}
	if r.IntN(5) == 0 {
		w.Flavor(q.Flavors[r.IntN(len(q.Flavors))])
	}
	return w.Obj()
}

// randomState builds a random snapshot with some work admitted.
func randomState(t *testing.T, r *rand.Rand) (*Snapshot, []Workload) {
	t.Helper()
	c := randomCluster(r)
	var ws []Workload
	for i := range 5 + r.IntN(25) {
		ws = append(ws, randomWorkload(r, c, fmt.Sprintf("w%02d", i)))
	}
	s, err := NewSnapshot(c, t0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kept []Workload
	for _, w := range ws {
		if _, err := s.Add(w); err == nil {
			kept = append(kept, w)
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Add: %v", err)
		}
	}
	s.Schedule()
	return s, kept
}

// pick returns a random workload ID, admitted or pending as asked.
func pick(r *rand.Rand, s *Snapshot, admitted bool) (string, bool) {
	var ids []string
	for _, w := range s.Workloads() {
		if (w.Admission != nil) == admitted {
			ids = append(ids, w.ID)
		}
	}
	if len(ids) == 0 {
		return "", false
	}
	return ids[r.IntN(len(ids))], true
}

func TestPropertyInvariants(t *testing.T) {
	for seed := range uint64(propertyCases) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			s, _ := randomStateKind(t, r, seed%2 == 1)
			checkInvariants(t, s)
			next := 100
			for step := range 40 {
				op := r.IntN(8)
				switch op {
				case 0:
					s.Add(randomWorkload(r, s.Cluster(), fmt.Sprintf("n%03d", next)))
					next++
				case 1:
					s.Schedule()
				case 2:
					s.Advance(s.Now().Add(time.Duration(r.IntN(300))*time.Minute), nil)
				case 3:
					if id, ok := pick(r, s, false); ok {
						w, _ := s.Workload(id)
						if victims, _, ok := s.ProposeVictims(w); ok {
							if _, err := s.Preempt(id, victims); err != nil {
								t.Fatalf("step %d: Preempt(%s, %v) after ProposeVictims: %v", step, id, victims, err)
							}
						}
					}
				case 4:
					if id, ok := pick(r, s, r.IntN(2) == 0); ok {
						s.Release(id)
					}
				case 5:
					if id, ok := pick(r, s, true); ok {
						s.Evict(id)
					}
				case 6:
					if id, ok := pick(r, s, false); ok {
						w, _ := s.Workload(id)
						if a, reason := s.Fit(w); reason == ReasonNone {
							if _, err := s.Reserve(id, a); err != nil {
								t.Fatalf("step %d: Reserve of Fit's admission: %v", step, err)
							}
						}
					}
				case 7:
					if id, ok := pick(r, s, r.IntN(2) == 0); ok {
						s.Extend(id, time.Duration(r.IntN(5))*time.Hour)
					}
				}
				checkInvariants(t, s)
				if t.Failed() {
					t.Fatalf("after step %d (op %d)", step, op)
				}
			}
		})
	}
}

func TestPropertyUndo(t *testing.T) {
	for seed := range uint64(propertyCases) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 2))
			s, _ := randomStateKind(t, r, seed%2 == 1)
			s.Advance(s.Now().Add(time.Hour), nil)
			ops := map[string]func() (func(), error){
				"add": func() (func(), error) {
					return s.Add(randomWorkload(r, s.Cluster(), "extra"))
				},
				"add-admitted": func() (func(), error) {
					w := randomWorkload(r, s.Cluster(), "extra-admitted")
					a, reason := s.Fit(w)
					if reason != ReasonNone {
						return nil, errors.New("does not fit")
					}
					w.Admission = &a
					return s.Add(w)
				},
				"release": func() (func(), error) {
					id, _ := pick(r, s, r.IntN(2) == 0)
					return s.Release(id)
				},
				"evict": func() (func(), error) {
					id, _ := pick(r, s, true)
					return s.Evict(id)
				},
				"extend": func() (func(), error) {
					id, _ := pick(r, s, r.IntN(2) == 0)
					return s.Extend(id, 7*time.Hour)
				},
				"reserve": func() (func(), error) {
					id, _ := pick(r, s, false)
					w, _ := s.Workload(id)
					a, reason := s.Fit(w)
					if reason != ReasonNone {
						return nil, errors.New("does not fit")
					}
					return s.Reserve(id, a)
				},
			}
			names := []string{"add", "add-admitted", "evict", "extend", "release", "reserve"}
			for range 10 {
				first, second := names[r.IntN(len(names))], names[r.IntN(len(names))]
				before := viewOf(s)
				undo1, err1 := ops[first]()
				mid := viewOf(s)
				undo2, err2 := ops[second]()
				if err2 == nil {
					undo2()
					undo2() // a second call does nothing
					if diff := cmpDiff(mid, viewOf(s)); diff != "" {
						t.Fatalf("%s then %s, undo %s (-before +after):\n%s", first, second, second, diff)
					}
				}
				if err1 == nil {
					undo1()
					if diff := cmpDiff(before, viewOf(s)); diff != "" {
						t.Fatalf("undo %s (-before +after):\n%s", first, diff)
					}
				}
				checkInvariants(t, s)
			}
			// An undo after another mutation is ignored.
			if id, ok := pick(r, s, true); ok {
				undo, _ := s.Evict(id)
				s.Schedule()
				after := viewOf(s)
				undo()
				if diff := cmpDiff(after, viewOf(s)); diff != "" {
					t.Fatalf("stale undo changed the snapshot:\n%s", diff)
				}
			}
		})
	}
}

func TestPropertyScheduleMatchesDefinition(t *testing.T) {
	for seed := range uint64(propertyCases) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 3))
			s, _ := randomState(t, r)
			for i := range 30 {
				s.Add(randomWorkload(r, s.Cluster(), fmt.Sprintf("p%02d", i)))
			}
			for range 4 {
				naive := s.Clone()
				want := naiveSchedule(naive)
				got := evs(s.Schedule())
				if diff := cmpDiff(want, got); diff != "" {
					t.Fatalf("Schedule differs from its definition (-want +got):\n%s", diff)
				}
				if diff := cmpDiff(engineView(naive), engineView(s)); diff != "" {
					t.Fatalf("state differs:\n%s", diff)
				}
				checkInvariants(t, s)
				// Free some GPUs for the next round.
				if id, ok := pick(r, s, true); ok {
					s.Release(id)
				}
				s.Advance(s.Now().Add(time.Duration(r.IntN(120))*time.Minute), nil)
			}
		})
	}
}

func TestPropertyDeterminism(t *testing.T) {
	for seed := range uint64(propertyCases / 3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 4))
			s, _ := randomStateKind(t, r, seed%2 == 1)
			for i := range 20 {
				s.Add(randomWorkload(r, s.Cluster(), fmt.Sprintf("p%02d", i)))
			}
			ws := s.Workloads()
			shuffled := slices.Clone(ws)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			a, err := NewSnapshot(s.Cluster(), s.Now(), ws, s.Usage())
			if err != nil {
				t.Fatal(err)
			}
			b, err := NewSnapshot(s.Cluster(), s.Now(), shuffled, s.Usage())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmpDiff(viewOf(s), viewOf(a)); diff != "" {
				t.Fatalf("round trip through Workloads() (-orig +rebuilt):\n%s", diff)
			}
			if diff := cmpDiff(a.Order(), b.Order()); diff != "" {
				t.Fatalf("Order depends on input order:\n%s", diff)
			}
			if diff := cmpDiff(a.Order(), s.Order()); diff != "" {
				t.Fatalf("Order differs after rebuild:\n%s", diff)
			}
			ea, eb, es := a.Schedule(), b.Schedule(), s.Schedule()
			if diff := cmpDiff(ea, eb); diff != "" {
				t.Fatalf("Schedule depends on input order:\n%s", diff)
			}
			if diff := cmpDiff(ea, es); diff != "" {
				t.Fatalf("Schedule differs after rebuild:\n%s", diff)
			}
			to := s.Now().Add(12 * time.Hour)
			if diff := cmpDiff(a.Advance(to, nil), b.Advance(to, nil)); diff != "" {
				t.Fatalf("Advance depends on input order:\n%s", diff)
			}
		})
	}
}

func TestPropertyEstimates(t *testing.T) {
	for seed := range uint64(propertyCases / 3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 5))
			s, _ := randomStateKind(t, r, seed%2 == 1)
			for i := range 15 {
				s.Add(randomWorkload(r, s.Cluster(), fmt.Sprintf("p%02d", i)))
			}
			opts := EstimateOptions{Horizon: 72 * time.Hour, Factors: map[string]Range{"q0": {Low: 0.2, High: 1.5}}}
			before := viewOf(s)
			all := Estimates(s, opts)
			if diff := cmpDiff(before, viewOf(s)); diff != "" {
				t.Fatalf("Estimates changed the snapshot:\n%s", diff)
			}
			order := s.Order()
			if len(all) != len(order) {
				t.Fatalf("%d estimates for %d pending", len(all), len(order))
			}
			for _, id := range order {
				e := all[id]
				if e.Known && (e.Earliest.Before(s.Now()) || e.Latest.Before(e.Earliest)) {
					t.Errorf("%s: %v … %v with Now %v", id, e.Earliest, e.Latest, s.Now())
				}
				if !e.Known && (!e.Earliest.IsZero() || !e.Latest.IsZero()) {
					t.Errorf("%s: unknown but has times", id)
				}
				if e.Position != 1+e.Ahead || e.AheadHigherPriority > e.Ahead {
					t.Errorf("%s: position %d ahead %d higher %d", id, e.Position, e.Ahead, e.AheadHigherPriority)
				}
				if one := EstimateFor(s, id, opts); !cmp.Equal(one, e) {
					t.Errorf("EstimateFor(%s) = %+v, Estimates gave %+v", id, one, e)
				}
			}
		})
	}
}

func TestCloneIsIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	s, _ := randomState(t, r)
	before := viewOf(s)
	c := s.Clone()
	for i := range 10 {
		c.Add(randomWorkload(r, c.Cluster(), fmt.Sprintf("c%d", i)))
	}
	c.Advance(c.Now().Add(24*time.Hour), nil)
	c.Schedule()
	checkInvariants(t, c)
	if diff := cmpDiff(before, viewOf(s)); diff != "" {
		t.Fatalf("mutating a clone changed the original:\n%s", diff)
	}
}

func TestPreemptRollsBack(t *testing.T) {
	c := MakeCluster().Flavor("f", 8).Nodes("f", 2, 8, 0, 0).Queue(MakeQueue("a").Quota("f", 16)).Obj()
	s := newSnapshot(t, c,
		MakeWorkload("r1").Queue("a").GPUs(8).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("r2").Queue("a").GPUs(8).Admitted("f", 0, "f-01").Obj(),
		MakeWorkload("big").Queue("a").GPUs(16).Priority(9).Obj(),
	)
	before := viewOf(s)
	if _, err := s.Preempt("big", []string{"r1"}); !errors.Is(err, ErrState) {
		t.Fatalf("Preempt with too few victims: %v", err)
	}
	if diff := cmpDiff(before, viewOf(s)); diff != "" {
		t.Fatalf("failed Preempt changed the snapshot:\n%s", diff)
	}
	victims, a, ok := s.ProposeVictims(MakeWorkload("big").Queue("a").GPUs(16).Priority(9).Obj())
	if !ok || !cmp.Equal(victims, []string{"r1", "r2"}) || !cmp.Equal(a.Nodes, []string{"f-00", "f-01"}) {
		t.Fatalf("ProposeVictims = %v %v %v", victims, a, ok)
	}
	got, err := s.Preempt("big", victims)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"preempted:r1<big", "preempted:r2<big", "admitted:big"}
	if diff := cmpDiff(want, evs(got)); diff != "" {
		t.Errorf("events:\n%s", diff)
	}
}

// TestPropertyShadows checks the shadows' answer against removing every
// candidate for real.
func TestPropertyShadows(t *testing.T) {
	for seed := range uint64(propertyCases) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 6))
			s, _ := randomState(t, r)
			for step := range 30 {
				switch r.IntN(4) {
				case 0:
					s.Add(randomWorkload(r, s.Cluster(), fmt.Sprintf("n%02d", step)))
				case 1:
					s.Schedule()
				case 2:
					if id, ok := pick(r, s, true); ok {
						s.Release(id)
					}
				case 3:
					s.Advance(s.Now().Add(time.Duration(r.IntN(200))*time.Minute), nil)
				}
				id, ok := pick(r, s, false)
				if !ok {
					continue
				}
				slot := s.byID[id]
				x := &s.ws[slot]
				q := int(x.q)
				qi := &s.ix.queues[q]
				for _, c := range s.classes[x.cls].cands {
					f := int(c.f)
					got := s.fitsWithout(q, &x.w, x.w.Topology, c, true)
					var gone []int32
					for v := range s.ws {
						y := &s.ws[v]
						if !y.live || int(y.fl) != f {
							continue
						}
						if int(y.q) == q && qi.within != polNever && (y.w.Priority < x.w.Priority ||
							(qi.within == polLowerOrNewerEqual && y.w.Priority == x.w.Priority && y.w.Created.After(x.w.Created))) {
							gone = append(gone, int32(v))
						}
					}
					for _, v := range gone {
						s.vacate(v)
					}
					want := s.fitsQuota(q, f, x.w.GPUs, true) && s.feasible(c, x.w.Topology)
					for _, v := range gone {
						s.occupy(v)
					}
					if got != want {
						t.Fatalf("step %d: fitsWithout(%s, flavor %d) = %v, removing %d candidates says %v", step, id, f, got, len(gone), want)
					}
				}
				checkInvariants(t, s)
			}
		})
	}
}
