package commands_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
)

// TestWhatIfSharedPerGeneration: identical what-ifs against one
// generation of estimates share one simulation, whoever asks, while what
// the answer says to each asker (who may approve) stays theirs; another
// team, size, duration or priority is simulated apart; a new generation
// simulates again; before the first refresh nothing is shared.
func TestWhatIfSharedPerGeneration(t *testing.T) {
	e := newEnv(t, parse(t, small))
	// Before any refresh: each what-if simulates.
	e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "whatif 8xh100 for 2h"})
	e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "whatif 8xh100 for 2h"})
	if n := e.svc.WhatIfSimulations(); n != 2 {
		t.Fatalf("%d simulations for two what-ifs before the first refresh, want 2", n)
	}
	// nlp's quota full: a what-if for it waits.
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h")
	sims := func() uint64 { return e.svc.WhatIfSimulations() }
	before := sims()
	ask := func(user, cmd string) string {
		t.Helper()
		outs := e.svc.Handle(e.ctx, commands.Input{User: user, Text: cmd})
		if len(outs) != 1 {
			t.Fatalf("%s %q: %d outputs, want one answer:\n%s", user, cmd, len(outs), show(outs))
		}
		return text(outs[0].Reply)
	}
	copies := e.svc.SnapshotCopies()
	alice := ask("alice", "whatif 16xh100 for 2h")
	bob := ask("bob", "whatif 16xh100 for 2h team nlp")
	if n := sims() - before; n != 1 {
		t.Errorf("%d simulations for two identical what-ifs, want 1 (shared)", n)
	}
	if n := e.svc.SnapshotCopies() - copies; n != 1 {
		t.Errorf("the shared simulation made %d copies of the cluster, want 1 (its approval rules read the copy it adds to)", n)
	}
	if !strings.Contains(alice, "would be queued") || !strings.Contains(alice, "from bob") {
		t.Errorf("alice's answer lacks the queue or bob's approval:\n%s", alice)
	}
	if !strings.Contains(bob, "which you can give yourself") {
		t.Errorf("bob's answer (he leads nlp) lacks that he can approve it himself:\n%s", bob)
	}
	if head := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }; head(alice) != head(bob) {
		t.Errorf("the shared simulation answered differently:\n%s\n%s", head(alice), head(bob))
	}
	for _, q := range []struct{ user, text string }{
		{"dave", "whatif 16xh100 for 2h"},                   // vision, not nlp
		{"alice", "whatif 8xh100 for 2h"},                   // another size
		{"alice", "whatif 16xh100 for 3h"},                  // another duration
		{"alice", "whatif 16xh100 for 2h priority low"},     // another priority
		{"alice", "whatif 16xh100 for 2h topology rack"},    // another topology
		{"alice", "whatif 16xh100 for 2h template dev-box"}, // another template
	} {
		n := sims()
		ask(q.user, q.text)
		if sims() != n+1 {
			t.Errorf("%s %q shared another what-if's simulation", q.user, q.text)
		}
	}
	// The same again: nothing new to simulate.
	n := sims()
	ask("dave", "whatif 16xh100 for 2h")
	ask("alice", "whatif 16xh100 for 3h")
	if sims() != n {
		t.Errorf("%d simulations for what-ifs asked before in this generation, want 0", sims()-n)
	}
	// A new generation of estimates: simulated again, once.
	e.svc.MarkEstimatesStale()
	e.svc.Settle(e.ctx)
	n = sims()
	ask("alice", "whatif 16xh100 for 2h")
	ask("bob", "whatif 16xh100 for 2h team nlp")
	if sims() != n+1 {
		t.Errorf("%d simulations for two identical what-ifs in a new generation, want 1", sims()-n)
	}
}

// TestWhatIfAgreesWithTheEstimates: a what-if is answered against the
// snapshot the latest estimates were made of, as /gpu queue is: a change
// since (nlp's quota freed) shows once the estimates are refreshed.
func TestWhatIfAgreesWithTheEstimates(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h")
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "whatif 8xh100 for 2h"}), want{"sender", "would be queued"})
	e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "release r1"})
	// Not refreshed yet: the estimates' snapshot still has r1.
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "whatif 8xh100 for 2h"}), want{"sender", "would be queued"})
	e.svc.Settle(e.ctx)
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "whatif 8xh100 for 2h"}), want{"sender", "would start at once"})
}

// TestWhatIfConcurrentAskersShareOneSimulation: askers who come while
// the same what-if is being simulated wait for it instead of simulating
// again.
func TestWhatIfConcurrentAskersShareOneSimulation(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 4h")
	n := e.svc.WhatIfSimulations()
	var wg sync.WaitGroup
	answers := make([]string, 8)
	for i := range answers {
		wg.Go(func() {
			outs := e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "whatif 16xh100 for 2h"})
			answers[i] = text(outs[0].Reply)
		})
	}
	wg.Wait()
	if got := e.svc.WhatIfSimulations() - n; got != 1 {
		t.Errorf("%d simulations for 8 concurrent identical what-ifs, want 1", got)
	}
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Errorf("concurrent askers got different answers:\n%s\n%s", answers[0], a)
		}
	}
}

// TestRequestUnderBusyRefresherGetsItsEstimateFromTheRefresher: while
// the background refresher computes, a request command does not simulate
// the queue alone: its card and reply go out at once saying the estimate
// follows, and the refresher's next pass puts it on the card and in the
// thread (a plain line, not "New estimate … (was …)"), exactly once. When
// the refresher is idle, a request's card has its estimate at once.
func TestRequestUnderBusyRefresherGetsItsEstimateFromTheRefresher(t *testing.T) {
	e, en := twoQueuedHeld(t)
	calls := 0
	rec := &recorder{}
	clk, stop := e.refresher(rec.send)
	got := rec.all
	e.svc.MarkEstimatesStale()
	<-en.started // the refresher is computing (and held there)

	outs := e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "request 8xh100 for 1h"})
	check(t, outs,
		want{"channel #nlp r3", "r3 queued"},
		want{"channel #nlp r3", "Its start estimate is being worked out"},
		want{"sender", "Its start estimate is being worked out"},
	)
	checkNot(t, outs, want{"channel #nlp r3", "starts "})
	if r := e.req("r3"); r.Estimate != nil || r.FirstEstimate != nil {
		t.Fatalf("r3 has an estimate before any refresh made one: %+v", r.Estimate)
	}
	if n := en.n() - calls; n != 1 {
		t.Fatalf("%d full computations, want only the refresher's", n)
	}

	// The held pass was of the queue before r3; the next one, a period
	// later, has it.
	close(en.hold)
	waitFor(t, "the held pass to end", func() bool { return clk.HasWaiters() })
	clk.Step(time.Second)
	waitFor(t, "r3's estimate", func() bool { return e.req("r3").Estimate != nil })
	waitFor(t, "the refresher to wait again", func() bool { return clk.HasWaiters() })
	if r := e.req("r3"); r.FirstEstimate == nil || !r.Estimate.Known {
		t.Errorf("r3's estimate after the refresh: %+v (first %+v)", r.Estimate, r.FirstEstimate)
	}
	first := got()
	check(t, first, want{"card r3", "r3 queued: starts "}, want{"thread r3", "Starts "})
	checkNot(t, first, want{"thread r3", "New estimate"}, want{"card r3", "being worked out"})
	if n := len(said(first, "thread r3")); n != 1 {
		t.Errorf("%d thread posts for r3's first estimate, want 1:\n%s", n, show(first))
	}
	if n := len(said(first, "card r3")); n != 1 {
		t.Errorf("%d card updates for r3's first estimate, want 1:\n%s", n, show(first))
	}

	// Another pass: nothing moved, nothing posted again.
	e.svc.MarkEstimatesStale()
	clk.Step(time.Second)
	waitFor(t, "another pass", func() bool { return en.n()-calls == 3 })
	waitFor(t, "the refresher to wait again", func() bool { return clk.HasWaiters() })
	if again := got()[len(first):]; len(said(again, "thread r3"))+len(said(again, "card r3")) != 0 {
		t.Errorf("r3's estimate posted again:\n%s", show(again))
	}

	// Idle refresher (waiting out its period, nothing to do): the request
	// computes its own estimate and its card has it at once.
	outs = e.svc.Handle(e.ctx, commands.Input{User: "bob", Text: "request 8xh100 for 1h team nlp"})
	check(t, outs, want{"channel #nlp r4", "r4 queued: starts "})
	checkNot(t, outs, want{"channel #nlp r4", "being worked out"}, want{"sender", "being worked out"})
	stop()
}

// TestRequestLeftToTheRefresherLosesNothing: requests whose estimates
// were left to a busy refresher, then cancelled, admitted, or carried
// over a restart before it came to them: the first refresh after the
// restart posts the estimate of the one still queued, once, and nothing
// for the others.
func TestRequestLeftToTheRefresherLosesNothing(t *testing.T) {
	e, en := twoQueuedHeld(t)
	clk, stop := e.refresher(func(context.Context, []commands.Output) {})
	e.svc.MarkEstimatesStale()
	<-en.started
	later := want{"sender", "Its start estimate is being worked out"}
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "request 8xh100 for 1h"}), later)        // r3: admitted meanwhile
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "request 8xh100 for 2h"}), later)        // r4: cancelled
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "bob", Text: "request 8xh100 for 1h team nlp"}), later) // r5: still queued
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "cancel r4"}), want{"sender", "r4"})
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "release r1"}), want{"card r3", "r3 running"})
	// The refresher stops before it came to them: gpubot restarts.
	close(en.hold)
	waitFor(t, "the held pass to end", func() bool { return clk.HasWaiters() })
	stop()
	svc, err := commands.NewService(e.ctx, e.cfg.Settings(), commands.Deps{
		Cluster: e.cluster, Requests: e.db, IDs: e.db, Commit: e.db, Audit: e.db, Usage: e.db, Clock: e.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	if r := e.req("r5"); r.Estimate != nil {
		t.Fatalf("r5 has an estimate before any refresh of it: %+v", r.Estimate)
	}
	e.svc.MarkEstimatesStale()
	outs := e.svc.Settle(e.ctx)
	check(t, outs, want{"card r5", "r5 queued: starts "}, want{"thread r5", "Starts "})
	if n := len(said(outs, "thread r5")) + len(said(outs, "card r5")); n != 2 {
		t.Errorf("%d posts for r5's estimate, want its card and one thread line:\n%s", n, show(outs))
	}
	for _, id := range []string{"r3", "r4"} {
		if n := len(said(outs, "thread "+id)) + len(said(outs, "card "+id)); n != 0 {
			t.Errorf("%s (admitted or cancelled meanwhile) got an estimate posted:\n%s", id, show(outs))
		}
	}
	if r := e.req("r5"); r.Estimate == nil || r.FirstEstimate == nil {
		t.Errorf("r5's estimate was not saved: %+v", r)
	}
	e.svc.MarkEstimatesStale()
	if again := e.svc.Settle(e.ctx); len(said(again, "thread r5"))+len(said(again, "card r5")) != 0 {
		t.Errorf("r5's estimate posted again after the restart:\n%s", show(again))
	}
}

// twoQueuedHeld is an env with two of alice's requests queued whose
// estimate engine, from now on, holds its first full computation (the
// refresher's) until en.hold is closed; en.started is closed when it
// begins.
func twoQueuedHeld(t *testing.T) (*env, *countingEngine) {
	t.Helper()
	en := &countingEngine{}
	e := newEnv(t, parse(t, small), withEngine(en))
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h")
	en.mu.Lock()
	en.calls, en.started, en.hold = 0, make(chan struct{}), make(chan struct{})
	en.mu.Unlock()
	return e, en
}

// A what-if shares the latest estimates' snapshot only while they are
// fresh: a quiet cluster is re-estimated only every so often, and a
// simulation from that snapshot would start from then. Older, each
// what-if is simulated on its own against the cluster as it is now.
func TestWhatIfOnStaleEstimatesSimulatesNow(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h")
	ask := func() {
		t.Helper()
		if outs := e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "whatif 16xh100 for 2h"}); len(outs) != 1 || !strings.Contains(text(outs[0].Reply), "would be queued") {
			t.Fatalf("the what-if's answer:\n%s", show(outs))
		}
	}
	n := e.svc.WhatIfSimulations()
	ask()
	ask()
	if got := e.svc.WhatIfSimulations() - n; got != 1 {
		t.Fatalf("%d simulations for two identical what-ifs on fresh estimates, want 1", got)
	}
	e.clock.Step(10 * time.Second)
	n = e.svc.WhatIfSimulations()
	ask()
	ask()
	if got := e.svc.WhatIfSimulations() - n; got != 2 {
		t.Errorf("%d simulations for two what-ifs on estimates 10s old, want 2 (each on its own)", got)
	}
}
