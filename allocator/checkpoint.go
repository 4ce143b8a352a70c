package allocator

import (
	"maps"
	"slices"
	"time"
)

// Checkpoints: an Estimator's full computation keeps, for each of its
// two simulations, the state it started from and its state every few
// steps, so that a workload added afterwards (a new request) gets its
// own estimate by resuming the simulations from the last checkpoint
// before it could start, with it added, instead of simulating everyone
// from Now (see Estimator.ForNew).
//
// A checkpoint is cheap: the simulation's state but its workload slots
// (cloneState, about a twentieth of a clone on the benchmark cluster),
// plus the slots the simulation changed since the previous checkpoint
// (the journal: admit, unadmit and remove touch a slot; a simulation
// changes slots in no other way). The slots at checkpoint k are the
// start's with the deltas of checkpoints 0..k applied in order.

// checkpointEvery is how many steps (instants at which the simulation
// ends workloads and runs admission cycles) a trajectory starts with
// between checkpoints; maxCheckpoints is how many it keeps before it
// thins them to every other one, doubling the spacing (a variable for
// the tests).
const checkpointEvery = 4

var maxCheckpoints = 64

// journal lists the slots changed since the last checkpoint.
type journal struct {
	mark    []bool
	touched []int32
}

func newJournal(slots int) *journal { return &journal{mark: make([]bool, slots)} }

// touch records that slot is about to change (no-op without a journal).
func (s *Snapshot) touch(slot int32) {
	if j := s.journal; j != nil && !j.mark[slot] {
		j.mark[slot] = true
		j.touched = append(j.touched, slot)
	}
}

// slotDelta is what a simulation changes of a slot: whether it holds a
// workload (remove empties it) and its admission.
type slotDelta struct {
	slot      int32
	live      bool
	fl, per   int32
	atNs      int32
	atSec     int64
	nodes     []int32
	admission *Admission
}

func deltaOf(slot int32, x *wl) slotDelta {
	return slotDelta{slot: slot, live: x.live, fl: x.fl, per: x.per, atNs: x.atNs, atSec: x.atSec, nodes: x.nodes, admission: x.w.Admission}
}

func (d *slotDelta) apply(ws []wl) {
	x := &ws[d.slot]
	if !d.live {
		*x = wl{}
		return
	}
	x.fl, x.per, x.atNs, x.atSec, x.nodes, x.w.Admission = d.fl, d.per, d.atNs, d.atSec, d.nodes, d.admission
}

// checkpoint is a simulation's state after one of its steps, without its
// slots, and the slots changed since the previous checkpoint.
type checkpoint struct {
	state  *Snapshot // ws nil
	deltas []slotDelta
	step   int // the steps the simulation had made
}

// trajectory is what one estimate simulation keeps for resuming: the
// state it started from (base, shared by both simulations, never
// changed), its first step's state (first: Now, after the ends at Now
// and the cycles at Now) and its checkpoints after that.
type trajectory struct {
	base  *Snapshot
	first checkpoint
	cks   []checkpoint
	every int
	steps int
}

func newTrajectory(base *Snapshot) *trajectory {
	return &trajectory{base: base, every: checkpointEvery}
}

// record is called after each step of the simulation on c, which keeps
// a journal.
func (t *trajectory) record(c *Snapshot) {
	t.steps++
	if t.steps > 1 && (t.steps-1)%t.every != 0 {
		return
	}
	j := c.journal
	ck := checkpoint{state: c.cloneState(nil), deltas: make([]slotDelta, len(j.touched)), step: t.steps}
	ck.state.lean, ck.state.nLive = true, c.nLive
	for i, slot := range j.touched {
		ck.deltas[i] = deltaOf(slot, &c.ws[slot])
		j.mark[slot] = false
	}
	j.touched = j.touched[:0]
	if t.steps == 1 {
		t.first = ck
		return
	}
	t.cks = append(t.cks, ck)
	if len(t.cks) == maxCheckpoints {
		t.thin()
	}
}

// thin keeps every other checkpoint, each with the deltas of the one
// dropped before it, and doubles the spacing.
func (t *trajectory) thin() {
	out := t.cks[:0]
	for i := 1; i < len(t.cks); i += 2 {
		out = append(out, checkpoint{state: t.cks[i].state, deltas: slices.Concat(t.cks[i-1].deltas, t.cks[i].deltas), step: t.cks[i].step})
	}
	clear(t.cks[len(out):])
	t.cks = out
	t.every *= 2
}

// at returns a lean copy of the simulation's state at checkpoint k of
// cks (-1: after the first step, -2: the start), with its own ID map,
// so that a workload can be added to it.
func (t *trajectory) at(k int) *Snapshot {
	byID := maps.Clone(t.base.byID)
	if k == -2 {
		out := t.base.clone(byID)
		out.lean, out.nLive = true, t.base.nLive
		return out
	}
	st := &t.first
	if k >= 0 {
		st = &t.cks[k]
	}
	out := st.state.cloneState(byID)
	out.lean, out.nLive = true, st.state.nLive
	out.ws = slices.Clone(t.base.ws)
	apply := func(ck *checkpoint) {
		for i := range ck.deltas {
			ck.deltas[i].apply(out.ws)
		}
	}
	apply(&t.first)
	for i := 0; i <= k; i++ {
		apply(&t.cks[i])
	}
	return out
}

// resume runs the simulation on from checkpoint k (as at) with w added,
// pending, until w is admitted or the simulation reaches until, and
// returns w's first admission.
func (t *trajectory) resume(k int, w Workload, rule *endRule, until time.Time) simStart {
	c := t.at(k)
	slot, err := c.add(w)
	if err != nil {
		return simStart{}
	}
	c.nLive++
	var st simStart
	emit := func(k EventKind, sl, _ int32) {
		if k == EventAdmitted && sl == slot && !st.ok {
			st = simStart{at: c.now, ok: true}
		}
	}
	continueFrom(c, k, rule, until, emit, func() bool { return st.ok })
	return st
}

// continueFrom runs the simulation on from c, the state at checkpoint k
// (as at restored it, with or without additions), as the simulation that
// recorded it went on. A checkpoint after the first step is taken after
// that step's admission cycles at its instant, so the run goes on from
// the next end: a Schedule run again at the same instant would not be
// the simulation's (it acts at once on what that step's preemptions
// freed, and preempts again, which the simulation does only at its next
// end: on the benchmark state up to 46 admissions and 35 preemptions at
// one checkpoint), and everyone's starts after it would move. The start
// (-2) is before its first step, and the state after the first step (-1)
// is taken as a rebuild takes it: a computation on that state runs
// cycles at its Now first.
func continueFrom(c *Snapshot, k int, rule *endRule, until time.Time, emit sink, stop func() bool) {
	endOf := func(slot int32) (time.Time, bool) { return rule.end(c, slot) }
	c.run(until, true, endOf, emit, stop, k < 0)
}

// checkpointBefore is the latest checkpoint of cks strictly before at,
// else from (-1 or -2, as at takes them).
func (t *trajectory) checkpointBefore(at time.Time, from int) int {
	k := from
	for i := range t.cks {
		if t.cks[i].state.now.Before(at) {
			k = i
		}
	}
	return k
}
