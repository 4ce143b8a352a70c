package commands_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// victim is what preemption leaves of a request.
type victim struct {
	State       records.State
	Preemptions int
	AdmittedAt  time.Time
	QueuedAt    time.Time
	EndReason   string
	Estimated   bool
}

func victimOf(r records.Request) victim {
	return victim{State: r.State, Preemptions: r.Preemptions, AdmittedAt: r.AdmittedAt, QueuedAt: r.QueuedAt, EndReason: r.EndReason, Estimated: r.Estimate != nil && r.Estimate.Known}
}

// TestAutomaticPreemption: a request that the team's policy lets preempt
// starts at once; the victims' records are requeued, their usage so far
// recorded, and their owners told in their threads and directly.
func TestAutomaticPreemption(t *testing.T) {
	tests := map[string]struct {
		cfg     string
		seeded  bool
		setup   [][2]string
		ran     time.Duration // before the preemptor arrives
		user    string
		cmd     string
		id      string
		victims map[string]records.UsageRecord // by ID: the usage recorded
		dests   []string
		says    []want
	}{
		"within the team": {
			cfg:   small,
			setup: [][2]string{{"bob", "request 16xh100 for 4h priority low"}},
			ran:   30 * time.Minute,
			user:  "alice", cmd: "request 8xh100 for 1h", id: "r2",
			victims: map[string]records.UsageRecord{"r1": {Request: "r1", Team: "nlp", Requester: "bob", Flavor: "h100", GPUs: 16, Start: t0, End: t0.Add(30 * time.Minute)}},
			dests: []string{
				"channel #nlp r2", "thread r2",
				"person bob", "thread r1", "card r1",
				"sender",
				"thread r1", "card r1",
			},
			says: []want{
				{"thread r2", "Started at once by preempting r1 (bob, 16 GPUs, low): nlp's policy lets higher-priority work preempt its own lower-priority work."},
				{"person bob", "Your request r1 was preempted by r2 (alice, normal) and is queued again."},
				{"thread r1", "Preempted by r2 (alice, normal) and requeued after running 30m. A new estimate follows."},
				{"thread r1", "New estimate: starts in 30m–1h (09:00–09:30), next in line."},
				{"sender", "r2 running on h100-b1-r1-n1. Started at once by preempting r1"},
			},
		},
		"reclaim within the cohort": {
			cfg:   pooled,
			setup: [][2]string{{"erin", "request 24xh100 for 4h"}},
			ran:   time.Hour,
			user:  "alice", cmd: "request 16xh100 for 2h", id: "r2",
			victims: map[string]records.UsageRecord{"r1": {Request: "r1", Team: "vision", Requester: "erin", Flavor: "h100", GPUs: 24, Start: t0, End: t0.Add(time.Hour)}},
			dests: []string{
				"channel #nlp r2", "thread r2",
				"person erin", "thread r1", "card r1",
				"sender",
				"thread r1", "card r1",
			},
			says: []want{
				{"thread r2", "Started at once by preempting r1 (erin, 24 GPUs, normal): nlp reclaims its quota from vision, which was borrowing it."},
				{"thread r1", "Preempted by r2 (alice, normal) and requeued after running 1h."},
				{"card r1", "r1 queued: starts in 1h–2h (10:00–11:00), next in line"},
			},
		},
		"the example's borrowed dev box": {
			cfg:    "",
			seeded: true,
			user:   "dave", cmd: "request 8xh100 for 4h", id: "r10",
			victims: map[string]records.UsageRecord{"r5": {Request: "r5", Team: "nlp", Requester: "alice", Flavor: "h100", GPUs: 4, Start: t0.Add(-time.Hour), End: t0}},
			dests: []string{
				"channel #gpu-vision r10", "thread r10",
				"person alice", "thread r5", "card r5",
				"sender",
				"thread r5", "card r5",
			},
			says: []want{
				{"channel #gpu-vision r10", "r10 running on h100-b2-r2-n2"},
				{"thread r10", "Started at once by preempting r5 (alice, 4 GPUs, low): vision reclaims its quota from nlp, which was borrowing it."},
				{"person alice", "Your request r5 was preempted by r10 (dave, normal) and is queued again."},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var e *env
			if tc.cfg == "" {
				e = newEnv(t, exampleConfig(t), seeded)
			} else {
				e = newEnv(t, parse(t, tc.cfg))
			}
			for _, c := range tc.setup {
				e.do(c[0], c[1])
			}
			e.advance(tc.ran)
			now := e.clock.Now()
			outs := e.do(tc.user, tc.cmd)
			if r := e.req(tc.id); r.State != records.StateRunning || !r.AdmittedAt.Equal(now) {
				t.Errorf("%s is %s since %s; want running since now", tc.id, r.State, r.AdmittedAt)
			}
			diff(t, "destinations", tc.dests, dests(outs))
			check(t, outs, tc.says...)
			usage := e.usage()
			for id, u := range tc.victims {
				want := victim{State: records.StateQueued, Preemptions: 1, QueuedAt: now, Estimated: true}
				diff(t, "victim "+id, want, victimOf(e.req(id)))
				var got []records.UsageRecord
				for _, x := range usage {
					if x.Request == id {
						got = append(got, x)
					}
				}
				diff(t, "usage of "+id, []records.UsageRecord{u}, got)
				diff(t, "audit of the victim's preemption", "gpubot preempted "+id+" ok", e.audit(id)[len(e.audit(id))-1])
			}
		})
	}
}

// TestManualPreemption: a request that can start only by preemption
// offers an admin the button, naming the victims; pressing it requeues
// them and starts the request.
func TestManualPreemption(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("erin", "request 16xh100 for 4h priority low")
	outs := e.do("dave", "request 8xh100 for 1h")
	if r := e.req("r2"); r.State != records.StateQueued {
		t.Fatalf("r2 is %s; vision never preempts on its own, so it should wait", r.State)
	}
	card := said(outs, "channel #vision r2")
	if len(card) != 1 {
		t.Fatalf("no card for r2:\n%s", show(outs))
	}
	diff(t, "r2's buttons", []string{"Preempt r1: preempt r2", "Cancel: cancel r2"}, buttons(card[0]))
	check(t, outs, want{"channel #vision r2", "It can start now only by preempting r1 (erin, 16 GPUs, low); an admin can do that."})

	e.advance(20 * time.Minute)
	outs = e.press("carol", commands.VerbPreempt, "r2", "")
	diff(t, "destinations", []string{
		"thread r2",
		"person erin", "thread r1", "card r1",
		"thread r2", "card r2",
		"sender",
		"thread r1", "card r1",
	}, dests(outs))
	check(t, outs,
		want{"thread r2", "carol preempted r1 to start this now."},
		want{"person erin", "Your request r1 was preempted by r2 (dave, normal) and is queued again."},
		want{"thread r1", "Preempted by r2 (dave, normal) and requeued after running 20m."},
		want{"thread r2", "Admitted after 20m on h100-b1-r1-n1; ends 09:20 unless extended."},
		want{"sender", "Preempted r1; r2 is starting."},
	)
	now := t0.Add(20 * time.Minute)
	diff(t, "r1", victim{State: records.StateQueued, Preemptions: 1, QueuedAt: now, Estimated: true}, victimOf(e.req("r1")))
	if r := e.req("r2"); r.State != records.StateRunning || !r.AdmittedAt.Equal(now) {
		t.Errorf("r2 is %s since %s; want running since the preemption", r.State, r.AdmittedAt)
	}
	es := e.auditEntries("r2")
	last := es[len(es)-2] // then gpubot's admission
	diff(t, "audit of the preemption", []string{"carol", "preempt", "ok", "victims: r1"}, []string{last.Actor, last.Action, last.Outcome, last.Detail})
}

// TestManualPreemptionImpossible: when no lower-priority work can make
// room, the admin is told why and nothing changes.
func TestManualPreemptionImpossible(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("erin", "request 16xh100 for 4h")
	e.do("dave", "request 8xh100 for 1h")
	before := e.requests()
	outs := e.press("carol", commands.VerbPreempt, "r2", "")
	check(t, outs, want{"sender", "No lower-priority work can make room for r2 now: it waits for quota, which preemption does not solve. Nothing was changed."})
	diff(t, "requests", before, e.requests())
	a := e.lastAudit()
	diff(t, "audit", []string{"carol", "preempt", "refused"}, []string{a.Actor, a.Action, a.Outcome})
}

// TestObserveEvents: the cluster's admissions, ends and preemptions
// update the records and the threads.
func TestObserveEvents(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 2h")
	e.do("bob", "request 8xh100 for 1h")
	e.do("alice", "request 8xh100 for 1h") // nlp is at its quota
	e.advance(59 * time.Minute)
	outs := e.advance(time.Minute)
	diff(t, "destinations at 09:00", []string{"thread r2", "card r2", "thread r3", "card r3"}, dests(outs))
	check(t, outs,
		want{"thread r2", "Finished: ran 1h and reached its requested time; 8 GPU-hours used."},
		want{"card r2", "r2 finished"},
		want{"card r2", "Finished 09:00: reached its requested time after running 1h."},
		want{"thread r3", "Admitted after 1h on h100-b1-r1-n2; ends 10:00 unless extended. (Estimate was 08:30–09:00.)"},
		want{"card r3", "r3 running on h100-b1-r1-n2"},
	)
	r2, r3 := e.req("r2"), e.req("r3")
	diff(t, "r2", []any{records.StateFinished, t0.Add(time.Hour), "reached its requested time"}, []any{r2.State, r2.EndedAt, r2.EndReason})
	diff(t, "r3", []any{records.StateRunning, t0.Add(time.Hour), "h100", []string{"h100-b1-r1-n2"}}, []any{r3.State, r3.AdmittedAt, r3.AdmittedFlavor, r3.Nodes})
	diff(t, "audit of r2", []string{"bob request r2 ok", "gpubot admitted r2 ok", "gpubot finished r2 ok"}, e.audit("r2"))
	diff(t, "audit of r3", []string{"alice request r3 ok", "gpubot admitted r3 ok"}, e.audit("r3"))
	diff(t, "usage", []records.UsageRecord{{Request: "r2", Team: "nlp", Requester: "bob", Flavor: "h100", GPUs: 8, Start: t0, End: t0.Add(time.Hour)}}, e.usage())
}

// TestObserveClusterPreemption: a preemption the cluster did on its own
// (as Kueue does) reaches the victim's thread and owner.
func TestObserveClusterPreemption(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("erin", "request 16xh100 for 4h priority low")
	e.do("dave", "request 8xh100 for 1h")
	e.clock.SetTime(t0.Add(time.Hour))
	evs, err := e.sim.Apply(e.ctx, commands.Op{Kind: commands.OpPreempt, ID: "r2", Victims: []string{"r1"}})
	if err != nil {
		t.Fatal(err)
	}
	outs := e.observe(evs)
	check(t, outs,
		want{"person erin", "Your request r1 was preempted by r2 (dave, normal) and is queued again."},
		want{"thread r1", "Preempted by r2 (dave, normal) and requeued after running 1h."},
		want{"thread r2", "Admitted after 1h"},
		want{"thread r1", "New estimate:"},
	)
	diff(t, "r1", victim{State: records.StateQueued, Preemptions: 1, QueuedAt: t0.Add(time.Hour), Estimated: true}, victimOf(e.req("r1")))
}

// TestEndReminder: the owner is asked to extend or release once, at the
// configured time before the end; extending asks again before the new end.
func TestEndReminder(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 1h")
	if outs := e.advance(44 * time.Minute); len(outs) != 0 {
		t.Errorf("before the reminder time: %v", dests(outs))
	}
	outs := e.advance(time.Minute)
	diff(t, "destinations at 08:45", []string{"thread r1", "person alice"}, dests(outs))
	check(t, outs, want{"thread r1", "r1 ends in 15m (09:00). Extend it or release the GPUs if you are done."},
		want{"person alice", "Your request r1 ends in 15m (09:00)."}, want{"person alice", "[Release]"})
	diff(t, "buttons", []string{"Extend 1h: extend r1 1h", "Extend 4h: extend r1 4h", "Release: release r1"}, buttons(outs[0].Reply))
	if !e.req("r1").EndWarned {
		t.Errorf("r1 is not marked as warned")
	}
	for _, d := range []time.Duration{time.Minute, 5 * time.Minute} {
		if outs := e.advance(d); len(outs) != 0 {
			t.Errorf("reminded again: %v", dests(outs))
		}
	}
	e.press("alice", commands.VerbExtend, "r1", "1h")
	if e.req("r1").EndWarned {
		t.Errorf("r1 is still marked as warned after extending")
	}
	if got := e.svc.NextWakeup(e.ctx, e.clock.Now()); !got.Equal(t0.Add(105 * time.Minute)) {
		t.Errorf("NextWakeup = %s, want 09:45", got)
	}
	var reminders int
	for _, o := range e.advance(time.Hour) {
		if o.To.Kind == commands.ToThread && o.To.Request == "r1" && len(buttons(o.Reply)) > 0 {
			reminders++
			check(t, []commands.Output{o}, want{"thread r1", "r1 ends in 15m (10:00)."})
		}
	}
	if reminders != 1 {
		t.Errorf("%d reminders before the extended end, want 1", reminders)
	}
	if got := e.svc.NextWakeup(e.ctx, e.clock.Now()); !got.IsZero() {
		t.Errorf("NextWakeup with nothing left to remind = %s, want zero", got)
	}
}

// TestEstimateRefresh: a queued request's estimate is re-posted when it
// moves materially, and only then.
func TestEstimateRefresh(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("bob", "request 16xh100 for 2h")
	e.do("alice", "request 8xh100 for 1h")
	first := e.req("r2").Estimate

	e.clock.SetTime(t0.Add(5 * time.Minute))
	if outs := e.sync(); len(outs) != 0 {
		t.Errorf("a sync soon after with nothing changed said: %v", dests(outs))
	}
	e.clock.SetTime(t0.Add(20 * time.Minute))
	if outs := e.sync(); len(outs) != 0 {
		t.Errorf("a periodic refresh with the same estimate said: %v", dests(outs))
	}
	// Other teams' work does not move nlp's queue.
	if outs := e.do("dave", "request 8xh100 for 1h"); len(said(outs, "thread r2")) != 0 {
		t.Errorf("an unrelated admission re-posted r2's estimate:\n%s", show(outs))
	}
	diff(t, "r2's estimate", first, e.req("r2").Estimate)

	// bob's work, which r2 waits for, now lasts 4h longer.
	outs := e.do("bob", "extend r1 4h")
	check(t, outs, want{"thread r2", "New estimate: starts in 2h40m–5h40m (11:00–14:00), next in line (was 09:00–10:00)."})
	diff(t, "r2's card", 1, len(said(outs, "card r2")))
	got := e.req("r2")
	diff(t, "r2's new estimate", &records.Estimate{At: t0.Add(20 * time.Minute), Earliest: t0.Add(3 * time.Hour), Latest: t0.Add(6 * time.Hour), Known: true, Position: 1, Reason: "quota"}, got.Estimate)
	diff(t, "r2's first estimate", first, got.FirstEstimate)

	// Releasing early what a request waits for moves it forward, even
	// when nothing starts at once.
	e = newEnv(t, parse(t, small))
	e.do("bob", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 1h")
	e.do("alice", "request 16xh100 for 1h")
	e.do("bob", "approve r3")
	diff(t, "r3's estimate", &records.Estimate{At: t0, Earliest: t0.Add(2 * time.Hour), Latest: t0.Add(4 * time.Hour), Known: true, Position: 1, Reason: "quota"}, e.req("r3").Estimate)
	outs = e.do("bob", "release r1")
	check(t, outs, want{"thread r3", "New estimate: starts in 30m–1h (08:30–09:00), next in line (was 10:00–12:00)."})
}

// TestReconcile: the service brings its records and the cluster into
// agreement when they differ.
func TestReconcile(t *testing.T) {
	tests := map[string]struct {
		setup [][2]string
		at    time.Duration
		// break does behind the service's back what makes them differ.
		breakIt func(t *testing.T, e *env)
		want    map[string]records.State
		says    []want
		audit   []string // the new entries
	}{
		"a queued request the cluster lost is resubmitted": {
			setup: [][2]string{{"bob", "request 16xh100 for 2h"}, {"alice", "request 8xh100 for 1h"}},
			breakIt: func(t *testing.T, e *env) {
				if _, err := e.sim.Apply(e.ctx, commands.Op{Kind: commands.OpRemove, ID: "r2"}); err != nil {
					t.Fatal(err)
				}
			},
			want:  map[string]records.State{"r1": records.StateRunning, "r2": records.StateQueued},
			audit: []string{"gpubot submit r2 ok"},
		},
		"a queued request the cluster has but does not show is resubmitted once, not at every sweep": {
			setup: [][2]string{{"bob", "request 16xh100 for 2h"}, {"alice", "request 8xh100 for 1h"}},
			breakIt: func(t *testing.T, e *env) {
				e.cluster.hide = []string{"r2"}
				for range 3 {
					e.sync()
				}
			},
			want:  map[string]records.State{"r1": records.StateRunning, "r2": records.StateQueued},
			audit: []string{"gpubot submit r2 ok"},
		},
		"a running request the cluster lost is marked lost": {
			setup: [][2]string{{"alice", "request 8xh100 for 2h"}},
			at:    30 * time.Minute,
			breakIt: func(t *testing.T, e *env) {
				if _, err := e.sim.Apply(e.ctx, commands.Op{Kind: commands.OpRemove, ID: "r1"}); err != nil {
					t.Fatal(err)
				}
			},
			want:  map[string]records.State{"r1": records.StateLost},
			says:  []want{{"thread r1", "Its workload disappeared from the cluster without finishing; marked lost."}, {"card r1", "r1 lost"}},
			audit: []string{"gpubot lost r1 ok"},
		},
		"lost near its end: lost, not reminded": {
			setup: [][2]string{{"alice", "request 8xh100 for 1h"}},
			at:    40 * time.Minute,
			breakIt: func(t *testing.T, e *env) {
				if _, err := e.sim.Apply(e.ctx, commands.Op{Kind: commands.OpRemove, ID: "r1"}); err != nil {
					t.Fatal(err)
				}
				e.clock.SetTime(t0.Add(50 * time.Minute)) // past the reminder time
			},
			want:  map[string]records.State{"r1": records.StateLost},
			audit: []string{"gpubot lost r1 ok"},
		},
		"gone after its end: finished while nobody looked, not lost": {
			setup: [][2]string{{"alice", "request 8xh100 for 1h"}},
			at:    30 * time.Minute,
			breakIt: func(t *testing.T, e *env) {
				// As after a crash between the cluster ending it and the
				// record of that (the simulated cluster now commits
				// both at once; a real one ends work on its own).
				if _, err := e.sim.Apply(e.ctx, commands.Op{Kind: commands.OpRemove, ID: "r1"}); err != nil {
					t.Fatal(err)
				}
				e.clock.SetTime(t0.Add(70 * time.Minute))
			},
			want:  map[string]records.State{"r1": records.StateFinished},
			says:  []want{{"thread r1", "Finished: ran 1h and reached its requested time; 8 GPU-hours used."}},
			audit: []string{"gpubot finished r1 ok"},
		},
		"an admission the service missed": {
			setup: [][2]string{{"bob", "request 16xh100 for 2h"}, {"alice", "request 8xh100 for 1h"}},
			at:    30 * time.Minute,
			breakIt: func(t *testing.T, e *env) {
				// bob's work ends and alice's starts; the service hears
				// nothing of it.
				if _, err := e.sim.Apply(e.ctx, commands.Op{Kind: commands.OpRemove, ID: "r1"}); err != nil {
					t.Fatal(err)
				}
			},
			want:  map[string]records.State{"r1": records.StateLost, "r2": records.StateRunning},
			says:  []want{{"thread r2", "Admitted after 30m on h100-b1-r1-n1"}},
			audit: []string{"gpubot lost r1 ok", "gpubot admitted r2 ok"},
		},
		"a preemption the service missed": {
			setup: [][2]string{{"erin", "request 16xh100 for 4h priority low"}, {"dave", "request 8xh100 for 1h"}},
			at:    time.Hour,
			breakIt: func(t *testing.T, e *env) {
				if _, err := e.sim.Apply(e.ctx, commands.Op{Kind: commands.OpPreempt, ID: "r2", Victims: []string{"r1"}}); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]records.State{"r1": records.StateQueued, "r2": records.StateRunning},
			says: []want{
				{"thread r1", "Preempted and requeued after running 1h."},
				{"person erin", "Your request r1 was preempted and is queued again."},
				{"thread r2", "Admitted after 1h"},
			},
			audit: []string{"gpubot preempted r1 ok", "gpubot admitted r2 ok"},
		},
		"a submission the cluster refused is retried": {
			setup: [][2]string{{"bob", "request 8xh100 for 2h"}},
			breakIt: func(t *testing.T, e *env) {
				e.cluster.failApply = errTimeout
				outs := e.do("alice", "request 8xh100 for 1h")
				check(t, outs, want{"sender", "r2 is saved, but the cluster did not take it yet (apiserver timeout). gpubot retries on its own; /gpu status r2 shows where it stands."})
				if r := e.req("r2"); r.State != records.StateQueued {
					t.Errorf("r2 is %s after the cluster refused it, want queued", r.State)
				}
				e.cluster.failApply = nil
			},
			want:  map[string]records.State{"r1": records.StateRunning, "r2": records.StateRunning},
			says:  []want{{"thread r2", "Admitted at once on h100-b1-r1-n2"}},
			audit: []string{"alice request r2 ok", "gpubot submit r2 error", "gpubot submit r2 ok", "gpubot admitted r2 ok"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, parse(t, small))
			for _, c := range tc.setup {
				e.do(c[0], c[1])
			}
			e.advance(tc.at)
			seen := len(e.audit(""))
			tc.breakIt(t, e)
			outs := e.sync()
			states := map[string]records.State{}
			for id, r := range e.requests() {
				states[id] = r.State
			}
			diff(t, "states", tc.want, states)
			check(t, outs, tc.says...)
			for _, o := range outs {
				if len(buttons(o.Reply)) > 0 && o.To.Kind == commands.ToThread {
					t.Errorf("a reminder after reconciling:\n%s", show([]commands.Output{o}))
				}
			}
			diff(t, "new audit entries", tc.audit, e.audit("")[seen:], cmpopts.EquateEmpty())
			// A second sync finds nothing to do.
			if outs := e.sync(); len(outs) != 0 {
				t.Errorf("a second sync said:\n%s", show(outs))
			}
		})
	}
}

var errTimeout = errorString("apiserver timeout")

type errorString string

func (e errorString) Error() string { return string(e) }

// TestSeed: the example's seeds become running requests on a fresh store,
// placed as the example's comments describe, and only once.
func TestSeed(t *testing.T) {
	cfg := exampleConfig(t)
	e := newEnv(t, cfg, seeded)
	rs := e.requests()
	if len(rs) != len(cfg.Seeds()) {
		t.Fatalf("%d requests from %d seeds", len(rs), len(cfg.Seeds()))
	}
	for i, sd := range cfg.Seeds() {
		r := rs["r"+strconv.Itoa(i+1)]
		got := []any{r.Requester, r.Team, r.GPUs, r.State, r.Origin, r.AdmittedAt, r.Duration}
		diff(t, r.ID, []any{sd.Requester, sd.Spec.Team, sd.Spec.GPUs, records.StateRunning, "seed", t0.Add(-sd.StartedAgo), sd.Spec.Duration}, got)
	}
	diff(t, "audit of r1", []string{"gpubot seed r1 ok", "gpubot admitted r1 ok"}, e.audit("r1"))
	outs := e.do("alice", "capacity")
	check(t, outs,
		want{"sender", "h100 | 16 | 128 | 117 | 11 | 4 / 4 / 4 / 4"},
		want{"sender", "a100 | 8 | 64 | 32 | 32 | 32 / 8 / 32 / 32"},
	)
	check(t, e.do("alice", "status r2"), want{"sender", "Running when gpubot started"})

	if _, err := e.svc.Seed(e.ctx, cfg.Seeds()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.requests()); n != len(rs) {
		t.Errorf("seeding again made %d requests, want %d", n, len(rs))
	}

	other := newEnv(t, cfg)
	other.do("alice", "request 8xa100 for 1h")
	if _, err := other.svc.Seed(other.ctx, cfg.Seeds()); err != nil {
		t.Fatal(err)
	}
	if n := len(other.requests()); n != 1 {
		t.Errorf("seeding a store that has a request made %d requests, want 1", n)
	}
}
