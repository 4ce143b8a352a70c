package allocator

import (
	"math"
	"slices"
	"time"
)

// ForNew is the estimate of a workload just added (a new request): id is
// pending in s, and s without it is in the state of the Estimator's last
// full computation (or the state its simulations reached after their
// first step, as a rebuild takes it). ok is false when it is not (For
// then answers, by EstimateFor).
//
// s may also be that state a moment later: the same in all but its Now,
// which is before either simulation first changed anything after the
// computation's Now (an end, or a start after Now), and its usage, which
// must be the computation's accrued to s's Now for the GPUs running, as
// the simulations accrue it (accruedSince). Nothing the
// simulations foresaw has then happened, or should have: the answer is
// the estimate the last computation would have made with the workload
// there, at its Now, never earlier than s's Now. That is what the other
// workloads' estimates are, until the next computation; a computation at
// s's Now may differ from it by the rounding of ends, which is relative
// to Now (roundEnd).
//
// It does not simulate everyone from Now. Each of the last computation's
// two simulations kept checkpoints of its state (checkpoint.go); the
// workload is added to the state of the last checkpoint before it could
// start, and that simulation runs on until it starts. It could not start
// before the latest start, in the same simulation, of a workload ahead
// of it in its own queue (a higher priority, or the same and created
// before it) that is no harder to place: on every flavor it may use, as
// many pods or fewer, of no more GPUs, CPU and memory each, and no
// stricter a topology. While that one waited, nothing had room for it.
//
// What this leaves out is what the workload would have changed before
// that checkpoint without being admitted: the pending mix that
// fragmentation-aware placements read, and its turns as its queue's head
// in one-head cycles. On the benchmark cluster the result is the full
// computation's exactly for the requests tried (BenchmarkEstimatorForNew
// reports how many of its 20 and how far the others are;
// TestForNewOnTheBenchmarkMix has 40 of 40).
// The other workloads' estimates are not updated: the next Estimates
// computes them (a new request moves thousands of them).
func (e *Estimator) ForNew(s *Snapshot, id string, opts EstimateOptions) (est Estimate, ok bool) {
	slot, found := s.byID[id]
	if !found || s.ws[slot].fl >= 0 || !e.ok || e.last.traj[0] == nil {
		return Estimate{}, false
	}
	l := &e.last
	from := 0
	switch k := e.fingerprintWithout(s, opts, slot, s.now, s.usage); {
	case k == l.key:
		from = -2 // the start
	case l.nextOK && k == l.next:
		from = -1 // after the first step, where a rebuild stands
	case s.now.After(l.now) && s.now.Before(l.quietUntil(opts)) && accruedSince(l.traj[0].base, s) &&
		e.fingerprintWithout(s, opts, slot, l.now, l.traj[0].base.usage) == l.key:
		from = -2 // the start, a moment ago, and nothing happened since
	default:
		return Estimate{}, false
	}
	w := copyWorkload(s.ws[slot].w)
	end := s.now.Add(horizon(opts))
	var starts [2]simStart
	done := make(chan struct{})
	run := func(i int, high bool) {
		t := l.traj[i]
		ss := l.low
		if high {
			ss = l.high
		}
		lb, ok := s.notBefore(t.base, slot, ss)
		if !ok {
			return
		}
		k := from
		if lb.After(s.now) {
			k = t.checkpointBefore(lb, from)
		}
		rule := t.base.endRuleFor(opts, high)
		starts[i] = t.resume(k, w, &rule, end)
	}
	go func() {
		defer close(done)
		run(1, true)
	}()
	run(0, false)
	<-done
	ahead, higher := s.countsAhead(slot)
	return s.estimate(slot, starts[0], starts[1], end, ahead, higher, s.diagnoseSlot(slot), opts.Arrivals), true
}

// notBefore is the latest simulated start (starts, by base's slots) of
// the pending workloads of base ahead of s's slot in its queue and no
// harder to place (see ForNew), s.now if none; false if one of them
// never starts in the simulation.
func (s *Snapshot) notBefore(base *Snapshot, slot int32, starts []simStart) (time.Time, bool) {
	x := &s.ws[slot]
	mine := s.classes[x.cls].cands
	lb := s.now
	for i := range base.ws {
		y := &base.ws[i]
		if !y.live || y.fl >= 0 || y.q != x.q || !aheadInQueue(s, y, x) || !noHarder(y, x, base.classes[y.cls].cands, mine) {
			continue
		}
		if !starts[i].ok {
			return time.Time{}, false
		}
		if starts[i].at.After(lb) {
			lb = starts[i].at
		}
	}
	return lb, true
}

// aheadInQueue: y goes before x in their queue's order.
func aheadInQueue(s *Snapshot, y, x *wl) bool {
	if py, px := s.oprio(&y.w), s.oprio(&x.w); py != px {
		return py > px
	}
	if c := cmpCreated(y, x); c != 0 {
		return c < 0
	}
	return y.w.ID < x.w.ID
}

// noHarder: y (with candidates theirs) can be placed wherever x (with
// candidates mine) can: on each flavor x may use, y may too, with as many
// pods or fewer, each of no more GPUs, CPU and memory, in all no more CPU
// and memory, and no stricter a topology.
func noHarder(y, x *wl, theirs, mine []cand) bool {
	if strictness(y.w.Topology) > strictness(x.w.Topology) || y.w.CPU > x.w.CPU || y.w.Memory > x.w.Memory {
		return false
	}
	for _, m := range mine {
		if m.never {
			continue
		}
		i := slices.IndexFunc(theirs, func(t cand) bool { return t.f == m.f })
		if i < 0 {
			return false
		}
		t := theirs[i]
		if t.never || t.pods > m.pods || t.per > m.per ||
			y.w.CPU*int64(m.pods) > x.w.CPU*int64(t.pods) || y.w.Memory*int64(m.pods) > x.w.Memory*int64(t.pods) {
			return false
		}
	}
	return true
}

// strictness orders topology requirements from none to one host.
func strictness(l Level) int {
	switch l {
	case LevelHost:
		return 3
	case LevelRack:
		return 2
	case LevelBlock:
		return 1
	}
	return 0
}

// countsAhead is EstimateFor's counts for slot without sorting the
// pending order: how many pending workloads before it in Order() share a
// candidate flavor with it, and how many of those have a higher priority
// and arrived later.
func (s *Snapshot) countsAhead(slot int32) (ahead, higher int) {
	x := &s.ws[slot]
	mine := s.classes[x.cls].cands
	shares := s.shares()
	for ci := range s.classes {
		cl := &s.classes[ci]
		if len(cl.members) == 0 || !sharesFlavor(mine, cl.cands) {
			continue
		}
		for _, o := range cl.members {
			if o == slot || s.cmpOrder(shares, o, slot) >= 0 {
				continue
			}
			ahead++
			if y := &s.ws[o]; y.w.Priority > x.w.Priority && y.w.Created.After(x.w.Created) {
				higher++
			}
		}
	}
	return ahead, higher
}

// accruedSince reports whether every queue's usage in s is its usage in
// base accrued to s's Now for the GPUs it has admitted in base (DecayUsage,
// as Snapshot.accrue does), to a relative 1e-9: the source of s's usage
// may have accrued it in other steps, whose rounding differs.
func accruedSince(base, s *Snapshot) bool {
	if len(s.usage) != len(base.usage) {
		return false
	}
	dt := s.now.Sub(base.now)
	for q, u := range base.usage {
		want := DecayUsage(u, base.running[q], dt, base.c.Policy.HalfLife)
		if math.Abs(s.usage[q]-want) > 1e-9*max(1, math.Abs(want)) {
			return false
		}
	}
	return true
}

// quietUntil is when the last computation's simulations first changed
// their state after its Now: the first end of a running workload (in
// either simulation's end rule) or the first start after Now, whichever
// comes first.
func (l *lastRun) quietUntil(opts EstimateOptions) time.Time {
	base := l.traj[0].base
	var q time.Time
	early := func(t time.Time) {
		if q.IsZero() || t.Before(q) {
			q = t
		}
	}
	for _, high := range []bool{false, true} {
		rule := base.endRuleFor(opts, high)
		for i := range base.ws {
			if x := &base.ws[i]; x.live && x.fl >= 0 {
				if t, ok := rule.end(base, int32(i)); ok && t.After(l.now) {
					early(t)
				}
			}
		}
	}
	for _, ss := range [][]simStart{l.low, l.high} {
		for _, st := range ss {
			if st.ok && st.at.After(l.now) {
				early(st.at)
			}
		}
	}
	if q.IsZero() {
		return l.now.Add(horizon(opts))
	}
	return q
}
