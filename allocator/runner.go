package allocator

import "time"

// Runner drives a snapshot through time for a long simulation: its
// Advance is the snapshot's Advance with the same end function every
// time, but it keeps the admitted workloads' ends between calls, so a
// call costs the events it processes rather than the number of admitted
// workloads. A trace replay calls Add, Schedule and Advance thousands of
// times; through a Runner each costs about what changes.
//
// Mutations made on the snapshot directly (Reserve, Evict, Extend, …)
// are noticed at the next call, which then rebuilds the ends from
// scratch: correct, only slower.
type Runner struct {
	s     *Snapshot
	endOf func(slot int32) (time.Time, bool)
	h     endHeap
	ver   uint64 // s.ver when h was last in step
	valid bool
}

// NewRunner returns a Runner for s. end gives the end of an admitted
// workload, as for Advance: called once per admission; nil means
// Admission.At + Duration, and Duration 0 never ends.
func NewRunner(s *Snapshot, end func(Workload) time.Time) *Runner {
	return &Runner{s: s, endOf: s.endFunc(end)}
}

// Snapshot returns the snapshot the runner drives.
func (r *Runner) Snapshot() *Snapshot { return r.s }

// sync rebuilds the ends if the snapshot changed behind the runner.
func (r *Runner) sync() {
	if !r.valid || r.ver != r.s.ver {
		r.h = r.s.endings(r.endOf)
		r.valid = true
	}
}

func (r *Runner) done() { r.ver = r.s.ver }

// Add is Snapshot.Add (without an undo function).
func (r *Runner) Add(w Workload) error {
	r.sync()
	if _, err := r.s.Add(w); err != nil {
		r.done()
		return err
	}
	if w.Admission != nil {
		r.s.pushEnd(&r.h, r.endOf, r.s.byID[w.ID])
	}
	r.done()
	return nil
}

// Release is Snapshot.Release (without an undo function).
func (r *Runner) Release(id string) error {
	r.sync()
	_, err := r.s.Release(id)
	r.done()
	return err
}

// Schedule is Snapshot.Schedule.
func (r *Runner) Schedule() []Event {
	r.sync()
	evs := r.s.Schedule()
	for _, e := range evs {
		// A workload admitted and then preempted in the same cycle is
		// pending again: it has no end.
		if slot := r.s.byID[e.ID]; e.Kind == EventAdmitted && r.s.ws[slot].fl >= 0 {
			r.s.pushEnd(&r.h, r.endOf, slot)
		}
	}
	r.done()
	return evs
}

// Advance is Snapshot.Advance(to, end) with the runner's end function.
func (r *Runner) Advance(to time.Time) []Event {
	s := r.s
	if to.Before(s.now) {
		return nil
	}
	r.sync()
	var out []Event
	emit := func(k EventKind, slot, by int32) { out = append(out, s.event(k, slot, by)) }
	s.runWith(&r.h, to, false, r.endOf, emit, nil, false)
	s.accrue(to)
	s.ver++
	r.done()
	return out
}
