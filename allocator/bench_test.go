package allocator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// The benchmark cluster: 2 flavors × 1 000 nodes × 8 GPUs (16 000 GPUs),
// 16 nodes a rack, 8 racks a block; 4 queues sharing one cohort with
// nominal quotas adding up to the cluster, mixed preemption policies,
// Admission Fair Sharing. About 3 000 workloads run and 10 000 wait.

var (
	benchOnce sync.Once
	benchSnap *Snapshot
	benchErr  error
)

// benchCluster is the benchmarks' cluster: 2 flavors × 1 000 nodes of 8
// GPUs, four queues in one cohort with quotas adding up to it.
func benchCluster() *Cluster { return memoCluster(1000, false) }

func benchWorkloads(r *rand.Rand, n int, now time.Time) []Workload {
	sizes := []int{1, 1, 1, 1, 1, 1, 2, 2, 2, 4, 4, 4, 4, 8, 8, 8, 8, 8, 16, 32}
	out := make([]Workload, n)
	for i := range out {
		w := Workload{
			ID:       fmt.Sprintf("w%05d", i),
			Queue:    fmt.Sprintf("team%d", r.IntN(4)),
			GPUs:     sizes[r.IntN(len(sizes))],
			Created:  now.Add(-time.Duration(r.IntN(48*60)) * time.Minute),
			Duration: time.Duration(1+r.IntN(24)) * time.Hour,
		}
		switch p := r.IntN(10); {
		case p == 0:
			w.Priority = 1000
		case p < 4:
			w.Priority = 100
		}
		switch t := r.IntN(100); {
		case t < 5:
			w.Topology = LevelHost
		case t < 13:
			w.Topology = LevelRack
		case t < 15:
			w.Topology = LevelBlock
		}
		if r.IntN(10) == 0 {
			w.Flavor = []string{"h100", "a100"}[r.IntN(2)]
		}
		out[i] = w
	}
	return out
}

// benchSnapshot returns the shared big snapshot (do not mutate it).
func benchSnapshot(b *testing.B) *Snapshot {
	b.Helper()
	return benchState(b)
}

// benchState is benchSnapshot for tests too.
func benchState(tb testing.TB) *Snapshot {
	tb.Helper()
	benchOnce.Do(func() {
		now := t0
		r := rand.New(rand.NewPCG(1, 2))
		c := benchCluster()
		s, err := NewSnapshot(c, now, benchWorkloads(r, 13000, now), map[string]float64{
			"team0": 500, "team1": 2000, "team2": 1000, "team3": 0,
		})
		if err != nil {
			benchErr = err
			return
		}
		s.Schedule()
		// Spread the running work's admission times so that ends spread.
		ws := s.Workloads()
		spreadAdmissions(r, ws, now)
		benchSnap, benchErr = NewSnapshot(c, now, ws, s.Usage())
	})
	if benchErr != nil {
		tb.Fatal(benchErr)
	}
	return benchSnap
}

func benchCounts(s *Snapshot) (pending, running int) {
	for q := range s.nPending {
		pending += s.nPending[q]
	}
	return pending, len(s.byID) - pending
}

func BenchmarkEstimates10kPending2kNodes(b *testing.B) {
	s := benchSnapshot(b)
	pending, running := benchCounts(s)
	b.ReportAllocs()
	b.ResetTimer()
	var known int
	for b.Loop() {
		est := Estimates(s, EstimateOptions{})
		known = 0
		for _, e := range est {
			if e.Known {
				known++
			}
		}
	}
	b.ReportMetric(float64(pending), "pending")
	b.ReportMetric(float64(running), "running")
	b.ReportMetric(float64(known), "known")
}

func BenchmarkEstimateFor(b *testing.B) {
	s := benchSnapshot(b)
	order := s.Order()
	id := order[len(order)/2]
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		EstimateFor(s, id, EstimateOptions{})
	}
}

// BenchmarkSchedule: one cycle after 50 running workloads ended.
func BenchmarkSchedule(b *testing.B) {
	s := benchSnapshot(b)
	var running []string
	for _, w := range s.Workloads() {
		if w.Admission != nil {
			running = append(running, w.ID)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		c := s.Clone()
		for _, id := range running[:50] {
			c.Release(id)
		}
		b.StartTimer()
		c.Schedule()
	}
}

func BenchmarkFit(b *testing.B) {
	s := benchSnapshot(b).Clone()
	ws := s.Workloads()
	var running []string
	for _, w := range ws {
		if w.Admission != nil {
			running = append(running, w.ID)
		}
	}
	for _, id := range running[:20] {
		s.Release(id)
	}
	reqs := []Workload{
		MakeWorkload("x1").Queue("team0").GPUs(8).Obj(),
		MakeWorkload("x2").Queue("team1").GPUs(16).Topology(LevelRack).Obj(),
		MakeWorkload("x3").Queue("team2").GPUs(2).Obj(),
		MakeWorkload("x4").Queue("team3").GPUs(64).Obj(),
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		s.Fit(reqs[i%len(reqs)])
		i++
	}
}

var (
	fifoOnce sync.Once
	fifoSnap *Snapshot
)

// benchFIFO is the benchmark cluster in BestEffortFIFO mode, Kueue's
// (one head per queue a cycle), as a real cluster is modelled.
func benchFIFO(b *testing.B) *Snapshot {
	b.Helper()
	s := benchSnapshot(b)
	fifoOnce.Do(func() {
		c := *s.Cluster()
		c.Policy = Policy{Mode: BestEffortFIFO}
		fifoSnap, benchErr = NewSnapshot(&c, s.Now(), s.Workloads(), s.Usage())
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return fifoSnap
}

func BenchmarkEstimates10kPending2kNodesFIFO(b *testing.B) {
	s := benchFIFO(b)
	b.ReportAllocs()
	for b.Loop() {
		Estimates(s, EstimateOptions{})
	}
}

func BenchmarkScheduleFIFO(b *testing.B) {
	s := benchFIFO(b)
	var running []string
	for _, w := range s.Workloads() {
		if w.Admission != nil {
			running = append(running, w.ID)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		c := s.Clone()
		for _, id := range running[:50] {
			c.Release(id)
		}
		b.StartTimer()
		c.Schedule()
	}
}

// BenchmarkEstimatorAfterAdmission: the estimates of the benchmark
// cluster after Kueue admitted what they predicted for Now, from an
// Estimator that computed the state before, on a fresh snapshot as the
// command service builds one per change: the fingerprint, the pending
// order, the counts ahead and the reasons, no simulation.
func BenchmarkEstimatorAfterAdmission(b *testing.B) {
	before, after, opts, admitted := benchAdmission(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		e := NewEstimator()
		e.Estimates(before, opts)
		b.StartTimer()
		e.Estimates(after, opts)
		if e.Reused != 1 {
			b.Fatalf("recomputed after %d admissions", admitted)
		}
	}
	b.ReportMetric(float64(admitted), "admitted")
}

var (
	admOnce             sync.Once
	admBefore, admAfter *Snapshot
	admOpts             EstimateOptions
	admCount            int
)

// benchAdmission returns the benchmark cluster's state before and after
// Kueue admitted what the estimates (with opts) predicted for Now, as
// fresh snapshots, and how many it admitted (do not mutate them). The
// state before: the benchmark's with the oldest running workloads
// finished, as many as leave room for admissions without a preemption
// (an Estimator does not reuse a first step that preempts).
func benchAdmission(b *testing.B) (before, after *Snapshot, opts EstimateOptions, admitted int) {
	b.Helper()
	s := benchSnapshot(b)
	admOnce.Do(func() { admBefore, admAfter, admOpts, admCount, benchErr = admissionStates(s) })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return admBefore, admAfter, admOpts, admCount
}

func admissionStates(s *Snapshot) (before, after *Snapshot, opts EstimateOptions, admitted int, err error) {
	// Runtimes of at least the requested time: no running workload is
	// overdue at Now in either simulation (an overdue one ends at Now in
	// the simulation but still runs in the cluster, and the states
	// differ).
	f := map[string]Range{}
	for _, q := range s.Cluster().Queues {
		f[q.Name] = Range{Low: 1, High: 1.5}
	}
	opts = EstimateOptions{Factors: f}
	// From the state its first step reaches (preemptions at Now done).
	base := s.Clone()
	base.Schedule()
	for n := 1; n <= 64 && after == nil; n++ {
		c := base.Clone()
		i := 0
		for _, w := range c.Workloads() {
			if w.Admission != nil && i < n {
				c.Release(w.ID)
				i++
			}
		}
		bs, err := NewSnapshot(c.Cluster(), c.Now(), c.Workloads(), c.Usage())
		if err != nil {
			return nil, nil, opts, 0, err
		}
		adm, pre := 0, 0
		for _, ev := range c.Schedule() {
			switch ev.Kind {
			case EventAdmitted:
				adm++
			case EventPreempted:
				pre++
			}
		}
		if adm > 0 && pre == 0 {
			before, admitted = bs, adm
			if after, err = NewSnapshot(c.Cluster(), c.Now(), c.Workloads(), c.Usage()); err != nil {
				return nil, nil, opts, 0, err
			}
		}
	}
	if after == nil {
		return nil, nil, opts, 0, fmt.Errorf("no state admits without preempting")
	}
	return before, after, opts, admitted, nil
}

// BenchmarkEstimatorAfterNewRequest: the estimates of the benchmark
// cluster's state after an admission (BenchmarkEstimatorAfterAdmission's)
// once one new request arrived, from an Estimator that computed the state
// before it, on a fresh snapshot. A new pending workload changes the
// fragmentation mix that placement scores read and the cycles it heads,
// so no reuse is known to be exact in general: the Estimator simulates
// in full (resuming from checkpoints was exact on the requests tried but
// saves only a third: BenchmarkEstimatorResumeAfterNewRequest). The
// others-moved metrics say how much of the answer a new request changes
// (newRequestReach, 20 random requests).
func BenchmarkEstimatorAfterNewRequest(b *testing.B) { afterNewRequest(b, false) }

// BenchmarkEstimatorAfterNewRequestCheckpoints is BenchmarkEstimator-
// AfterNewRequest with the Estimator keeping checkpoints for ForNew:
// what they cost a full computation.
func BenchmarkEstimatorAfterNewRequestCheckpoints(b *testing.B) { afterNewRequest(b, true) }

func afterNewRequest(b *testing.B, checkpoints bool) {
	_, after, opts, _ := benchAdmission(b)
	ws := append(after.Workloads(), MakeWorkload("zz-new").Queue("team1").GPUs(4).Duration(2*time.Hour).Created(after.Now().Sub(t0)).Obj())
	next, err := NewSnapshot(after.Cluster(), after.Now(), ws, after.Usage())
	if err != nil {
		b.Fatal(err)
	}
	var median, most float64
	if !checkpoints {
		median, most = newRequestReach(b, after, opts, 20)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		e := NewEstimator()
		e.KeepCheckpoints = checkpoints
		e.Estimates(after, opts)
		b.StartTimer()
		e.Estimates(next, opts)
		if e.Recomputed != 2 {
			b.Fatal("not recomputed")
		}
	}
	if !checkpoints {
		b.ReportMetric(median, "others-moved-median")
		b.ReportMetric(most, "others-moved-max")
	}
}

// newRequestReach is why an update after a new request is a full
// computation: for n random new requests of the benchmark's mix, each
// added alone to s, it counts the other workloads whose estimate (its
// range, or whether it has one) differs from their estimate without it,
// and returns the median and the largest count.
func newRequestReach(b *testing.B, s *Snapshot, opts EstimateOptions, n int) (median, most float64) {
	b.Helper()
	base := Estimates(s, opts)
	r := rand.New(rand.NewPCG(7, 9))
	counts := make([]float64, n)
	for i := range counts {
		w := benchWorkloads(r, 1, s.Now())[0]
		w.ID, w.Created = fmt.Sprintf("zz-reach-%02d", i), s.Now()
		c := s.Clone()
		if _, err := c.Add(w); err != nil {
			b.Fatal(err)
		}
		for id, e := range Estimates(c, opts) {
			if was, ok := base[id]; ok && (e.Known != was.Known || !e.Earliest.Equal(was.Earliest) || !e.Latest.Equal(was.Latest)) {
				counts[i]++
			}
		}
	}
	slices.Sort(counts)
	return counts[n/2], counts[n-1]
}

// BenchmarkEstimatorForNew: one new request's own estimate from an
// Estimator that computed the state before it (BenchmarkEstimatorAfter-
// Admission's state after), on a fresh snapshot with the request, for
// 20 random requests of the benchmark's mix in turn (an op is one). It
// reports how many of them got exactly EstimateFor's answer (exact-of-20)
// and how far the others were, as the mean distance of the two ends
// (off-median-min, off-max-min; 0 when exact).
func BenchmarkEstimatorForNew(b *testing.B) {
	e, opts, snaps, ws := newRequests(b)
	n := len(snaps)
	ids := make([]string, n)
	exact, off := 0, make([]float64, n)
	for i, s := range snaps {
		w := ws[i]
		ids[i] = w.ID
		got, ok := e.ForNew(s, w.ID, opts)
		if !ok {
			b.Fatalf("%s: no estimate from the last computation", w.ID)
		}
		want := EstimateFor(s, w.ID, opts)
		if got == want {
			exact++
		}
		off[i] = (absDuration(got.Earliest.Sub(want.Earliest)) + absDuration(got.Latest.Sub(want.Latest))).Minutes() / 2
	}
	slices.Sort(off)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, ok := e.ForNew(snaps[i%n], ids[i%n], opts); !ok {
			b.Fatal("no estimate")
		}
		i++
	}
	b.ReportMetric(float64(exact), "exact-of-20")
	b.ReportMetric(off[n/2], "off-median-min")
	b.ReportMetric(off[n-1], "off-max-min")
}

// newRequests is an Estimator that computed BenchmarkEstimatorAfter-
// Admission's state after, with checkpoints, and 20 random requests of
// the benchmark's mix, each added alone to that state in a fresh
// snapshot.
func newRequests(b *testing.B) (e *Estimator, opts EstimateOptions, snaps []*Snapshot, ws []Workload) {
	b.Helper()
	_, after, opts, _ := benchAdmission(b)
	e = NewEstimator()
	e.KeepCheckpoints = true
	e.Estimates(after, opts)
	r := rand.New(rand.NewPCG(7, 9))
	for i := range 20 {
		w := benchWorkloads(r, 1, after.Now())[0]
		w.ID, w.Created = fmt.Sprintf("zz-new-%02d", i), after.Now()
		s, err := NewSnapshot(after.Cluster(), after.Now(), append(after.Workloads(), w), after.Usage())
		if err != nil {
			b.Fatal(err)
		}
		snaps, ws = append(snaps, s), append(ws, w)
	}
	return e, opts, snaps, ws
}

// spreadAdmissions spreads the admitted workloads' admission times over
// their durations before now, so that their ends spread.
func spreadAdmissions(r *rand.Rand, ws []Workload, now time.Time) {
	for i := range ws {
		if a := ws[i].Admission; a != nil {
			a.At = now.Add(-time.Duration(r.Int64N(int64(ws[i].Duration))))
		}
	}
}
