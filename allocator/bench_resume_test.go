package allocator

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkEstimatorResumeAfterNewRequest times an incremental update
// of everyone's estimates after a new request, from checkpoints, and why
// the Estimator does not make it: resume both simulations from the
// checkpoint ForNew would use, with the request added, and run them on
// until every pending workload has started; those that started by that
// checkpoint keep the last computation's start. The state and the 20
// random requests are BenchmarkEstimatorForNew's; an op is one request,
// in turn. It reports the median and the slowest request (ms) and how
// many of the 20 took at most 10 ms, each request timed once before the
// loop, and for how many of the 20 every pending workload's start in
// both simulations is a full simulation's (exact-of-20). A request that
// waits behind most of the queue resumes late and is quick; one of a
// higher priority resumes near Now and costs about a full computation
// (BENCHMARKS.md).
func BenchmarkEstimatorResumeAfterNewRequest(b *testing.B) {
	e, opts, snaps, ws := newRequests(b)
	n := len(snaps)
	took := make([]float64, n)
	exact := 0
	for i, s := range snaps {
		w := ws[i]
		start := time.Now()
		got := e.resumeToEnd(s, w, opts)
		took[i] = float64(time.Since(start)) / float64(time.Millisecond)
		same := true
		for j, high := range []bool{false, true} {
			full := s.simulate(opts, high, nil, nil, nil)
			for slot := range s.ws {
				x := &s.ws[slot]
				if g := got[j][x.w.ID]; x.live && x.fl < 0 && (g.ok != full[slot].ok || !g.at.Equal(full[slot].at)) {
					same = false
				}
			}
		}
		if same {
			exact++
		}
	}
	quick := 0
	for _, ms := range took {
		if ms <= 10 {
			quick++
		}
	}
	slices.Sort(took)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		e.resumeToEnd(snaps[i%n], ws[i%n], opts)
		i++
	}
	b.ReportMetric(took[n/2], "median-ms")
	b.ReportMetric(took[n-1], "max-ms")
	b.ReportMetric(float64(quick), "within-10ms-of-20")
	b.ReportMetric(float64(exact), "exact-of-20")
}

// resumeToEnd resumes both of the last computation's simulations from
// the checkpoint ForNew would take for w (pending in s, which is the
// last computed state but for it), with w added, until every pending
// workload started or the horizon, and returns each simulation's first
// starts of the workloads pending in s, by ID (those started by the
// checkpoint from the last computation).
func (e *Estimator) resumeToEnd(s *Snapshot, w Workload, opts EstimateOptions) [2]map[string]simStart {
	l := &e.last
	slot := s.byID[w.ID]
	var out [2]map[string]simStart
	run := func(i int, high bool) {
		t, ss := l.traj[i], l.low
		if high {
			ss = l.high
		}
		k := -2
		if lb, ok := s.notBefore(t.base, slot, ss); ok && lb.After(s.now) {
			k = t.checkpointBefore(lb, -2)
		}
		rule := t.base.endRuleFor(opts, high)
		c := t.at(k)
		at := c.now
		starts := make(map[string]simStart, len(c.ws))
		for id, bs := range t.base.byID {
			if x := &t.base.ws[bs]; x.live && x.fl < 0 && k >= 0 && ss[bs].ok && !ss[bs].at.After(at) {
				starts[id] = ss[bs]
			}
		}
		if _, err := c.add(w); err != nil {
			return
		}
		c.nLive++
		// The workloads pending in s still to start: not those running
		// at Now, which a preemption may send back to the queue.
		waiting := map[string]bool{}
		for id, sl := range s.byID {
			if _, seen := starts[id]; s.ws[sl].live && s.ws[sl].fl < 0 && !seen {
				waiting[id] = true
			}
		}
		emit := func(k EventKind, sl, _ int32) {
			if id := c.ws[sl].w.ID; k == EventAdmitted && waiting[id] {
				starts[id] = simStart{at: c.now, ok: true}
				delete(waiting, id)
			}
		}
		continueFrom(c, k, &rule, s.now.Add(horizon(opts)), emit, func() bool { return len(waiting) == 0 })
		out[i] = starts
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(1, true)
	}()
	run(0, false)
	<-done
	return out
}
