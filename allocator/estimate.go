package allocator

import (
	"math"
	"time"
)

// Range is a workload's runtime as a fraction of its requested duration.
type Range struct{ Low, High float64 }

// DefaultRange is the runtime range of a queue missing from
// EstimateOptions.Factors: jobs run half to all of what they ask for.
var DefaultRange = Range{Low: 0.5, High: 1.0}

// DefaultHorizon is how far ahead estimates simulate by default.
const DefaultHorizon = 30 * 24 * time.Hour

// EstimateOptions tunes Estimates and EstimateFor.
type EstimateOptions struct {
	// Factors per queue; a missing queue gets DefaultRange. Negative or
	// NaN bounds count as DefaultRange's, bounds above 1000 as 1000;
	// Low > High are swapped.
	Factors map[string]Range
	// Workloads gives ranges per workload ID (learned per team and
	// template, see RuntimeModel), cleaned as Factors; they take
	// precedence over the queue's.
	Workloads map[string]Range
	// Arrivals is the load of work yet to arrive (LearnArrivals). While
	// a workload waits, arriving work that goes before it delays it: by
	// order, work of a higher priority (not under FirstComeFirstServed)
	// and, in FairSharing mode, of its priority from a queue whose share
	// is lower than its queue's now; and, backfilling the gaps it cannot
	// use, work asking for fewer GPUs (ArrivalRate.Size), whatever its
	// priority. Work asking for one of the workload's flavors counts
	// over their GPUs, work asking for none in particular as its share
	// of the cluster's GPUs, work asking for another flavor not at all.
	// With ρ that load over the GPUs, capped at MaxArrivalShare, and B
	// the longest it has been arriving (ArrivalRate.Over: since its
	// current burst began), the wait W
	// (Latest − Now) becomes W + min(ρ/(1−ρ)·W, min(ρ, 1)·B): the wait
	// of a queue that keeps getting work going first at that rate (1−ρ
	// of the GPUs left to it), but for no longer than that work has been
	// arriving. If the work going first by order alone asks for more
	// than the GPUs (its ρ ≥ 1, uncapped), it is a burst that holds the
	// workload back until it is over: taken to last as long again as it
	// has so far, the wait becomes W + B. Nil means none arrives.
	Arrivals []ArrivalRate
	// Horizon stops the simulation at Now+Horizon; 0 means DefaultHorizon.
	Horizon time.Duration
	// Step is the simulations' finest resolution: every simulated end is
	// rounded onto a grid after Now whose spacing is Step for the next
	// 32 Steps and about 1/32 of how far ahead beyond (roundEnd), so
	// that ends close together are taken in one cycle: down in the low
	// simulation, up in the high one. 0 means
	// DefaultStep; negative means none (every end at its own time).
	Step time.Duration
}

// DefaultStep is the estimates' default finest resolution: a second
// (ends further ahead are rounded more coarsely, see roundEnd).
const DefaultStep = time.Second

// relResolution is the estimates' resolution relative to how far ahead
// an end is: an end Δ after Now is rounded to 1/relResolution of Δ at
// most (see roundEnd).
const relResolution = 32

// roundEnd rounds an end t up onto the simulation's grid: with Δ = t −
// now, up to a multiple of u, the largest of step × 1, 2, 5, 10, 15, 30,
// 60, 120, 300, 600, 900, 1800, 3600, 7200, … (doubling from there) that
// is at most max(step, Δ/relResolution). So ends within the next
// relResolution steps keep the step's resolution, further ones are off by
// less than 1/relResolution of how far ahead they are, and round figures
// stay round (with a one-second step: seconds, then 5s, 10s, …, 5m, 10m,
// 15m, 30m, 1h; 3h30m stays 3h30m). Ends at or before now, and step 0,
// are left alone.
func roundEnd(now, t time.Time, step time.Duration) time.Time {
	d := t.Sub(now)
	if step <= 0 || d <= 0 {
		return t
	}
	u := gridUnit(d, step)
	return now.Add((d + u - 1) / u * u)
}

// roundEndDown is roundEnd rounding down instead, onto the same grid,
// but never onto now itself: an end within the first step goes up to it.
// The low simulation rounds down, so that its starts, the ranges' early
// ends, are not made later by the grid (the high one rounds up).
func roundEndDown(now, t time.Time, step time.Duration) time.Time {
	d := t.Sub(now)
	if step <= 0 || d <= 0 {
		return t
	}
	u := gridUnit(d, step)
	return now.Add(max(d/u, 1) * u)
}

// gridUnit is the spacing of roundEnd's grid Δ after now.
func gridUnit(d, step time.Duration) time.Duration {
	u := step
	for i := 0; ; i++ {
		next := 2 * u
		if i < len(niceSteps) {
			next = niceSteps[i] * step
		}
		if next > d/relResolution {
			return u
		}
		u = next
	}
}

// niceSteps are the multiples of the step that roundEnd uses before
// doubling.
var niceSteps = []time.Duration{2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600}

func step(opts EstimateOptions) time.Duration {
	switch {
	case opts.Step < 0:
		return 0
	case opts.Step == 0:
		return DefaultStep
	}
	return opts.Step
}

// Estimate is when a pending workload is expected to be admitted.
type Estimate struct {
	ID string
	// Known is false if the workload is not admitted within the horizon in
	// either run (or can never fit, or is not pending).
	Known bool
	// Earliest and Latest bound the admission time: both >= Now, Earliest
	// <= Latest, zero if !Known. A run that does not admit it within the
	// horizon counts as Now+Horizon.
	Earliest, Latest time.Time
	Position         int // 1 + Ahead
	// Ahead counts the pending workloads before it in Order() that compete
	// with it (share a candidate flavor).
	Ahead int
	// AheadHigherPriority counts those of higher priority that arrived
	// (Created) later: they jumped the queue.
	AheadHigherPriority int
	// Reason is Diagnose(ID), but ReasonPriority when
	// AheadHigherPriority > 0.
	Reason Reason
}

// Estimates estimates every pending workload of s, without changing s.
// It runs two discrete-event simulations on clones of s, one with every
// queue's Low factor and one with its High factor: admitted workloads end
// at Admission.At + factor·Duration (ends in the past happen at Now;
// Duration 0 never ends within the horizon); at every end, Schedule runs
// (automatic preemption included), and workloads it admits end after
// factor·Duration in turn. A workload's start is its first admission in a
// run; Earliest and Latest are the earlier and later of the two.
func Estimates(s *Snapshot, opts EstimateOptions) map[string]Estimate {
	if s.pendingCount() == 0 {
		return map[string]Estimate{}
	}
	var p estimatePrep
	low, high := s.simulateBoth(opts, nil, nil, &p)
	return s.estimatesFrom(opts, &p, low, high)
}

// estimatePrep is what the estimates take from s besides the two
// simulations' starts: the pending order, the counts ahead and each
// workload's reason. simulateBoth fills it while the high simulation,
// the longer one, still runs.
type estimatePrep struct {
	order         []int32
	sets          flavorSets // of order
	ahead, higher []int
	reasons       []Reason            // per workload of order
	out           map[string]Estimate // empty, sized for order (or nil)
	// With wantList, estimatesFrom also fills list, the estimates in
	// the order of order (for the Estimator).
	wantList bool
	list     []Estimate
}

// prepare fills p for s's pending workloads.
func (s *Snapshot) prepare(p *estimatePrep) {
	p.order = s.pendingInOrder()
	s.prepareCounts(p)
	p.out = make(map[string]Estimate, len(p.order))
}

// prepareCounts fills p's counts and reasons for p.order.
func (s *Snapshot) prepareCounts(p *estimatePrep) {
	p.sets = s.flavorSetsOf(p.order)
	p.ahead, p.higher = s.aheadCounts(p.order, &p.sets)
	p.reasons = s.reasonsOf(p.order)
}

// reasonsOf returns the reason of each pending workload of order,
// diagnosed once per class.
func (s *Snapshot) reasonsOf(order []int32) []Reason {
	reasons := make([]Reason, len(order))
	byClass := make([]Reason, len(s.classes))
	done := make([]bool, len(s.classes))
	for i, slot := range order {
		cls := s.ws[slot].cls
		if !done[cls] {
			byClass[cls], done[cls] = s.diagnoseSlot(slot), true
		}
		reasons[i] = byClass[cls]
	}
	return reasons
}

// pendingCount is the number of pending workloads.
func (s *Snapshot) pendingCount() int {
	n := 0
	for _, k := range s.nPending {
		n += k
	}
	return n
}

// estimatesFrom turns the two simulations' starts of the pending
// workloads of p's order, by slot, into their estimates.
func (s *Snapshot) estimatesFrom(opts EstimateOptions, p *estimatePrep, low, high []simStart) map[string]Estimate {
	out := p.out
	if out == nil {
		out = make(map[string]Estimate, len(p.order))
	}
	if p.wantList {
		p.list = make([]Estimate, len(p.order))
	}
	end := s.now.Add(horizon(opts))
	for i, slot := range p.order {
		e := s.estimate(slot, low[slot], high[slot], end, p.ahead[i], p.higher[i], p.reasons[i], opts.Arrivals)
		out[e.ID] = e
		if p.list != nil {
			p.list[i] = e
		}
	}
	return out
}

// EstimateFor estimates one pending workload; each run stops as soon as
// it is admitted. s is not changed. A workload that is not pending gets
// an Estimate with only its ID set.
func EstimateFor(s *Snapshot, id string, opts EstimateOptions) Estimate {
	slot, ok := s.byID[id]
	if !ok || s.ws[slot].fl >= 0 {
		return Estimate{ID: id}
	}
	low, high := s.simulateBoth(opts, []int32{slot}, nil, nil)
	order := s.pendingInOrder()
	x := &s.ws[slot]
	mine := s.classes[x.cls].cands
	ahead, higher := 0, 0
	for _, o := range order {
		if o == slot {
			break
		}
		y := &s.ws[o]
		if !sharesFlavor(mine, s.classes[y.cls].cands) {
			continue
		}
		ahead++
		if y.w.Priority > x.w.Priority && y.w.Created.After(x.w.Created) {
			higher++
		}
	}
	return s.estimate(slot, low[0], high[0], s.now.Add(horizon(opts)), ahead, higher, s.diagnoseSlot(slot), opts.Arrivals)
}

func (s *Snapshot) estimate(slot int32, low, high simStart, end time.Time, ahead, higher int, r Reason, arrivals []ArrivalRate) Estimate {
	e := Estimate{ID: s.ws[slot].w.ID}
	e.setCounts(ahead, higher, r)
	if !low.ok && !high.ok {
		return e
	}
	a, b := end, end
	if low.ok {
		a = low.at
	}
	if high.ok {
		b = high.at
	}
	if b.Before(a) {
		a, b = b, a
	}
	e.Known = true
	e.Earliest, e.Latest = maxTime(a, s.now), maxTime(b, s.now)
	if w := e.Latest.Sub(s.now); w > 0 {
		e.Latest = s.now.Add(w + arrivalDelay(w, s.arrivalLoad(slot, arrivals)))
	}
	return e
}

// setCounts sets e's position from the counts ahead of it, and its
// reason: r, but ReasonPriority when higher > 0.
func (e *Estimate) setCounts(ahead, higher int, r Reason) {
	e.Position, e.Ahead, e.AheadHigherPriority, e.Reason = 1+ahead, ahead, higher, r
	if higher > 0 {
		e.Reason = ReasonPriority
	}
}

func horizon(opts EstimateOptions) time.Duration {
	if opts.Horizon > 0 {
		return opts.Horizon
	}
	return DefaultHorizon
}

func (r Range) clean() Range {
	if !(r.Low >= 0) || math.IsInf(r.Low, 0) {
		r.Low = DefaultRange.Low
	}
	if !(r.High >= 0) || math.IsInf(r.High, 0) {
		r.High = DefaultRange.High
	}
	r.Low, r.High = min(r.Low, 1000), min(r.High, 1000)
	if r.Low > r.High {
		r.Low, r.High = r.High, r.Low
	}
	return r
}

// simulateBoth runs the low and the high simulation, concurrently: each
// works on its own clone and s is only read. With rec set, each
// simulation also records what the Estimator needs to reuse its
// trajectory (rec[0] the low one's, rec[1] the high one's). Targets nil
// means every pending workload, and the starts are then by slot. With
// prep set, the low simulation's goroutine fills it once its simulation
// is over and the high one has cloned s (prepare writes s's caches),
// while the high one, the longer, runs.
func (s *Snapshot) simulateBoth(opts EstimateOptions, targets []int32, rec *[2]simRecord, prep *estimatePrep) (low, high []simStart) {
	var rl, rh *simRecord
	if rec != nil {
		rl, rh = &rec[0], &rec[1]
	}
	done, cloned := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		high = s.simulate(opts, true, targets, rh, cloned)
	}()
	low = s.simulate(opts, false, targets, rl, nil)
	<-cloned
	if prep != nil {
		s.prepare(prep)
	}
	<-done
	return low, high
}

type simStart struct {
	at time.Time
	ok bool
}

// simRecord is what a simulation records for the Estimator beyond its
// targets' starts: the fingerprint (by fp) of its state after the first
// step (the ends at Now, then the admission cycles at Now), and whether
// that step preempted (its state is then not reused: see Estimator).
type simRecord struct {
	fp        func(*Snapshot) uint64
	after     uint64
	preempted bool
	// traj, when set, gets the simulation's checkpoints (checkpoint.go).
	traj *trajectory
}

// endRule is when an estimate simulation ends an admitted workload: its
// requested Duration times its factor (its own from opts.Workloads, else
// its queue's), rounded as roundEnd does from the estimate's Now (as
// roundEndDown in the low simulation).
type endRule struct {
	now    time.Time
	step   time.Duration
	up     bool               // the high simulation: ends rounded up
	factor []float64          // per queue
	own    map[string]float64 // per workload, from opts.Workloads
}

func (s *Snapshot) endRuleFor(opts EstimateOptions, high bool) endRule {
	r := endRule{now: s.now, step: step(opts), up: high, factor: make([]float64, len(s.ix.queues))}
	for q, qi := range s.ix.queues {
		f, ok := opts.Factors[qi.name]
		if !ok {
			f = DefaultRange
		}
		f = f.clean()
		r.factor[q] = f.Low
		if high {
			r.factor[q] = f.High
		}
	}
	if len(opts.Workloads) > 0 {
		r.own = make(map[string]float64, len(opts.Workloads))
		for id, f := range opts.Workloads {
			f = f.clean()
			r.own[id] = f.Low
			if high {
				r.own[id] = f.High
			}
		}
	}
	return r
}

// end is the end of the admitted workload in c's slot, false if never.
func (r *endRule) end(c *Snapshot, slot int32) (time.Time, bool) {
	x := &c.ws[slot]
	f, ok := r.own[x.w.ID]
	if !ok {
		f = r.factor[x.q]
	}
	d := float64(x.w.Duration) * f
	if x.w.Duration <= 0 || d > float64(100*365*24*time.Hour) {
		return time.Time{}, false
	}
	t := x.w.Admission.At.Add(time.Duration(d))
	if !r.up {
		return roundEndDown(r.now, t, r.step), true
	}
	return roundEnd(r.now, t, r.step), true
}

// simulate runs one estimate simulation on a clone of s and returns each
// target's first admission time (targets nil: every pending workload's,
// by slot). It closes cloned, if set, once it no longer reads s's state.
func (s *Snapshot) simulate(opts EstimateOptions, high bool, targets []int32, rec *simRecord, cloned chan<- struct{}) []simStart {
	c := s.cloneLean()
	if cloned != nil {
		close(cloned)
	}
	rule := s.endRuleFor(opts, high)
	endOf := func(slot int32) (time.Time, bool) { return rule.end(c, slot) }
	idx := make([]int32, len(c.ws))
	for i := range idx {
		idx[i] = -1
	}
	for i, t := range targets {
		idx[t] = int32(i)
	}
	remaining := len(targets)
	if targets == nil { // every pending workload: the classes' members (as pendingInOrder)
		for _, cl := range c.classes {
			for _, slot := range cl.members {
				idx[slot] = slot
			}
			remaining += len(cl.members)
		}
	}
	starts := make([]simStart, len(targets))
	if targets == nil {
		starts = make([]simStart, len(c.ws))
	}
	firstStep := true
	emit := func(k EventKind, slot, _ int32) {
		if k == EventPreempted && firstStep && rec != nil {
			rec.preempted = true
		}
		if k != EventAdmitted {
			return
		}
		if i := idx[slot]; i >= 0 {
			starts[i] = simStart{at: c.now, ok: true}
			idx[slot] = -1 // started: later admissions are not firsts
			remaining--
		}
	}
	var traj *trajectory
	if rec != nil && rec.traj != nil {
		traj = rec.traj
		c.journal = newJournal(len(c.ws))
	}
	stop := func() bool {
		if rec != nil && firstStep {
			rec.after = rec.fp(c)
		}
		firstStep = false
		if traj != nil {
			traj.record(c)
		}
		return remaining == 0
	}
	c.run(s.now.Add(horizon(opts)), true, endOf, emit, stop, true)
	return starts
}
