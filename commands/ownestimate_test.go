package commands_test

import (
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// TestRequestWhoseOwnEstimateIsLateGetsItsCardAtOnce: with the refresher
// idle in the background, a request command computes its own estimate,
// but waits for it at most the own-estimate wait (200 ms on the
// refresher's clock). Late, its card and reply go out at once saying the
// estimate follows; the estimate, when it comes, updates the card and
// posts in the thread exactly once, and the refresher's next pass posts
// nothing more. When the refresher's pass comes first, it posts the first
// estimate and the late one, when it comes, posts nothing.
//
// The engine keeps no checkpoints, so that each request's own estimate is
// simulated (with them it comes from the refresher's last computation:
// TestRequestEstimateFromCheckpoints).
func TestRequestWhoseOwnEstimateIsLateGetsItsCardAtOnce(t *testing.T) {
	e := newEnv(t, parse(t, small), withEngine(allocator.NewEstimator()))
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h") // nlp's quota is in use: what follows queues
	started, hold := make(chan struct{}), make(chan struct{})
	e.svc.HoldOwnEstimates(started, hold)
	rec := &recorder{}
	clk, stop := e.refresher(rec.send)
	// One pass, then the refresher is idle, waiting out its period.
	e.svc.MarkEstimatesStale()
	waitFor(t, "the refresher's first pass", func() bool { return clk.HasWaiters() })
	idle := func() {
		t.Helper()
		waitFor(t, "the refresher to wait again", func() bool { return clk.HasWaiters() })
	}
	// ask sends a request, holds its own estimate past the wait and
	// returns the answer, which must come without the estimate.
	ask := func(user, text, id string) {
		t.Helper()
		answered := make(chan []commands.Output, 1)
		go func() { answered <- e.svc.Handle(e.ctx, commands.Input{User: user, Text: text}) }()
		<-started // computing its own estimate, the wait's timer set
		select {
		case outs := <-answered:
			t.Fatalf("answered before the wait was over:\n%s", show(outs))
		default:
		}
		clk.Step(commands.DefaultOwnEstimateWait)
		var outs []commands.Output
		select {
		case outs = <-answered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer after the own-estimate wait", id)
		}
		check(t, outs,
			want{"channel #nlp " + id, id + " queued"},
			want{"channel #nlp " + id, "Its start estimate is being worked out"},
			want{"sender", "Its start estimate is being worked out"},
		)
		checkNot(t, outs, want{"channel #nlp " + id, "starts "})
		if r := e.req(id); r.Estimate != nil {
			t.Fatalf("%s has an estimate before its own was done: %+v", id, r.Estimate)
		}
	}
	posts := func(id string) (thread, card int) {
		all := rec.all()
		return len(said(all, "thread "+id)), len(said(all, "card "+id))
	}

	// The late estimate first.
	ask("alice", "request 8xh100 for 1h", "r3")
	hold <- struct{}{}
	waitFor(t, "r3's late estimate", func() bool { _, done := e.svc.LateEstimates(); return done == 1 })
	if r := e.req("r3"); r.Estimate == nil || r.FirstEstimate == nil || !r.Estimate.Known {
		t.Fatalf("r3 after its late estimate: %+v (first %+v)", r.Estimate, r.FirstEstimate)
	}
	check(t, rec.all(), want{"card r3", "r3 queued: starts "}, want{"thread r3", "Starts "})
	checkNot(t, rec.all(), want{"thread r3", "New estimate"}, want{"card r3", "being worked out"})
	if th, cd := posts("r3"); th != 1 || cd != 1 {
		t.Errorf("r3's late estimate: %d thread posts and %d card updates, want 1 and 1:\n%s", th, cd, show(rec.all()))
	}
	// The refresher's pass (r3's submission asked for one) posts nothing more.
	clk.Step(time.Second)
	idle()
	if th, cd := posts("r3"); th != 1 || cd != 1 {
		t.Errorf("after the refresher's pass: %d thread posts and %d card updates for r3, want 1 and 1:\n%s", th, cd, show(rec.all()))
	}

	// The refresher first: its pass posts r4's first estimate, and the
	// late one finds it posted.
	ask("bob", "request 8xh100 for 1h team nlp", "r4")
	clk.Step(time.Second)
	waitFor(t, "the refresher's estimate of r4", func() bool { return e.req("r4").Estimate != nil })
	idle()
	first := *e.req("r4").Estimate
	hold <- struct{}{}
	waitFor(t, "r4's late estimate", func() bool { _, done := e.svc.LateEstimates(); return done == 2 })
	if th, cd := posts("r4"); th != 1 || cd != 1 {
		t.Errorf("r4: %d thread posts and %d card updates, want 1 and 1 (the refresher's):\n%s", th, cd, show(rec.all()))
	}
	if got := *e.req("r4").Estimate; got != first {
		t.Errorf("r4's estimate changed by the late one: %+v, was %+v", got, first)
	}
	if late, _ := e.svc.LateEstimates(); late != 2 {
		t.Errorf("%d estimates counted late, want 2", late)
	}
	stop()
}

// TestRequestOwnEstimateInTimeIsOnItsCard: an own estimate ready within
// the wait is on the card at once, with nothing late (simulated, as above).
func TestRequestOwnEstimateInTimeIsOnItsCard(t *testing.T) {
	e := newEnv(t, parse(t, small), withEngine(allocator.NewEstimator()))
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h")
	clk, stop := e.refresher((&recorder{}).send)
	e.svc.MarkEstimatesStale()
	waitFor(t, "the refresher's first pass", func() bool { return clk.HasWaiters() })
	outs := e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "request 8xh100 for 1h"})
	check(t, outs, want{"channel #nlp r3", "r3 queued: starts "})
	checkNot(t, outs, want{"channel #nlp r3", "being worked out"}, want{"sender", "being worked out"})
	if late, _ := e.svc.LateEstimates(); late != 0 {
		t.Errorf("%d estimates counted late, want 0", late)
	}
	stop()
}

// lastEngine is the default estimate engine, an allocator.Estimator that
// keeps its checkpoints, remembering its last computation's estimates.
type lastEngine struct {
	*allocator.Estimator
	last map[string]allocator.Estimate
}

func (l *lastEngine) Estimates(s *allocator.Snapshot, opts allocator.EstimateOptions) map[string]allocator.Estimate {
	l.last = maps.Clone(l.Estimator.Estimates(s, opts))
	return l.last
}

// TestRequestEstimateFromCheckpoints: a request command takes its own
// estimate from the refresher's last computation when the cluster is as
// that computation saw it but for the request, also a moment later (no
// simulation, one copy of the cluster for its card), and simulates it
// when the cluster has changed since. From checkpoints, the estimate on
// its card is the one the next full computation makes (but for the
// rounding of ends), which then posts nothing new.
func TestRequestEstimateFromCheckpoints(t *testing.T) {
	est := allocator.NewEstimator()
	est.KeepCheckpoints = true
	en := &lastEngine{Estimator: est}
	e := newEnv(t, parse(t, small), withEngine(en))
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h") // nlp's quota is in use: what follows queues
	ask := func(user, text, id string, fromCheckpoints bool) {
		t.Helper()
		before, copies := e.svc.RefreshStats().FromCheckpoints, e.svc.SnapshotCopies()
		outs := e.svc.Handle(e.ctx, commands.Input{User: user, Text: text})
		check(t, outs, want{"channel #nlp " + id, id + " queued: starts "})
		n, expect := e.svc.RefreshStats().FromCheckpoints-before, uint64(0)
		if fromCheckpoints {
			expect = 1
			if c := e.svc.SnapshotCopies() - copies; c != 1 {
				t.Errorf("%s: the cluster copied %d times, want once (for its card)", id, c)
			}
		}
		if n != expect {
			t.Fatalf("%s: %d estimates from checkpoints, want %d", id, n, expect)
		}
		first := e.req(id).FirstEstimate
		settled := e.svc.Settle(e.ctx)
		if first == nil || !first.Known {
			t.Fatalf("%s: first estimate %+v, want a start", id, first)
		}
		if !fromCheckpoints {
			return
		}
		checkNot(t, settled, want{"thread " + id, "New estimate"})
		// The same but for the rounding of ends, relative to Now (each
		// less than 1/32 of how far ahead; see allocator's roundEnd).
		now := e.clock.Now()
		near := func(a, b time.Time) bool { return absDur(a.Sub(b)) <= max(a.Sub(now), b.Sub(now))/16+time.Second }
		full, ok := en.last[id]
		if !ok || !full.Known || !near(first.Earliest, full.Earliest) || !near(first.Latest, full.Latest) ||
			first.Position != full.Position || first.Reason != string(full.Reason) {
			t.Errorf("%s: first estimate %+v, the full computation's %+v", id, first, full)
		}
	}
	ask("alice", "request 8xh100 for 1h", "r3", true)
	// A minute later, with nothing the last computation foresaw come due.
	e.clock.SetTime(e.clock.Now().Add(time.Minute))
	ask("bob", "request 8xh100 for 2h team nlp", "r4", true)
	// Changed since the last computation: r2 is gone.
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "cancel r2"}), want{"sender", "r2"})
	ask("alice", "request 8xh100 for 3h", "r5", false)
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

// TestRequestEstimateFromCheckpointsWithAnOffer: a request offered
// elastic capacity takes its own estimate from the last computation too;
// the offer's starts are worked out as before.
func TestRequestEstimateFromCheckpointsWithAnOffer(t *testing.T) {
	e := newElasticEnv(t)
	before := e.svc.RefreshStats().FromCheckpoints
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "/gpu request 8xh100 for 2h"}),
		want{"channel #nlp r2", "Sooner on elastic capacity:\nreserved: starts in 3h–6h (11:00–14:00), next in line"},
		want{"channel #nlp r2", "spot (spot): now, may be reclaimed"},
		want{"sender", "/gpu switch r2 spot or /gpu switch r2 dws"},
	)
	if n := e.svc.RefreshStats().FromCheckpoints - before; n != 1 {
		t.Errorf("%d estimates from checkpoints, want 1", n)
	}
}

// TestNoCheckpointsWhileTheQueueIsBusy: a refresh after more than
// BusyChanges changes keeps no checkpoints (the next request simulates
// its own estimate); the next one after a single change does again.
func TestNoCheckpointsWhileTheQueueIsBusy(t *testing.T) {
	e := newEnv(t, parse(t, strings.Replace(small, "maxDuration: 2d", "maxDuration: 30d", 1)))
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h") // nlp's quota is in use: what follows queues
	for range commands.BusyChanges + 1 {
		e.svc.Handle(e.ctx, commands.Input{User: "bob", Text: "request 8xh100 for 1d team nlp"})
	}
	e.svc.Settle(e.ctx) // all of them at once: busy
	ask := func(id string, expect uint64) {
		t.Helper()
		before := e.svc.RefreshStats().FromCheckpoints
		check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "request 8xh100 for 1h"}), want{"channel #nlp " + id, id + " queued: starts "})
		if n := e.svc.RefreshStats().FromCheckpoints - before; n != expect {
			t.Errorf("%s: %d estimates from checkpoints, want %d", id, n, expect)
		}
		e.svc.Settle(e.ctx)
	}
	ask("r"+strconv.Itoa(commands.BusyChanges+4), 0)
	ask("r"+strconv.Itoa(commands.BusyChanges+5), 1)
}
