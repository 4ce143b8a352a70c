package commands_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
)

// apiCluster is the simulated cluster seen as a real one: a plain
// Cluster (not a Stepper), whose operations the service makes outside
// its write section, as it does Kubernetes API calls. An operation that
// gate matches blocks, after telling entered, until release is closed:
// a slow API server, without a sleep.
type apiCluster struct {
	sim     *simcluster.Cluster
	gate    func(commands.Op) bool
	entered chan commands.Op
	release chan struct{}

	mu      sync.Mutex
	applied []commands.Op
}

func newAPICluster(gate func(commands.Op) bool) *apiCluster {
	return &apiCluster{gate: gate, entered: make(chan commands.Op, 16), release: make(chan struct{})}
}

func (a *apiCluster) Snapshot(ctx context.Context) (*allocator.Snapshot, error) {
	return a.sim.Snapshot(ctx)
}

func (a *apiCluster) Apply(ctx context.Context, op commands.Op) ([]allocator.Event, error) {
	if a.gate != nil && a.gate(op) {
		a.entered <- op
		<-a.release
	}
	a.mu.Lock()
	a.applied = append(a.applied, op)
	a.mu.Unlock()
	return a.sim.Apply(ctx, op)
}

// count is how many operations of kind on id were applied.
func (a *apiCluster) count(kind commands.OpKind, id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, op := range a.applied {
		if op.Kind == kind && (op.ID == id || op.Workload.ID == id) {
			n++
		}
	}
	return n
}

func withAPI(a *apiCluster) envOption { return func(o *envOptions) { o.api = a } }

func withEngine(en commands.EstimateEngine) envOption {
	return func(o *envOptions) { o.engine = en }
}

// gateOn matches operations of kind on request id.
func gateOn(kind commands.OpKind, id string) func(commands.Op) bool {
	return func(op commands.Op) bool { return op.Kind == kind && (op.ID == id || op.Workload.ID == id) }
}

// guard is how long a test waits for what must happen before calling it
// a hang. It bounds waiting only; nothing is timed.
const guard = 30 * time.Second

// waitFor fails the test unless cond holds before the guard runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// async runs fn on its own goroutine; the returned function waits for
// its outputs.
func async(t *testing.T, fn func() []commands.Output) func() []commands.Output {
	ch := make(chan []commands.Output, 1)
	go func() { ch <- fn() }()
	return func() []commands.Output {
		t.Helper()
		select {
		case outs := <-ch:
			return outs
		case <-time.After(guard):
			t.Fatal("a call did not return")
			return nil
		}
	}
}

// TestReadsAndOtherWritesDuringASlowApply: while the cluster takes its
// time over one request's submission, every read answers, and another
// team's request goes all the way through.
func TestReadsAndOtherWritesDuringASlowApply(t *testing.T) {
	api := newAPICluster(gateOn(commands.OpSubmit, "r1"))
	e := newEnv(t, parse(t, small), withAPI(api))
	first := async(t, func() []commands.Output { return e.do("alice", "request 8xh100 for 1h") })
	<-api.entered

	reads := map[string]string{
		"status":                  "alice, you have 1 request",
		"queue":                   "Nothing is waiting",
		"capacity":                "Capacity now, per flavor.",
		"usage":                   "GPU usage over the last 7 days",
		"help":                    "/gpu request",
		"whatif 8xh100 for 1h":    "If requested now",
		"status r1":               "r1 queued",
		"digest":                  "Digests and reports are not set up",
		"whatif 40xh100 for 1h":   "can never be admitted",
		"queue nlp":               "Nothing is waiting in nlp",
		"usage nlp 30d":           "GPU usage over the last 30 days, nlp",
		"help request":            "request",
		"capacity ":               "Capacity now",
		"status r99":              "There is no request r99.",
		"whatif 8xh100 for 2h":    "would start at once",
		"queue h100":              "Nothing is waiting in h100",
		"usage vision":            "vision",
		"help queue":              "queue",
		"whatif 16xh100 for 1h":   "needs approval",
		"whatif 8xh100 team nlp ": "for",
	}
	for text, phrase := range reads {
		outs := async(t, func() []commands.Output { return e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: text}) })()
		if !strings.Contains(show(outs), phrase) {
			t.Errorf("%q during the slow submission: no %q in\n%s", text, phrase, show(outs))
		}
	}
	home := async(t, func() []commands.Output {
		return []commands.Output{{Reply: e.svc.Home(e.ctx, "alice")}}
	})()
	if !strings.Contains(text(home[0].Reply), "Your GPU requests") {
		t.Errorf("App Home during the slow submission:\n%s", text(home[0].Reply))
	}
	other := async(t, func() []commands.Output { return e.do("dave", "request 8xh100 for 1h") })()
	check(t, other, want{"channel #vision r2", "r2 running"})

	close(api.release)
	check(t, first(), want{"channel #nlp r1", "r1 running"})
	if r := e.req("r1"); r.State != records.StateRunning {
		t.Errorf("r1 is %s, want running", r.State)
	}
}

// TestTwoApprovalsOfOneRequest: a lead and an admin press Approve at
// once; the request is submitted once, approved once, and the second
// press is told it was already approved.
func TestTwoApprovalsOfOneRequest(t *testing.T) {
	api := newAPICluster(gateOn(commands.OpSubmit, "r1"))
	e := newEnv(t, parse(t, small), withAPI(api))
	e.do("alice", "request 16xh100 for 1h")
	bob := async(t, func() []commands.Output { return e.press("bob", commands.VerbApprove, "r1", "") })
	<-api.entered
	carol := async(t, func() []commands.Output { return e.press("carol", commands.VerbApprove, "r1", "") })
	waitFor(t, "carol's press to wait for bob's", func() bool { return e.svc.LockWaiters("r1") == 2 })
	close(api.release)
	check(t, bob(), want{"sender", "Approved r1."})
	check(t, carol(), want{"sender", "r1 was already approved by bob"})
	if n := api.count(commands.OpSubmit, "r1"); n != 1 {
		t.Errorf("r1 was submitted %d times, want once", n)
	}
	var approvals []string
	for _, a := range e.auditEntries("r1") {
		if a.Action == "approve" {
			approvals = append(approvals, a.Actor+" "+a.Outcome)
		}
	}
	diff(t, "approvals in the audit log", []string{"bob ok", "carol refused"}, approvals)
}

// TestApproveVersusCancel: the requester cancels while the lead's
// approval is being submitted; the cancel waits for it and then takes
// the workload out again, so nothing is left running for a cancelled
// request (the cleanup checks the cluster against the records).
func TestApproveVersusCancel(t *testing.T) {
	api := newAPICluster(gateOn(commands.OpSubmit, "r1"))
	e := newEnv(t, parse(t, small), withAPI(api))
	e.do("alice", "request 16xh100 for 1h")
	approve := async(t, func() []commands.Output { return e.press("bob", commands.VerbApprove, "r1", "") })
	<-api.entered
	cancel := async(t, func() []commands.Output { return e.do("alice", "cancel r1") })
	waitFor(t, "the cancel to wait for the approval", func() bool { return e.svc.LockWaiters("r1") == 2 })
	if n := api.count(commands.OpRemove, "r1"); n != 0 {
		t.Fatalf("the cancel reached the cluster while the approval was in it")
	}
	close(api.release)
	check(t, approve(), want{"sender", "Approved r1."})
	check(t, cancel(), want{"sender", "r1: released by alice"})
	if r := e.req("r1"); r.State != records.StateFinished || r.EndReason != "released by alice" {
		t.Errorf("r1 is %s (%s), want finished, released by alice", r.State, r.EndReason)
	}
	if ws := e.workloads(); len(ws) != 0 {
		t.Errorf("workloads left in the cluster: %v", ws)
	}
}

// TestExtendVersusTheEndSweep: a request reaches its end while its
// extension is on its way to the cluster. The end is recorded once, with
// one usage record, and the extender is told it had ended.
func TestExtendVersusTheEndSweep(t *testing.T) {
	api := newAPICluster(gateOn(commands.OpExtend, "r1"))
	e := newEnv(t, parse(t, small), withAPI(api))
	e.do("alice", "request 8xh100 for 1h")
	e.clock.SetTime(t0.Add(time.Hour))
	extend := async(t, func() []commands.Output { return e.do("alice", "extend r1 2h") })
	<-api.entered
	ended := e.sync() // the cluster ends r1 at its time and says so
	check(t, ended, want{"thread r1", "Finished: ran 1h"})
	close(api.release)
	check(t, extend(), want{"sender", "r1 ended meanwhile: it is finished"})
	r := e.req("r1")
	if r.State != records.StateFinished || r.Duration != time.Hour {
		t.Errorf("r1 is %s for %s, want finished for 1h", r.State, r.Duration)
	}
	if us := e.usage(); len(us) != 1 || !us[0].End.Equal(t0.Add(time.Hour)) {
		t.Errorf("usage records %+v, want one ending at the end", us)
	}
}

// TestExtendBeforeTheEndSweep: the same race won by the extension: it
// reaches the cluster first, and the sweep at the old end finds nothing
// to end.
func TestExtendBeforeTheEndSweep(t *testing.T) {
	e := newEnv(t, parse(t, small), withAPI(newAPICluster(nil)))
	e.do("alice", "request 8xh100 for 1h")
	e.clock.SetTime(t0.Add(45 * time.Minute))
	check(t, e.do("alice", "extend r1 2h"), want{"sender", "now ends 11:00"})
	e.clock.SetTime(t0.Add(time.Hour))
	checkNot(t, e.sync(), want{"thread r1", "Finished"})
	if r := e.req("r1"); r.State != records.StateRunning || r.Duration != 3*time.Hour {
		t.Errorf("r1 is %s for %s, want running for 3h", r.State, r.Duration)
	}
}

// countingEngine counts full estimate computations; the first one waits
// until hold is closed (when hold is set).
type countingEngine struct {
	mu      sync.Mutex
	calls   int
	started chan struct{}
	hold    chan struct{}
}

func (c *countingEngine) Estimates(s *allocator.Snapshot, opts allocator.EstimateOptions) map[string]allocator.Estimate {
	c.mu.Lock()
	c.calls++
	first := c.calls == 1
	c.mu.Unlock()
	if first && c.hold != nil {
		close(c.started)
		<-c.hold
	}
	return allocator.Estimates(s, opts)
}

func (c *countingEngine) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// TestEstimatesAreCoalesced: 100 requests that change the queue while the
// estimates are being computed cost one more computation, not 100; each
// request got its own estimate meanwhile without a full computation; and
// writes and reads did not wait for the computation.
func TestEstimatesAreCoalesced(t *testing.T) {
	en := &countingEngine{started: make(chan struct{}), hold: make(chan struct{})}
	e := newEnv(t, parse(t, strings.Replace(small, "maxDuration: 2d", "maxDuration: 30d", 1)), withEngine(en))
	settled := async(t, func() []commands.Output { return e.svc.Settle(e.ctx) })
	<-en.started
	for i := range 100 {
		user := []string{"alice", "dave"}[i%2]
		async(t, func() []commands.Output {
			return e.svc.Handle(e.ctx, commands.Input{User: user, Text: "request 8xh100 for 1d"})
		})()
	}
	check(t, async(t, func() []commands.Output { return e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "queue"}) })(),
		want{"sender", "96 requests waiting in the cluster"})
	if n := en.n(); n != 1 {
		t.Fatalf("%d full computations during the burst, want the one in progress", n)
	}
	for id, r := range e.requests() {
		if r.State == records.StateQueued && (r.Estimate == nil || !r.Estimate.Known) {
			t.Errorf("%s has no estimate of its own: %+v", id, r.Estimate)
		}
	}
	close(en.hold)
	settled()
	e.svc.Settle(e.ctx)
	e.svc.Settle(e.ctx)
	if n := en.n(); n != 2 {
		t.Errorf("%d full computations for a burst of 100 changes, want 2", n)
	}
	// What the metrics show of it (gpubot_estimate_*_total).
	if st := e.svc.RefreshStats(); st.Changes < 100 || st.Simulated != 2 || st.Reused+st.Unchanged != 0 || st.Computing <= 0 {
		t.Errorf("RefreshStats = %+v, want at least 100 changes, 2 simulated, none reused or unchanged, time spent", st)
	}
	// The queue now shows the latest: estimates for every waiting request.
	q := text(e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "queue"})[0].Reply)
	if strings.Contains(q, "no estimate") {
		t.Errorf("the queue after settling lacks estimates:\n%s", q)
	}
}

// TestRefreshStatsSayWhatTheEngineDid: with the default engine (an
// allocator.Estimator), a refresh after a change simulates the queue, and
// one marked stale with nothing changed is answered from the last result.
func TestRefreshStatsSayWhatTheEngineDid(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 1d")
	e.do("dave", "request 8xh100 for 1d")
	st := e.svc.RefreshStats()
	if st.Simulated == 0 || st.Unchanged != 0 {
		t.Fatalf("after two requests: %+v, want simulations and nothing unchanged", st)
	}
	e.svc.MarkEstimatesStale()
	e.svc.Settle(e.ctx)
	after := e.svc.RefreshStats()
	if after.Simulated != st.Simulated || after.Unchanged != 1 || after.Changes != st.Changes+1 {
		t.Errorf("a refresh with nothing changed: %+v after %+v, want one more unchanged and one more change", after, st)
	}
}

// TestRunEstimatesComputesOncePerPeriod: in the background, a stream of
// changes costs one computation per period of the refresher's clock (a
// fake one here), however many changes came in it.
func TestRunEstimatesComputesOncePerPeriod(t *testing.T) {
	en := &countingEngine{}
	e := newEnv(t, parse(t, small), withEngine(en))
	clk, stop := e.refresher(func(context.Context, []commands.Output) {})
	waitFor(t, "the first computation", func() bool { return en.n() == 1 && clk.HasWaiters() })
	for range 50 {
		e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "request 8xh100 for 1h"})
	}
	if n := en.n(); n != 1 {
		t.Fatalf("%d computations before the period ended, want 1", n)
	}
	clk.Step(time.Second)
	waitFor(t, "the computation after the period", func() bool { return en.n() == 2 && clk.HasWaiters() })
	clk.Step(time.Second)
	clk.Step(time.Second)
	if n := en.n(); n != 2 {
		t.Errorf("%d computations for 50 changes in one period, want 2 in all", n)
	}
	stop()
}
