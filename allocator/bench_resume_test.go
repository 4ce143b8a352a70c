package allocator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkEstimatorResumeAfterNewRequest times the obvious way to
// update everyone's estimates after a new request from checkpoints, and
// why the Estimator does not take it: resume both simulations from the
// checkpoint ForNew would use, with the request added, and run them on
// until every pending workload has started (everyone who started before
// that checkpoint would keep the last computation's start). The state
// and the 20 random requests are BenchmarkEstimatorForNew's; an op is
// one request, in turn. It reports the median and the slowest request
// (ms) and how many of the 20 took at most 10 ms, each request timed
// once before the loop. A request that waits behind most of the queue
// resumes late and is quick; one of a higher priority resumes near Now
// and costs about a full computation (BENCHMARKS.md). Besides, what the
// request changes before the checkpoint without being admitted (the
// pending mix that placements read, its turns as a queue's head) is left
// out, for everyone after it.
func BenchmarkEstimatorResumeAfterNewRequest(b *testing.B) {
	_, after, opts, _ := benchAdmission(b)
	e := NewEstimator()
	e.KeepCheckpoints = true
	e.Estimates(after, opts)
	const n = 20
	r := rand.New(rand.NewPCG(7, 9))
	snaps, ws := make([]*Snapshot, n), make([]Workload, n)
	took := make([]float64, n)
	for i := range snaps {
		w := benchWorkloads(r, 1, after.Now())[0]
		w.ID, w.Created = fmt.Sprintf("zz-new-%02d", i), after.Now()
		s, err := NewSnapshot(after.Cluster(), after.Now(), append(after.Workloads(), w), after.Usage())
		if err != nil {
			b.Fatal(err)
		}
		snaps[i], ws[i] = s, w
		start := time.Now()
		if started := e.resumeToEnd(s, w, opts); started == 0 {
			b.Fatalf("%s: nothing started", w.ID)
		}
		took[i] = float64(time.Since(start)) / float64(time.Millisecond)
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
}

// resumeToEnd resumes both of the last computation's simulations from
// the checkpoint ForNew would take for w (pending in s, which is the
// last computed state but for it), with w added, until every pending
// workload started or the horizon; it returns how many started in the
// two together.
func (e *Estimator) resumeToEnd(s *Snapshot, w Workload, opts EstimateOptions) int {
	l := &e.last
	slot := s.byID[w.ID]
	var started [2]int
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
		if _, err := c.add(w); err != nil {
			return
		}
		c.nLive++
		remaining := 0
		for _, n := range c.nPending {
			remaining += n
		}
		seen := make([]bool, len(c.ws))
		endOf := func(slot int32) (time.Time, bool) { return rule.end(c, slot) }
		emit := func(k EventKind, sl, _ int32) {
			if k == EventAdmitted && !seen[sl] {
				seen[sl] = true
				started[i]++
				remaining--
			}
		}
		c.run(s.now.Add(horizon(opts)), true, endOf, emit, func() bool { return remaining <= 0 }, true)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(1, true)
	}()
	run(0, false)
	<-done
	return started[0] + started[1]
}
