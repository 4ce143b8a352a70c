package k8sbridge_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

// bot is gpubot's command service on a real cluster, as the app wires it.
type bot struct {
	s   *scenario
	db  *store.DB
	svc *commands.Service
	b   *k8sbridge.Bridge
}

func settings() commands.Settings {
	return commands.Settings{
		People:          []commands.Person{{Name: "alice"}, {Name: "bob"}, {Name: "carol", Admin: true}},
		Teams:           []commands.Team{{Name: "nlp", Members: []string{"alice"}, Leads: []string{"bob"}, Channel: "#gpu-nlp"}},
		Priorities:      []commands.Priority{{Name: "low", Value: 100}, {Name: "normal", Value: 200}, {Name: "high", Value: 500}},
		DefaultPriority: "normal",
		Approval:        commands.ApprovalRules{AboveGPUs: 8},
		Templates:       []string{"default"},
		DefaultChannel:  "#gpu",
	}
}

// startBot opens the store at path and starts a bridge and a service on it.
func (s *scenario) startBot(path string) *bot {
	s.t.Helper()
	return s.startBotWith(path, settings())
}

// startBotWith is startBot with settings set and, when set has a zombie
// policy (Zombies.LeadsGrace), the zombie sweep on with the store; more
// gives further service options made with the bridge.
func (s *scenario) startBotWith(path string, set commands.Settings, more ...func(*k8sbridge.Bridge) commands.Option) *bot {
	s.t.Helper()
	db, err := store.Open(path)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.t.Cleanup(func() { cancel(); db.Close() })
	b, err := k8sbridge.New(s.cfg, s.kube, s.kueue, k8sbridge.WithRequests(db))
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := b.Start(ctx); err != nil {
		s.t.Fatal(err)
	}
	opts := []commands.Option{commands.WithTracker(b)}
	if set.Zombies.LeadsGrace > 0 {
		opts = append(opts, commands.WithZombies(db), commands.WithOthers(b))
	}
	for _, m := range more {
		opts = append(opts, m(b))
	}
	svc, err := commands.NewService(ctx, set, commands.Deps{Cluster: b, Requests: db, IDs: db, Audit: db, Usage: db, Commit: db, Clock: clock.RealClock{}}, opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	owned, err := b.Owned(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	svc.Adopt(ctx, owned)
	go b.Run(ctx, func(ctx context.Context, evs []allocator.Event) {
		s.mu.Lock()
		s.events = append(s.events, evs...)
		s.mu.Unlock()
		svc.Observe(ctx, evs)
	})
	svc.Observe(ctx, nil) // start-up reconciliation
	s.bridge = b
	return &bot{s: s, db: db, svc: svc, b: b}
}

func (x *bot) say(user, text string) string {
	outs := x.svc.Handle(x.s.ctx, commands.Input{User: user, Text: text})
	var b strings.Builder
	for _, o := range outs {
		b.WriteString(o.Reply.Text + "\n")
	}
	return b.String()
}

func (x *bot) request(id string) records.Request {
	r, err := x.db.GetRequest(x.s.ctx, id)
	if err != nil {
		x.s.t.Fatal(err)
	}
	return r
}

func (x *bot) waitState(id string, st records.State) {
	x.s.t.Helper()
	x.s.eventually(id+" "+string(st), func() bool {
		r, err := x.db.GetRequest(x.s.ctx, id)
		return err == nil && r.State == st
	})
}

func TestApprovalHoldsNoWorkloadUntilApproved(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 2}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 16}}})
	x := s.startBot(filepath.Join(t.TempDir(), "gpubot.db"))
	out := x.say("alice", "/gpu request 16 for 2h")
	if r := x.request("r1"); r.State != records.StateAwaitingApproval {
		t.Fatalf("r1 is %s after %q", r.State, out)
	}
	if n := len(s.jobsOf("r1")); n != 0 {
		t.Fatalf("%d Jobs for a request awaiting approval", n)
	}
	x.say("bob", "/gpu approve r1")
	x.waitState("r1", records.StateRunning)
	jobs := s.jobsOf("r1")
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs after approval, want 1", len(jobs))
	}
	j := jobs[0]
	want := map[string]string{k8sbridge.LabelQueueName: "nlp", k8sbridge.LabelPriorityClass: "normal", k8sbridge.LabelMaxExecTime: "7200"}
	for k, v := range want {
		if j.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, j.Labels[k], v)
		}
	}
	if j.Annotations[k8sbridge.AnnotationRequester] != "alice" || j.Annotations[k8sbridge.AnnotationThread] != "#gpu-nlp" {
		t.Errorf("annotations %v", j.Annotations)
	}
	if p := ptr.Deref(j.Spec.Parallelism, 0); p != 2 {
		t.Errorf("parallelism %d, want 2 pods of 8 GPUs", p)
	}
}

func TestTrackAdoptsAJobSubmittedElsewhere(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 2}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 16}}})
	x := s.startBot(filepath.Join(t.TempDir(), "gpubot.db"))
	ns := s.n("nlp")
	gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "llama-eval", Namespace: ns,
		Labels: map[string]string{k8sbridge.LabelQueueName: "nlp", k8sbridge.LabelPriorityClass: "high"}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "eval", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}}}}}}
	s.must(s.kube.BatchV1().Jobs(ns).Create(s.ctx, job, metav1.CreateOptions{}))
	out := x.say("alice", "/gpu track "+ns+"/llama-eval")
	if !strings.Contains(out, "Tracking") {
		t.Fatalf("track said %q", out)
	}
	x.waitState("r1", records.StateRunning)
	r := x.request("r1")
	if r.GPUs != 4 || r.Priority != "high" || r.Team != "nlp" || r.Origin != "track" {
		t.Errorf("tracked request %+v", r)
	}
	if out := x.say("alice", "/gpu track "+ns+"/llama-eval"); !strings.Contains(out, "already followed as r1") {
		t.Errorf("tracking twice said %q", out)
	}
	if out := x.say("alice", "/gpu track "+ns+"/nope"); !strings.Contains(out, "no Job nope") {
		t.Errorf("tracking a missing Job said %q", out)
	}
}

// TestRestartMidFlow stops gpubot with one request running, one queued,
// and one saved but never created (a crash between persisting and
// creating), then starts it again on the same store: nothing is lost and
// every request has exactly one Job. A fresh store then adopts the
// labelled workloads.
func TestRestartMidFlow(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 1}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	path := filepath.Join(t.TempDir(), "gpubot.db")
	x := s.startBot(path)
	x.say("alice", "/gpu request 8 for 2h")
	x.waitState("r1", records.StateRunning)
	x.say("alice", "/gpu request 8 for 1h")
	if r := x.request("r2"); r.State != records.StateQueued {
		t.Fatalf("r2 is %s", r.State)
	}
	// The crash: r3 is saved as queued, but its Job was never created.
	id, _ := x.db.NextRequestID(s.ctx)
	now := x.request("r2").SubmittedAt
	if err := x.db.PutRequest(s.ctx, records.Request{ID: id, Requester: "alice", Team: "nlp", GPUs: 4, Priority: "normal",
		Duration: 3600e9, State: records.StateQueued, CreatedAt: now, SubmittedAt: now, QueuedAt: now, Template: "default"}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.jobsOf(id)); n != 0 {
		t.Fatalf("%d Jobs for %s before the restart", n, id)
	}
	x.db.Close()

	y := s.startBot(path)
	for _, id := range []string{"r1", "r2", "r3"} {
		s.eventually(id+" has one Job", func() bool { return len(s.jobsOf(id)) == 1 })
	}
	if st := y.request("r1").State; st != records.StateRunning {
		t.Errorf("r1 is %s after the restart, want running", st)
	}
	if st := y.request("r2").State; st != records.StateQueued {
		t.Errorf("r2 is %s after the restart, want queued", st)
	}
	y.svc.Observe(s.ctx, nil) // another sweep changes nothing
	for _, id := range []string{"r1", "r2", "r3"} {
		if n := len(s.jobsOf(id)); n != 1 {
			t.Errorf("%d Jobs for %s after a second sweep", n, id)
		}
	}
	y.db.Close()

	// A lost data directory: the labelled workloads are adopted.
	z := s.startBot(filepath.Join(t.TempDir(), "fresh.db"))
	for _, id := range []string{"r1", "r2", "r3"} {
		r := z.request(id)
		if r.Origin != "adopted" || r.Requester != "alice" || r.Team != "nlp" {
			t.Errorf("adopted %s = %+v", id, r)
		}
	}
	if st := z.request("r1").State; st != records.StateRunning {
		t.Errorf("adopted r1 is %s, want running", st)
	}
	if id, _ := z.db.NextRequestID(s.ctx); id != "r4" {
		t.Errorf("next ID after adoption is %s, want r4", id)
	}
}
