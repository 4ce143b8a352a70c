package allocator

import (
	"math"
	"time"
)

// DecayUsage returns the decayed usage, in GPU-hours, after dt during
// which runningGPUs GPUs were in use, starting from usage: the exact
// integral usage·2^(−dt/H) + R·(H/ln 2)·(1 − 2^(−dt/H)) with H the half
// life in hours. A zero halfLife means no decay: usage + R·dt. A dt <= 0
// returns usage unchanged.
func DecayUsage(usage float64, runningGPUs int, dt, halfLife time.Duration) float64 {
	if dt <= 0 {
		return usage
	}
	r := float64(runningGPUs)
	if halfLife <= 0 {
		return usage + r*dt.Hours()
	}
	h := halfLife.Hours()
	keep := math.Exp2(-dt.Hours() / h)
	return usage*keep + r*(h/math.Ln2)*(1-keep)
}

// QueueStanding is one queue's fair-sharing standing.
type QueueStanding struct {
	Queue, Cohort string
	Weight        float64 // effective weight: a configured 0 counts as 1
	Usage         float64 // decayed GPU-hours
	Share         float64 // Usage/Weight (weight 0 counts as 1), what FairSharing orders by
	// Per flavor: admitted GPUs, nominal quota, and max(0, Used−Nominal).
	Used, Nominal, Borrowing map[string]int
	Pending                  int
	// Dominant is the queue's dominant resource share under Kueue's Fair
	// Sharing (see DominantShares); nil when Fair Sharing is off.
	Dominant *DominantShare
}

// Standing returns every queue's standing, in Cluster order. Like
// Capacity it only reads s.
func (s *Snapshot) Standing() []QueueStanding {
	out := make([]QueueStanding, len(s.ix.queues))
	dom := s.DominantShares()
	for q := range s.ix.queues {
		qi := &s.ix.queues[q]
		st := QueueStanding{
			Queue:     qi.name,
			Cohort:    s.c.Queues[q].Cohort,
			Weight:    qi.weight,
			Usage:     s.usage[q],
			Share:     s.usage[q] / qi.weight,
			Used:      map[string]int{},
			Nominal:   map[string]int{},
			Borrowing: map[string]int{},
			Pending:   s.nPending[q],
		}
		for _, f := range qi.flavors {
			name := s.ix.flavors[f].name
			st.Used[name] = s.used[q][f]
			st.Nominal[name] = qi.quota[f].nominal
			st.Borrowing[name] = max(0, s.used[q][f]-qi.quota[f].nominal)
		}
		if dom != nil {
			st.Dominant = &dom[q]
		}
		out[q] = st
	}
	return out
}

// ending is a scheduled end of one admission. It is stale once the slot
// no longer holds that admission (finished, evicted, re-admitted).
type ending struct {
	at   time.Time
	sec  int64 // at, for the heap's comparisons (the times of one run
	ns   int32 // share their clock, so wall order is at's order)
	slot int32
	adm  *Admission
	id   string
}

func newEnding(at time.Time, slot int32, a *Admission, id string) ending {
	return ending{at: at, sec: at.Unix(), ns: int32(at.Nanosecond()), slot: slot, adm: a, id: id}
}

type endHeap []ending

func (h endHeap) less(i, j int) bool { return endBefore(&h[i], &h[j]) }

// init, push and pop are container/heap's, typed (no boxing).
func (h endHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *endHeap) push(e ending) {
	*h = append(*h, e)
	hh := *h
	for i := len(hh) - 1; i > 0; {
		p := (i - 1) / 2
		if !hh.less(i, p) {
			break
		}
		hh[i], hh[p] = hh[p], hh[i]
		i = p
	}
}

// pop takes the first end. The last entry takes its place the
// bottom-up way (it mostly belongs near the bottom): the hole goes down
// along the lesser children to a leaf, one comparison a level, and the
// entry then rises from there. The order is total but for a stale and a
// current end of one workload at one instant (the same ID), of which
// only the current one does anything, so the ends come out in the same
// order as with container/heap's pop.
func (h *endHeap) pop() ending {
	hh := *h
	e := hh[0]
	n := len(hh) - 1
	x := hh[n]
	hh[n] = ending{}
	hh = hh[:n]
	*h = hh
	if n == 0 {
		return e
	}
	j := 0
	for {
		l := 2*j + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && hh.less(r, l) {
			m = r
		}
		hh[j] = hh[m]
		j = m
	}
	for j > 0 {
		p := (j - 1) / 2
		if !endBefore(&x, &hh[p]) {
			break
		}
		hh[j] = hh[p]
		j = p
	}
	hh[j] = x
	return e
}

// endBefore is less for entries a and b.
func endBefore(a, b *ending) bool {
	if a.sec != b.sec {
		return a.sec < b.sec
	}
	if a.ns != b.ns {
		return a.ns < b.ns
	}
	return a.id < b.id
}

func (h endHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (s *Snapshot) current(e ending) bool {
	x := &s.ws[e.slot]
	return x.live && x.w.Admission == e.adm
}

// run drives the snapshot through time: ends come from endOf (false: the
// admission never ends), clamped to Now. From the first step it finishes
// what ends at the current time, then schedules; it repeats at the next
// end time while that is not after `until` (or before it, when strict)
// and stop returns false. Usage accrues between steps.
func (s *Snapshot) run(until time.Time, strict bool, endOf func(slot int32) (time.Time, bool), emit sink, stop func() bool, scheduleFirst bool) {
	h := s.endings(endOf)
	s.runWith(&h, until, strict, endOf, emit, stop, scheduleFirst)
}

// endings returns the heap of the admitted workloads' ends.
func (s *Snapshot) endings(endOf func(slot int32) (time.Time, bool)) endHeap {
	admitted := s.workloadCount()
	for _, n := range s.nPending {
		admitted -= n
	}
	h := make(endHeap, 0, max(0, admitted)+len(s.ws)/4)
	for slot := range s.ws {
		x := &s.ws[slot]
		if !x.live || x.fl < 0 {
			continue
		}
		if t, ok := endOf(int32(slot)); ok {
			h = append(h, newEnding(maxTime(t, s.now), int32(slot), x.w.Admission, x.w.ID))
		}
	}
	h.init()
	return h
}

// pushEnd adds the end of the admitted workload in slot to h.
func (s *Snapshot) pushEnd(h *endHeap, endOf func(slot int32) (time.Time, bool), slot int32) {
	t, ok := endOf(slot)
	if !ok {
		return
	}
	x := &s.ws[slot]
	h.push(newEnding(maxTime(t, s.now), slot, x.w.Admission, x.w.ID))
}

// runWith is run on a heap of ends kept by the caller: stale entries
// (admissions that no longer hold) are skipped, and the ends of
// workloads admitted on the way are pushed.
func (s *Snapshot) runWith(h *endHeap, until time.Time, strict bool, endOf func(slot int32) (time.Time, bool), emit sink, stop func() bool, scheduleFirst bool) {
	wrapped := func(k EventKind, slot, by int32) {
		emit(k, slot, by)
		if k == EventAdmitted {
			s.pushEnd(h, endOf, slot)
		}
	}
	first := scheduleFirst
	for {
		for len(*h) > 0 && !s.current((*h)[0]) {
			h.pop()
		}
		if !first {
			if len(*h) == 0 {
				return
			}
			t := (*h)[0].at
			if t.After(until) || (strict && !t.Before(until)) {
				return
			}
			s.accrue(t)
		}
		first = false
		for len(*h) > 0 && !(*h)[0].at.After(s.now) {
			e := h.pop()
			if !s.current(e) {
				continue
			}
			emit(EventFinished, e.slot, -1)
			s.remove(e.slot)
		}
		s.schedule(wrapped)
		if stop != nil && stop() {
			return
		}
	}
}

// Advance moves time to `to`. It repeatedly takes the earliest end of an
// admitted workload that is <= to — end(w) for each admitted w (called
// once per admission, with the admitted workload; a zero time means never);
// nil end means w.Admission.At + w.Duration, and Duration 0 never ends —
// accrues usage up to it, finishes (releases) every workload ending then
// (EventFinished), and runs Schedule. Ends already in the past happen at
// Now. Finally it accrues usage up to `to` and sets Now = to. Events are
// in time order. If to is before Now, Advance does nothing.
func (s *Snapshot) Advance(to time.Time, end func(Workload) time.Time) []Event {
	if to.Before(s.now) {
		return nil
	}
	endOf := s.endFunc(end)
	var out []Event
	emit := func(k EventKind, slot, by int32) {
		e := s.event(k, slot, by)
		out = append(out, e)
	}
	s.run(to, false, endOf, emit, nil, false)
	s.accrue(to)
	s.ver++
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// endFunc returns when the workload in a slot ends: by end (a zero time
// for never), or when end is nil at Admission.At + Duration, where
// Duration 0 never ends.
func (s *Snapshot) endFunc(end func(Workload) time.Time) func(slot int32) (time.Time, bool) {
	return func(slot int32) (time.Time, bool) {
		x := &s.ws[slot]
		if end == nil {
			if x.w.Duration <= 0 {
				return time.Time{}, false
			}
			return x.w.Admission.At.Add(x.w.Duration), true
		}
		t := end(copyWorkload(x.w))
		return t, !t.IsZero()
	}
}
