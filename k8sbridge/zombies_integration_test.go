package k8sbridge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/gpumetrics"
	"github.com/gpubot/gpubot/internal/promenv"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

// zombieSettings is settings() with the zombie sweep on: the release
// policy, a minute of grace each.
func zombieSettings(podsReady time.Duration) commands.Settings {
	set := settings()
	set.Zombies = commands.ZombiePolicy{PodsReadyTimeout: podsReady, LeadsGrace: time.Minute, ReleaseGrace: time.Minute, Release: true}
	return set
}

func saidTo(outs []commands.Output, person string) string {
	var b strings.Builder
	for _, o := range outs {
		if o.To.Kind == commands.ToPerson && o.To.Person == person {
			b.WriteString(o.Reply.Text + "\n")
		}
	}
	return b.String()
}

func (x *bot) zombie(id string) records.Zombie {
	x.s.t.Helper()
	z, err := x.db.GetZombie(x.s.ctx, id)
	if err != nil {
		x.s.t.Fatal(err)
	}
	return z
}

// TestZombiePodsNeverReadyOnKwok: Kueue admits a request whose pods
// kube-scheduler cannot place; the bridge reports them not ready after
// the timeout, the sweep finds the zombie, tells alice, then bob, and
// under the release policy releases it: the Job goes from the cluster.
func TestZombiePodsNeverReadyOnKwok(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 0}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 16}}})
	s.fakeNodes("h100", 1, 2)
	s.cfg.PodsReadyTimeout = 2 * time.Second
	nowhere := []byte(k8sbridge.DefaultJobTemplate + "      nodeSelector:\n        gpubot.io/nowhere: \"true\"\n")
	s.cfg.Templates = map[string][]byte{"default": nowhere}
	x := s.startBotWith(filepath.Join(t.TempDir(), "gpubot.db"), zombieSettings(2*time.Second))
	x.say("alice", "/gpu request 8 for 2h")
	x.waitState("r1", records.StateRunning)
	s.eventually("r1's pods reported not ready", func() bool { return !x.request("r1").PodsNotReadySince.IsZero() })

	now := time.Now()
	outs := x.svc.Sweep(s.ctx, now)
	if got := saidTo(outs, "alice"); !strings.Contains(got, "Your request r1") || !strings.Contains(got, "its pods have not all been running") || !strings.Contains(got, "Unschedulable") {
		t.Fatalf("alice was told %q", got)
	}
	z := x.zombie("z1")
	if z.Kind != records.ZombiePodsNotReady || z.Request != "r1" || !z.Since.Equal(x.request("r1").AdmittedAt) {
		t.Errorf("z1 = %+v", z)
	}
	if got := saidTo(x.svc.Sweep(s.ctx, now.Add(time.Minute)), "bob"); !strings.Contains(got, "alice did not answer within 1m") {
		t.Errorf("bob was told %q", got)
	}
	x.svc.Sweep(s.ctx, now.Add(2*time.Minute))
	if r := x.request("r1"); r.State != records.StateFinished || r.EndReason != "released by gpubot" {
		t.Fatalf("r1 is %s (%s), want released by gpubot", r.State, r.EndReason)
	}
	if z := x.zombie("z1"); z.Outcome != records.ZombieAutoReleased {
		t.Errorf("z1 outcome %q", z.Outcome)
	}
	s.eventually("r1's Job deleted", func() bool { return len(s.jobsOf("r1")) == 0 })
}

// TestZombiePastEndEvictedByKueue: a request past its end, whose Job has
// Kueue's maximum execution time, is reported but not released by gpubot
// even when the release policy's time comes; Kueue stops it and the
// zombie ends as evicted.
func TestZombiePastEndEvictedByKueue(t *testing.T) {
	// No nodes: Kueue admits by quota (the flavor has no Topology) and
	// the pods never run, so the Job cannot complete before Kueue's
	// maximum execution time stops it.
	s := newScenario(t, map[string]int{"h100": 0}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	// A request of 10 seconds (chat takes minutes at least), saved by an
	// earlier run and submitted by the start-up reconciliation as a
	// queued request the cluster lacks.
	path := filepath.Join(t.TempDir(), "gpubot.db")
	now := time.Now()
	r := records.Request{ID: "r1", Requester: "alice", Team: "nlp", GPUs: 8, Priority: "normal", Duration: 10 * time.Second,
		Template: "default", Channel: "#gpu-nlp", Origin: "chat", State: records.StateQueued, CreatedAt: now, SubmittedAt: now, QueuedAt: now}
	earlier, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := earlier.PutRequest(s.ctx, r); err != nil {
		t.Fatal(err)
	}
	earlier.Close()
	x := s.startBotWith(path, zombieSettings(0))
	x.waitState("r1", records.StateRunning)
	end := x.request("r1").AdmittedAt.Add(10 * time.Second)

	// The sweep runs ahead of the cluster, as if Kueue were late.
	at := end.Add(6 * time.Minute)
	outs := x.svc.Sweep(s.ctx, at)
	if got := saidTo(outs, "alice"); !strings.Contains(got, "past its requested end") || !strings.Contains(got, "gpubot will not release it: Kueue's maximum execution time stops it") {
		t.Fatalf("alice was told %q", got)
	}
	x.svc.Sweep(s.ctx, at.Add(time.Minute))
	x.svc.Sweep(s.ctx, at.Add(3*time.Minute))
	if st := x.request("r1").State; st == records.StateFinished && x.request("r1").EndReason == "released by gpubot" {
		t.Fatal("gpubot released work Kueue stops itself")
	}
	x.waitState("r1", records.StateFinished)
	if got := x.request("r1").EndReason; got != "reached its requested time" {
		t.Errorf("r1 ended: %q, want its time up (Kueue's maximum execution time)", got)
	}
	// The request's end is saved before its zombie check is closed.
	s.eventually("z1 closed", func() bool { return x.zombie("z1").Outcome != records.ZombieOpen })
	z := x.zombie("z1")
	if z.Kind != records.ZombiePastEnd || z.Outcome != records.ZombieEvicted || z.ResolvedBy != "kueue" {
		t.Errorf("z1 = %+v, want past-end, evicted by kueue", z)
	}
	es, err := x.db.Audit(s.ctx, store.AuditQuery{Target: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Actor == "gpubot" && (e.Action == "release" || e.Action == "cancel") {
			t.Errorf("gpubot acted: %+v", e)
		}
	}
	if n := len(s.jobsOf("r1")); n != 1 {
		t.Errorf("%d Jobs of r1 after Kueue stopped it, want its Job left as Kueue left it", n)
	}
}

// TestZombieIdleGPUsFromPrometheus: the whole idle-GPU path with real
// parts. A request runs on kwok; an exporter in the test reports its
// pod's GPUs (by the pod's real name and namespace) in the DCGM
// exporter's format as idle; a real Prometheus scrapes it; the sweep asks
// through gpumetrics, with the bridge saying which Job's pods to look at,
// and finds the idle zombie.
func TestZombieIdleGPUsFromPrometheus(t *testing.T) {
	promenv.Bin(t) // skips first with GPUBOT_SKIP_PROMETHEUS=1
	s := newScenario(t, map[string]int{"h100": 0}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 16}}})
	s.fakeNodes("h100", 1, 2)
	s.cfg.Templates = map[string][]byte{"default": []byte(k8sbridge.DefaultJobTemplate + `    metadata:
      annotations:
        pod-complete.stage.kwok.x-k8s.io/delay: 1h
        pod-complete.stage.kwok.x-k8s.io/jitter-delay: 1h
`)}
	var mu sync.Mutex
	var metrics string
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(w, "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"+metrics)
	}))
	defer exporter.Close()
	prom := promenv.Start(t, promenv.Options{Targets: []string{strings.TrimPrefix(exporter.URL, "http://")}, ScrapeInterval: 250 * time.Millisecond})
	set := zombieSettings(time.Minute)
	set.Zombies.IdleWindow = 4 * time.Second
	x := s.startBotWith(filepath.Join(t.TempDir(), "gpubot.db"), set, func(b *k8sbridge.Bridge) commands.Option {
		src, err := gpumetrics.New(prom.URL, b)
		if err != nil {
			t.Fatal(err)
		}
		return commands.WithUtilization(src)
	})
	x.say("alice", "/gpu request 8 for 2h")
	x.waitState("r1", records.StateRunning)
	s.eventually("r1's pods reported ready", func() bool { return !x.request("r1").PodsReadyAt.IsZero() })
	pods, err := s.kube.CoreV1().Pods(s.n("nlp")).List(s.ctx, metav1.ListOptions{LabelSelector: k8sbridge.LabelRequest + "=r1"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("r1's pods: %d, %v", len(pods.Items), err)
	}
	mu.Lock()
	for i, p := range pods.Items {
		for g := range 8 {
			metrics += fmt.Sprintf("DCGM_FI_DEV_GPU_UTIL{gpu=\"%d\",UUID=\"GPU-%d-%d\",device=\"nvidia%d\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=%q,container=\"main\",namespace=%q,pod=%q} %d\n",
				g, i, g, g, p.Spec.NodeName, p.Namespace, p.Name, g%3) // 0–2 %
		}
	}
	mu.Unlock()
	var outs []commands.Output
	s.eventually("the sweep to find r1's GPUs idle", func() bool {
		outs = x.svc.Sweep(s.ctx, time.Now())
		return len(outs) > 0
	})
	if got := saidTo(outs, "alice"); !strings.Contains(got, "its GPUs have been idle since") || !strings.Contains(got, "the busiest was at 2% (below 5%; DCGM via Prometheus)") {
		t.Errorf("alice was told %q", got)
	}
	if z := x.zombie("z1"); z.Kind != records.ZombieIdle || z.Request != "r1" || z.GPUs != 8 {
		t.Errorf("z1 = %+v", z)
	}
}
