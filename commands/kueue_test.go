package commands_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

// kueueCluster is a cluster where, as on a real one, admission happens
// elsewhere: a submitted workload stays pending until the test admits it.
// Its KueueView says what the test tells it to.
type kueueCluster struct {
	mu     sync.Mutex
	snap   *allocator.Snapshot
	report commands.KueueReport
}

func (k *kueueCluster) Snapshot(context.Context) (*allocator.Snapshot, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.snap.Clone(), nil
}

func (k *kueueCluster) Apply(_ context.Context, op commands.Op) ([]allocator.Event, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch op.Kind {
	case commands.OpSubmit:
		if _, ok := k.snap.Workload(op.Workload.ID); !ok {
			if _, err := k.snap.Add(op.Workload); err != nil {
				return nil, err
			}
		}
	case commands.OpRemove:
		_, _ = k.snap.Release(op.ID)
	}
	return nil, nil
}

func (k *kueueCluster) KueueReport(context.Context) (commands.KueueReport, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.report
	out.Pending = map[string]commands.KueueWord{}
	for id, w := range k.report.Pending {
		out.Pending[id] = w
	}
	return out, nil
}

func (k *kueueCluster) say(id string, w commands.KueueWord) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.report.Pending == nil {
		k.report.Pending = map[string]commands.KueueWord{}
	}
	k.report.Pending[id] = w
}

func (k *kueueCluster) forget(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.report.Pending, id)
}

// kueueEnv is a service on a kueueCluster with the small configuration's
// cluster (mutate changes it first), vision's quota used by running work.
type kueueEnv struct {
	t     *testing.T
	ctx   context.Context
	k     *kueueCluster
	db    *store.DB
	clock *clocktesting.FakeClock
	svc   *commands.Service
}

func newKueueEnv(t *testing.T, mutate func(*allocator.Cluster)) *kueueEnv {
	t.Helper()
	return newKueueEnvFrom(t, small, mutate)
}

// newKueueEnvFrom is newKueueEnv on the configuration yaml.
func newKueueEnvFrom(t *testing.T, yaml string, mutate func(*allocator.Cluster)) *kueueEnv {
	t.Helper()
	cfg := parse(t, yaml)
	cl := cfg.Cluster()
	if mutate != nil {
		mutate(cl)
	}
	snap, err := allocator.NewSnapshot(cl, t0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &kueueEnv{t: t, ctx: context.Background(), k: &kueueCluster{snap: snap}, db: db, clock: clocktesting.NewFakeClock(t0)}
	e.svc, err = commands.NewService(e.ctx, cfg.Settings(), commands.Deps{
		Cluster: e.k, Requests: db, IDs: db, Audit: db, Usage: db, Clock: e.clock,
	}, commands.WithLogger(slog.New(slog.DiscardHandler)), commands.WithKueueView(e.k))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *kueueEnv) do(user, text string) []commands.Output {
	e.t.Helper()
	return e.svc.Handle(e.ctx, commands.Input{User: user, Text: text})
}

func (e *kueueEnv) req(id string) records.Request {
	e.t.Helper()
	r, err := e.db.GetRequest(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// everything is all text of outs, blocks included.
func everything(outs []commands.Output) string {
	var b strings.Builder
	for _, o := range outs {
		b.WriteString(o.Reply.Text + "\n")
		for _, bl := range o.Reply.Blocks {
			b.WriteString(bl.Text + "\n")
			for _, f := range bl.Fields {
				b.WriteString(f.Label + ": " + f.Value + "\n")
			}
			if bl.Table != nil {
				b.WriteString(strings.Join(bl.Table.Columns, " | ") + "\n")
				for _, row := range bl.Table.Rows {
					b.WriteString(strings.Join(row, " | ") + "\n")
				}
			}
			for _, btn := range bl.Buttons {
				b.WriteString("[" + btn.Label + "]\n")
			}
		}
	}
	return b.String()
}

func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

func mustNotContain(t *testing.T, what, text string, nots ...string) {
	t.Helper()
	for _, n := range nots {
		if strings.Contains(text, n) {
			t.Errorf("%s says %q:\n%s", what, n, text)
		}
	}
}

var noAffinity = commands.KueueWord{
	Condition: "QuotaReserved=False", Reason: "Pending",
	Message: "couldn't assign flavors to pod set main: flavor h100 doesn't match node affinity",
	Plain:   "Kueue cannot admit it as it is: its pods' node selector does not match flavor h100",
	Never:   true, Why: "its pods' node selector does not match flavor h100",
}

// The reply: a request Kueue will never admit was answered
// "starts any moment now, next in line … only by preempting ;". Kueue's
// word wins: it will not start as it is, and why, with no estimate.
func TestKueueSaysNeverWinsOverTheEstimate(t *testing.T) {
	e := newKueueEnv(t, nil)
	e.k.say("r1", noAffinity)
	outs := e.do("alice", "request 8xh100 for 1h team nlp")
	all := everything(outs)
	mustContain(t, "the reply and card", all,
		"r1 will not start as it is",
		"Will not start as it is: its pods' node selector does not match flavor h100.",
		"Kueue's message: QuotaReserved=False (Pending): couldn't assign flavors to pod set main: flavor h100 doesn't match node affinity")
	mustNotContain(t, "the reply and card", all, "next in line", "any moment", "starts in", "preempting ;", "Preempt", "Waiting for")
	if r := e.req("r1"); r.Estimate != nil || r.FirstEstimate != nil {
		t.Errorf("r1 has an estimate %+v: a request that will not start must get none (nor be scored)", r.Estimate)
	}
	q := everything(e.do("bob", "queue"))
	mustContain(t, "/gpu queue", q, "will not start as it is", "its pods' node selector does not match flavor h100")
	mustNotContain(t, "/gpu queue", q, "any moment", "next in line")
	list := everything(e.do("alice", "status"))
	mustContain(t, "/gpu status", list, "will not start as it is: its pods' node selector does not match flavor h100")
	st := everything(e.do("alice", "status r1"))
	mustContain(t, "/gpu status r1", st, "Will not start as it is", "Kueue's message: QuotaReserved=False (Pending)")
	p := everything(e.do("carol", "preempt r1"))
	mustContain(t, "/gpu preempt r1", p, "Preempting would not help r1: Kueue cannot admit it as it is")
}

// Without Kueue's "never", the estimate and gpubot's category stay, and
// Kueue's reason is shown next to them with its raw message.
func TestKueueReasonBesideCategoryAndEstimate(t *testing.T) {
	e := newKueueEnv(t, nil)
	e.do("dave", "request 8xh100 for 4h team vision")
	e.do("dave", "request 8xh100 for 4h team vision")
	// Kueue admits both (the test plays Kueue), then a third waits.
	e.k.mu.Lock()
	for _, id := range []string{"r1", "r2"} {
		a, _ := e.k.snap.Fit(mustWorkload(t, e.k.snap, id))
		if _, err := e.k.snap.Reserve(id, a); err != nil {
			t.Fatal(err)
		}
	}
	e.k.mu.Unlock()
	e.k.say("r3", commands.KueueWord{Condition: "QuotaReserved=False", Reason: "Pending",
		Message: "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed",
		Plain:   "Kueue waits for room: 8 more nvidia.com/gpu needed on h100"})
	all := everything(e.do("dave", "request 8xh100 for 1h team vision"))
	mustContain(t, "the reply and card", all, "r3 queued: starts", "Waiting for quota:",
		"Kueue says: Kueue waits for room: 8 more nvidia.com/gpu needed on h100.",
		"Kueue's message: QuotaReserved=False (Pending): couldn't assign flavors to pod set main: insufficient unused quota")
	mustNotContain(t, "the reply and card", all, "will not start")
	q := everything(e.do("dave", "queue"))
	mustContain(t, "/gpu queue", q, "Kueue says", "waits for room: 8 more nvidia.com/gpu needed on h100")
}

func mustWorkload(t *testing.T, s *allocator.Snapshot, id string) allocator.Workload {
	t.Helper()
	w, ok := s.Workload(id)
	if !ok {
		t.Fatalf("no workload %s", id)
	}
	return w
}

// When Kueue's word changes later, the thread is told once, the requester
// directly, and the card changes; when Kueue no longer says so, an
// estimate comes back.
func TestKueueWordChangeIsPostedOnce(t *testing.T) {
	e := newKueueEnv(t, nil)
	e.do("alice", "request 8xh100 for 1h team nlp")
	if r := e.req("r1"); r.Estimate == nil {
		t.Fatal("r1 has no estimate before Kueue said anything")
	}
	e.k.say("r1", noAffinity)
	outs := e.observe(nil)
	all := everything(outs)
	mustContain(t, "the sweep", all, "Will not start as it is: its pods' node selector does not match flavor h100. Kueue's message: QuotaReserved=False",
		"Your request r1 will not start as it is", "r1 will not start as it is")
	dms := 0
	for _, o := range outs {
		if o.To.Kind == commands.ToPerson {
			dms++
		}
	}
	if dms != 1 {
		t.Errorf("%d direct messages, want 1 to the requester", dms)
	}
	if again := everything(e.observe(nil)); strings.Contains(again, "will not start") {
		t.Errorf("the same word was posted again:\n%s", again)
	}
	e.k.forget("r1")
	back := everything(e.observe(nil))
	mustContain(t, "the sweep after Kueue changed its mind", back, "Kueue no longer says it cannot start. A new estimate follows.", "New estimate: starts")
}

// Estimates of teams that a Kueue feature gpubot does not model affects
// say they are approximate and name the feature; others do not.
func TestApproximateEstimatesNameTheFeature(t *testing.T) {
	e := newKueueEnv(t, nil)
	e.k.report.Approximate = []commands.Unmodelled{{Feature: "StrictFIFO", Detail: "ClusterQueue vision queues StrictFIFO", Queues: []string{"vision"}}}
	for _, id := range []string{"r1", "r2", "r3"} {
		_ = id
		e.do("dave", "request 8xh100 for 4h team vision")
	}
	vision := everything(e.do("dave", "status r3"))
	mustContain(t, "vision's card", vision, "The estimate is approximate: the cluster uses StrictFIFO, which gpubot does not model.")
	e.do("alice", "request 8xh100 for 4h team nlp")
	nlp := everything(e.do("alice", "status r4"))
	mustNotContain(t, "nlp's card", nlp, "approximate")
	q := everything(e.do("dave", "queue"))
	mustContain(t, "/gpu queue", q, "(approx.)", "Estimates marked approx. are approximate: the cluster uses StrictFIFO")
}

// A request that fits now but is not admitted yet (Kueue has not run its
// cycle) is not said to wait for higher-priority work, and no empty
// victim list is offered.
func TestFitsNowIsNotPriorityAndNoEmptyVictims(t *testing.T) {
	e := newKueueEnv(t, nil)
	all := everything(e.do("alice", "request 8xh100 for 1h team nlp"))
	mustContain(t, "the reply and card", all, "It fits now and starts at the next admission cycle.")
	mustNotContain(t, "the reply and card", all, "higher-priority requests that came later go first", "preempting ;", "preempting .", "[Preempt")
	p := everything(e.do("carol", "preempt r1"))
	mustContain(t, "/gpu preempt r1", p, "r1 fits now without preempting anything")
}

// A flavor with quota and no nodes shows 0 GPUs, with its quota beside,
// saying that this is a real state and what Kueue does there; GPU nodes
// no flavor selects are reported.
func TestCapacityOfAFlavorWithoutNodes(t *testing.T) {
	e := newKueueEnv(t, func(c *allocator.Cluster) { c.Nodes = nil })
	e.k.report.Flavors = []commands.FlavorNodes{{Flavor: "h100", Topology: "gpu-topology", Selects: "cloud.google.com/gke-accelerator=nvidia-h100-80gb"}}
	e.k.report.Unmatched = []string{"4 GPU nodes match no ResourceFlavor: labels nvidia.com/gpu.product=NVIDIA-H200 (h200-1, h200-2, …); the flavors select cloud.google.com/gke-accelerator=nvidia-h100-80gb (h100)"}
	all := everything(e.do("alice", "capacity"))
	mustContain(t, "/gpu capacity", all,
		"h100 | 0 | 0 | 0 | 0",
		"h100 has no nodes, and its teams have 32 GPUs of nominal quota on it (nlp 16, vision 16). Quota without nodes is a real state",
		"Kueue's topology-aware scheduling (Topology gpu-topology) admits only onto nodes that exist",
		"4 GPU nodes match no ResourceFlavor: labels nvidia.com/gpu.product=NVIDIA-H200")
	e.k.report.Flavors[0].Topology = ""
	all = everything(e.do("alice", "capacity"))
	mustContain(t, "/gpu capacity without a Topology", all, "Kueue admits there by quota alone, and the pods wait for nodes")
	// A request there goes to Kueue (nodes may come), not refused; asked
	// as a what-if, it is said not to fit the nodes that exist.
	req := everything(e.do("alice", "request 8xh100 for 1h team nlp"))
	mustContain(t, "the request on a flavor without nodes", req, "r1 queued")
	wi := everything(e.do("alice", "whatif 8xh100 for 1h team nlp"))
	mustContain(t, "the what-if on a flavor without nodes", wi, "can never be admitted: the cluster does not have that many GPUs of that kind")
	// More than the quota even with borrowing is refused at once, as Kueue
	// would never admit it.
	over := everything(e.do("alice", "request 24xh100 for 1h team nlp"))
	mustContain(t, "a request above the quota", over, "can never be admitted for nlp")
}

// observe lets the service observe (nothing new), then the estimates settle.
func (e *kueueEnv) observe(evs []allocator.Event) []commands.Output {
	outs := e.svc.Observe(e.ctx, evs)
	return append(outs, e.svc.Settle(e.ctx)...)
}

// A spot request's requeue that gpubot notices before the cluster's
// eviction event (reconciling) is told as what it was: Kueue's Evicted
// word when it has one, else the spot node gone from the cluster; never
// "the cluster did not say why" when either says.
func TestSpotRequeueSeenFirstSaysWhy(t *testing.T) {
	for name, tc := range map[string]struct {
		word commands.KueueWord
		want string
	}{
		"Kueue's word": {commands.KueueWord{Condition: "Evicted", Reason: "NodeFailures", Message: "Workload was evicted as there was no replacement for a failed node: spot-b1-r1-n1."},
			"Its spot nodes were reclaimed after running 2h (Kueue evicted it (NodeFailures): Workload was evicted as there was no replacement for a failed node: spot-b1-r1-n1); it is queued again on spot."},
		"the node gone": {commands.KueueWord{},
			"Its spot nodes were reclaimed after running 2h (spot node spot-b1-r1-n1 is gone from the cluster); it is queued again on spot."},
	} {
		t.Run(name, func(t *testing.T) {
			e := newKueueEnvFrom(t, elasticSmall, nil)
			k, svc, clk := e.k, e.svc, e.clock
			cl := k.snap.Cluster()
			var err error
			svc.Handle(context.Background(), commands.Input{User: "alice", Text: "request 8xspot for 5h"})
			a := allocator.Admission{Flavor: "spot", Nodes: []string{"spot-b1-r1-n1"}, At: t0}
			k.mu.Lock()
			if _, err := k.snap.Reserve("r1", a); err != nil {
				t.Fatal(err)
			}
			k.mu.Unlock()
			svc.Observe(context.Background(), []allocator.Event{{Kind: allocator.EventAdmitted, ID: "r1", At: t0, Admission: &a}})

			// Two hours in, the node goes and Kueue requeues r1; gpubot
			// looks before the eviction's event comes.
			clk.SetTime(t0.Add(2 * time.Hour))
			w, _ := k.snap.Workload("r1")
			w.Admission = nil
			gone := *cl
			gone.Nodes = slices.DeleteFunc(slices.Clone(cl.Nodes), func(n allocator.Node) bool { return n.Name == "spot-b1-r1-n1" })
			k.mu.Lock()
			k.snap, err = allocator.NewSnapshot(&gone, t0.Add(2*time.Hour), []allocator.Workload{w}, nil)
			k.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if tc.word.Condition != "" {
				k.say("r1", tc.word)
			}
			outs := svc.Observe(context.Background(), nil)
			check(t, outs, want{"thread r1", tc.want}, want{"person alice", "Your request r1 lost its spot nodes after running 2h"})
			checkNot(t, outs, want{"thread r1", "did not say why"})
		})
	}
}
