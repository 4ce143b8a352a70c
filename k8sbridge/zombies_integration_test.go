package k8sbridge_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
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
	s := newScenario(t, map[string]int{"h100": 1}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	x := s.startBotWith(filepath.Join(t.TempDir(), "gpubot.db"), zombieSettings(0))
	// A request of 10 seconds (chat takes minutes at least), submitted by
	// the start-up reconciliation as a queued request the cluster lacks.
	now := time.Now()
	r := records.Request{ID: "r1", Requester: "alice", Team: "nlp", GPUs: 8, Priority: "normal", Duration: 10 * time.Second,
		Template: "default", Channel: "#gpu-nlp", Origin: "chat", State: records.StateQueued, CreatedAt: now, SubmittedAt: now, QueuedAt: now}
	if err := x.db.PutRequest(s.ctx, r); err != nil {
		t.Fatal(err)
	}
	x.svc.Observe(s.ctx, nil)
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
