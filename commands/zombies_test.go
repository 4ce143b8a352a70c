package commands_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
)

// notify is the zombie policy of these tests: the defaults (idle below
// 5 % for 30 minutes, leads after 1 hour, release after another hour),
// telling people only.
var notify = commands.ZombiePolicy{}

// release is notify with zombies.action: release.
var release = commands.ZombiePolicy{Release: true}

// sweepAt moves time to t0+d as the console does, then sweeps.
func (e *env) sweepAt(d time.Duration) []commands.Output {
	e.t.Helper()
	outs := e.advance(t0.Add(d).Sub(e.clock.Now()))
	swept := e.svc.Sweep(e.ctx, e.clock.Now())
	for _, o := range swept {
		if o.To.Kind == "" || o.To.Kind == commands.ToSender {
			e.t.Errorf("the sweep made an output to %q: %+v", o.To.Kind, o)
		}
	}
	// Nor does it keep one in the outbox, where it would wait for ever
	// (and be replayed after a restart to no one).
	kept, err := e.db.Outbox(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range kept {
		o, err := commands.DecodeOutput(m.Message)
		if err != nil {
			e.t.Fatal(err)
		}
		if o.To.Kind == commands.ToSender && o.To.User == "" {
			e.t.Errorf("the outbox keeps a private reply to no one: %q", o.Reply.Text)
		}
	}
	return append(outs, swept...)
}

// idle gives request id's simulated GPUs a utilization of pct percent.
func (e *env) use(id string, pct float64) {
	e.t.Helper()
	if err := e.sim.SetProfile(e.ctx, id, simcluster.Profile{GPUUtilization: ptr.To(pct)}); err != nil {
		e.t.Fatal(err)
	}
}

// zombies lists every zombie found so far.
func (e *env) zombies() []records.Zombie {
	e.t.Helper()
	zs, err := e.db.Zombies(e.ctx, t0.AddDate(-1, 0, 0), t0.AddDate(1, 0, 0))
	if err != nil {
		e.t.Fatal(err)
	}
	return zs
}

// zombie returns the zombie with the given ID.
func (e *env) zombie(id string) records.Zombie {
	e.t.Helper()
	z, err := e.db.GetZombie(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return z
}

// TestZombieIdleNotify follows idle GPUs under the notify policy: not
// judged before the window is covered, the owner asked (direct message
// and thread, with Still using it / Release), the lead told an hour
// later, nothing released; then the lead presses Release.
func TestZombieIdleNotify(t *testing.T) {
	e := newEnv(t, parse(t, small), withZombies(notify))
	e.do("alice", "request 8xh100 for 6h")
	e.do("dave", "request 8xh100 for 6h")
	e.use("r1", 1)

	if outs := e.sweepAt(20 * time.Minute); len(outs) != 0 {
		t.Fatalf("a sweep before the idle window is covered said:\n%s", show(outs))
	}
	outs := e.sweepAt(40 * time.Minute)
	diff(t, "where the prompt goes", []string{"person alice", "thread r1"}, dests(outs))
	check(t, outs,
		want{"person alice", "Your request r1 (8× h100, nlp) holds 8 GPUs but looks unused: its GPUs have been idle since 08:10: the busiest was at 1% (below 5%; simulated). Are you still using it? If nobody answers, bob is told at 09:40."},
		want{"thread r1", "Zombie check z1: its GPUs have been idle since 08:10"},
		want{"thread r1", "Asked alice whether it is still in use."},
	)
	for _, to := range []string{"person alice", "thread r1"} {
		diff(t, "buttons to "+to, []string{"Still using it: keep r1 z1", "Release: release r1"}, buttons(said(outs, to)[0]))
	}
	z := e.zombie("z1")
	diff(t, "z1", records.Zombie{ID: "z1", Request: "r1", Team: "nlp", Owner: "alice", Flavor: "h100", GPUs: 8, Kind: records.ZombieIdle,
		Detail: "its GPUs have been idle since 08:10: the busiest was at 1% (below 5%; simulated)",
		Since:  t0.Add(10 * time.Minute), FoundAt: t0.Add(40 * time.Minute), OwnerToldAt: t0.Add(40 * time.Minute)}, z)

	// Nothing new until the leads' turn; then bob is told, once.
	if outs := e.sweepAt(90 * time.Minute); len(outs) != 0 {
		t.Errorf("a sweep before the leads' turn said:\n%s", show(outs))
	}
	outs = e.sweepAt(100 * time.Minute)
	diff(t, "where the escalation goes", []string{"person bob", "thread r1"}, dests(outs))
	check(t, outs,
		want{"person bob", "r1 (8× h100, nlp) holds 8 GPUs without using them: its GPUs have been idle since 08:10"},
		want{"person bob", "alice did not answer within 1h."},
		want{"thread r1", "Zombie check z1: alice did not answer within 1h. Told bob."},
	)
	checkNot(t, outs, want{"person bob", "releases"}, want{"thread r1", "releases"})
	diff(t, "buttons to bob", []string{"Release: release r1", "Still using it: keep r1 z1"}, buttons(said(outs, "person bob")[0]))
	if got := e.zombie("z1").LeadsToldAt; !got.Equal(t0.Add(100 * time.Minute)) {
		t.Errorf("LeadsToldAt %v", got)
	}
	if outs := e.sweepAt(5 * time.Hour); len(outs) != 0 {
		t.Errorf("the notify policy acted later:\n%s", show(outs))
	}
	if r := e.req("r1"); r.State != records.StateRunning {
		t.Fatalf("r1 is %s under the notify policy", r.State)
	}

	outs = e.press("bob", commands.VerbRelease, "r1", "")
	check(t, outs, want{"thread r1", "Released by bob"})
	z = e.zombie("z1")
	diff(t, "z1's end", []any{records.ZombieReleasedManually, "bob", e.clock.Now()}, []any{z.Outcome, z.ResolvedBy, z.ResolvedAt})
	diff(t, "audit of r1", []string{
		"alice request r1 ok", "gpubot admitted r1 ok", "gpubot zombie-found r1 ok", "gpubot zombie-leads-told r1 ok",
		"bob release r1 ok", "bob zombie-released-manually r1 ok",
	}, e.audit("r1"))
	if n := len(e.zombies()); n != 1 {
		t.Errorf("%d zombies, want 1: dave's busy request is none", n)
	}
}

// TestZombieAutoRelease: with zombies.action: release, an unanswered
// zombie is released by gpubot after both grace periods; its GPUs go to
// the queue and its owner is told.
func TestZombieAutoRelease(t *testing.T) {
	e := newEnv(t, parse(t, small), withZombies(release))
	e.do("alice", "request 8xh100 for 6h")
	e.do("alice", "request 8xh100 for 6h")
	e.do("alice", "request 8xh100 for 2h") // r3 waits: nlp is at its quota
	e.use("r1", 0)
	outs := e.sweepAt(30 * time.Minute)
	check(t, outs, want{"person alice", "If nobody answers, bob is told at 09:30 and gpubot releases it at 10:30."})
	outs = e.sweepAt(90 * time.Minute)
	check(t, outs,
		want{"person bob", "gpubot releases it at 10:30 unless someone answers."},
		want{"thread r1", "Told bob. gpubot releases it at 10:30 unless someone answers."})
	if outs := e.sweepAt(149 * time.Minute); len(outs) != 0 {
		t.Errorf("a sweep before the release said:\n%s", show(outs))
	}
	outs = e.sweepAt(150 * time.Minute)
	check(t, outs,
		want{"thread r1", "Released by gpubot after 2h30m; its 8 GPUs are free again."},
		want{"person alice", "gpubot released your request r1: its GPUs have been idle"},
		want{"thread r3", "Admitted after 2h30m"},
	)
	checkNot(t, outs, want{"sender", ""})
	r := e.req("r1")
	diff(t, "r1", []any{records.StateFinished, "released by gpubot"}, []any{r.State, r.EndReason})
	z := e.zombie("z1")
	diff(t, "z1's end", []any{records.ZombieAutoReleased, "gpubot", t0.Add(150 * time.Minute)}, []any{z.Outcome, z.ResolvedBy, z.ResolvedAt})
	if got := z.GPUHours(t0, t0.Add(24*time.Hour)); got != 8*2.5 {
		t.Errorf("z1 wasted %.1f GPU-hours, want 20 (8 GPUs from 08:00 to 10:30)", got)
	}
	diff(t, "audit of r1", []string{
		"alice request r1 ok", "gpubot admitted r1 ok", "gpubot zombie-found r1 ok", "gpubot zombie-leads-told r1 ok",
		"gpubot release r1 ok", "gpubot zombie-auto-released r1 ok",
	}, e.audit("r1"))
	var used float64
	for _, u := range e.usage() {
		if u.Request == "r1" {
			used += u.GPUHours(t0, t0.Add(24*time.Hour))
		}
	}
	if used != 20 {
		t.Errorf("r1's usage %.1f GPU-hours, want 20", used)
	}
}

// TestZombieKeep: Still using it, pressed by the owner, closes the check
// and silences that kind of waste for keepFor; a stranger's press is
// refused, a second press is answered as stale; after keepFor it is asked
// about again.
func TestZombieKeep(t *testing.T) {
	e := newEnv(t, parse(t, small), withZombies(commands.ZombiePolicy{KeepFor: 6 * time.Hour}))
	e.do("alice", "request 8xh100 for 2d")
	e.use("r1", 2)
	e.sweepAt(30 * time.Minute)

	outs := e.do("alice", "status r1")
	check(t, outs, want{"sender", "Zombie check z1 (open since 08:30): its GPUs have been idle since 08:00"}, want{"sender", "[Still using it]"})
	outs = e.press("dave", commands.VerbKeep, "r1", "z1")
	check(t, outs, want{"sender", "Only alice (whose it is), bob (lead of nlp) or carol (admin) can answer zombie check z1. Nothing was changed."})
	if z := e.zombie("z1"); z.Outcome != records.ZombieOpen {
		t.Fatalf("a stranger's press closed z1: %s", z.Outcome)
	}
	outs = e.press("alice", commands.VerbKeep, "r1", "z1")
	check(t, outs,
		want{"thread r1", "alice says r1 is still in use; gpubot will not ask about its idle GPUs again before 14:30 (zombie check z1 closed)."},
		want{"sender", "Noted: r1 stays."})
	outs = e.do("bob", "keep z1")
	check(t, outs, want{"sender", "Zombie check z1 is already closed (kept by alice, 08:30). Nothing was changed."})
	outs = e.do("alice", "keep r1")
	check(t, outs, want{"sender", "There is no open zombie check for r1"})

	for _, d := range []time.Duration{time.Hour, 3 * time.Hour, 6*time.Hour + 20*time.Minute} {
		if outs := e.sweepAt(d); len(outs) != 0 {
			t.Errorf("asked again %s after it was kept:\n%s", d-30*time.Minute, show(outs))
		}
	}
	outs = e.sweepAt(6*time.Hour + 40*time.Minute)
	check(t, outs, want{"person alice", "Your request r1"}, want{"thread r1", "Zombie check z2"})
	z := e.zombie("z1")
	diff(t, "z1", []any{records.ZombieKept, "alice", t0.Add(30 * time.Minute)}, []any{z.Outcome, z.ResolvedBy, z.ResolvedAt})
	diff(t, "audit of r1", []string{
		"alice request r1 ok", "gpubot admitted r1 ok", "gpubot zombie-found r1 ok",
		"dave keep r1 refused", "alice zombie-kept r1 ok", "bob keep r1 refused", "alice keep r1 invalid", "gpubot zombie-found r1 ok",
	}, e.audit("r1"))
}

// TestZombieRecovered: idle GPUs that get busy again close the check
// before anyone is told more; a utilization source that fails neither
// finds nor clears idle work.
func TestZombieRecovered(t *testing.T) {
	util := &switchable{}
	e := newEnv(t, parse(t, small), withZombies(notify), withUtil(util))
	util.inner = e.sim
	e.do("alice", "request 8xh100 for 6h")
	e.use("r1", 0)
	util.err = errors.New("prometheus is down")
	if outs := e.sweepAt(40 * time.Minute); len(outs) != 0 {
		t.Fatalf("found idle GPUs without utilization figures:\n%s", show(outs))
	}
	if log := e.log.String(); !strings.Contains(log, "prometheus is down") {
		t.Errorf("the failure is not in the log:\n%s", log)
	}
	util.err = nil
	e.sweepAt(50 * time.Minute)
	util.err = errors.New("prometheus is down")
	if outs := e.sweepAt(3 * time.Hour); len(outs) != 0 {
		t.Errorf("escalated or cleared without utilization figures:\n%s", show(outs))
	}
	util.err = nil
	e.use("r1", 64)
	outs := e.sweepAt(3*time.Hour + 10*time.Minute)
	diff(t, "where the recovery goes", []string{"thread r1"}, dests(outs))
	check(t, outs, want{"thread r1", "Its GPUs are in use again (the busiest at 64% in the last 30m); zombie check z1 closed."})
	z := e.zombie("z1")
	diff(t, "z1", []any{records.ZombieRecovered, time.Time{}}, []any{z.Outcome, z.LeadsToldAt})
}

// switchable is a utilization source that can be made to fail.
type switchable struct {
	inner commands.Utilization
	err   error
}

func (s *switchable) GPUUtilization(ctx context.Context, ids []string, window time.Duration, now time.Time) (map[string]commands.Utilized, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.inner.GPUUtilization(ctx, ids, window, now)
}

// TestZombiePodsNeverReady: pods the cluster reports never ready make a
// zombie of that kind (not also an idle one) at the pods-ready timeout;
// when they become ready the check closes.
func TestZombiePodsNeverReady(t *testing.T) {
	e := newEnv(t, parse(t, small), withZombies(notify))
	e.do("alice", "request 8xh100 for 6h")
	if err := e.sim.SetProfile(e.ctx, "r1", simcluster.Profile{PodsNeverReady: true}); err != nil {
		t.Fatal(err)
	}
	if outs := e.sweepAt(5 * time.Minute); len(outs) != 0 {
		t.Errorf("before the timeout:\n%s", show(outs))
	}
	outs := e.sweepAt(10 * time.Minute)
	check(t, outs,
		want{"thread r1", "Its pod is not running: 0 of 1 pods ready; pod gpubot-r1-0: ImagePullBackOff (simulated)."},
		want{"person alice", "Your request r1 (8× h100, nlp) holds 8 GPUs but looks unused: its pods have not all been running since 08:00 (0 of 1 pods ready; pod gpubot-r1-0: ImagePullBackOff (simulated))."},
		want{"thread r1", "Zombie check z1: its pods have not all been running since 08:00"},
	)
	r := e.req("r1")
	diff(t, "r1's pods", []any{t0, "0 of 1 pods ready; pod gpubot-r1-0: ImagePullBackOff (simulated)"}, []any{r.PodsNotReadySince, r.PodsDetail})
	e.sweepAt(2 * time.Hour)
	zs := e.zombies()
	if len(zs) != 1 || zs[0].Kind != records.ZombiePodsNotReady || zs[0].Since != t0 {
		t.Fatalf("zombies %+v, want one of kind pods-not-ready since 08:00", zs)
	}
	// The pods come up: the check closes and the idle window starts then.
	e.svc.Observe(e.ctx, []allocator.Event{{Kind: allocator.EventPodsReady, ID: "r1", At: e.clock.Now(), Pods: 1}})
	outs = e.sweepAt(2*time.Hour + 10*time.Minute)
	check(t, outs, want{"thread r1", "Its pods are all running now; zombie check z1 closed."})
	if outs := e.sweepAt(2*time.Hour + 20*time.Minute); len(outs) != 0 {
		t.Errorf("judged idle before the pods were ready for the window:\n%s", show(outs))
	}
}

// TestZombiePastEndLeftToKueue: work past its end whose workload has a
// maximum execution time is reported, escalated, but never released by
// gpubot even under the release policy; when the cluster stops it at its
// time the check closes as evicted.
func TestZombiePastEndLeftToKueue(t *testing.T) {
	e := newEnv(t, parse(t, small), withZombies(release))
	e.do("alice", "request 8xh100 for 2h")
	// The sweep runs ahead of the cluster: the cluster has not yet stopped
	// r1 at 10:00 when the sweep looks at 10:10.
	outs := e.svc.Sweep(e.ctx, t0.Add(2*time.Hour+10*time.Minute))
	check(t, outs, want{"person alice", "it has run past its requested end (10:00); Kueue's maximum execution time should stop it. Are you still using it? If nobody answers, bob is told at 11:10; gpubot will not release it: Kueue's maximum execution time stops it."})
	outs = e.svc.Sweep(e.ctx, t0.Add(3*time.Hour+10*time.Minute))
	check(t, outs, want{"person bob", "gpubot will not release it: Kueue's maximum execution time stops it."})
	if outs := e.svc.Sweep(e.ctx, t0.Add(9*time.Hour)); len(outs) != 0 {
		t.Errorf("acted on work left to Kueue:\n%s", show(outs))
	}
	for _, op := range e.cluster.applied {
		if op.Kind == commands.OpRemove {
			t.Errorf("gpubot removed %s itself", op.ID)
		}
	}
	outs = e.advance(2 * time.Hour)
	check(t, outs, want{"thread r1", "The cluster stopped it at its maximum execution time; gpubot did not act (zombie check z1 closed)."})
	z := e.zombie("z1")
	diff(t, "z1", []any{records.ZombiePastEnd, records.ZombieEvicted, "kueue", t0.Add(2 * time.Hour)}, []any{z.Kind, z.Outcome, z.ResolvedBy, z.Since})
}

// TestZombieOwnerReleasesOrIsPreempted: the owner's own release and a
// preemption end open checks with the right outcome.
func TestZombieOwnerReleasesOrIsPreempted(t *testing.T) {
	e := newEnv(t, parse(t, small), withZombies(notify))
	e.do("alice", "request 8xh100 for 6h priority low")
	e.do("alice", "request 8xh100 for 6h priority low")
	e.use("r1", 0)
	e.use("r2", 0)
	e.sweepAt(30 * time.Minute)
	check(t, e.press("alice", commands.VerbRelease, "r1", ""), want{"thread r1", "Released by alice"})
	// With nlp at its quota again, bob's normal-priority work preempts r2
	// within nlp.
	e.do("alice", "request 8xh100 for 6h")
	check(t, e.do("bob", "request 8xh100 for 1h"), want{"thread r2", "Preempted by r4"})
	diff(t, "outcomes", []records.ZombieOutcome{records.ZombieReleasedByOwner, records.ZombieEvicted},
		[]records.ZombieOutcome{e.zombie("z1").Outcome, e.zombie("z2").Outcome})
}

// TestZombieWithoutOwner: tracked work whose requester gpubot does not
// know goes straight to the leads and is never released, even under the
// release policy.
func TestZombieWithoutOwner(t *testing.T) {
	e := newEnv(t, parse(t, small), withZombies(release))
	w := allocator.Workload{ID: "r7", Queue: "nlp", GPUs: 8, Priority: 200, Duration: 12 * time.Hour, Created: t0, Admission: &allocator.Admission{At: t0}}
	evs, err := e.sim.Apply(e.ctx, commands.Op{Kind: commands.OpSubmit, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Adopt(e.ctx, []commands.Tracked{{ID: "r7", Requester: "ci-bot", Team: "nlp", GPUs: 8, Priority: "normal",
		Duration: 12 * time.Hour, Origin: "track", Created: t0, Admission: evs[0].Admission}})
	e.use("r7", 0)
	outs := e.sweepAt(30 * time.Minute)
	diff(t, "where it goes", []string{"person bob", "thread r7"}, dests(outs))
	check(t, outs,
		want{"person bob", "r7 (8× h100, nlp) holds 8 GPUs without using them: its GPUs have been idle since 08:00"},
		want{"person bob", "It has no owner gpubot knows. gpubot will not release it: it has no owner gpubot knows."})
	if outs := e.sweepAt(4 * time.Hour); len(outs) != 0 {
		t.Errorf("said more:\n%s", show(outs))
	}
	if r := e.req("r7"); r.State != records.StateRunning {
		t.Errorf("work without an owner is %s (%s) after both grace periods", r.State, r.EndReason)
	}
}

// others is a fixed list of work gpubot does not follow.
type others []commands.Other

func (o others) Others(context.Context) ([]commands.Other, error) { return o, nil }

// fixedUtil reports the same utilization for every ID it has.
type fixedUtil map[string]commands.Utilized

func (f fixedUtil) GPUUtilization(_ context.Context, ids []string, _ time.Duration, _ time.Time) (map[string]commands.Utilized, error) {
	out := map[string]commands.Utilized{}
	for _, id := range ids {
		if u, ok := f[id]; ok {
			out[id] = u
		}
	}
	return out, nil
}

// TestZombieOtherWork: with zombies.scope: all, idle Kueue work gpubot
// does not follow is reported to the team's leads and in its channel,
// with Still in use only; when it is gone the check closes.
func TestZombieOtherWork(t *testing.T) {
	pol := release
	pol.All = true
	list := others{{ID: "k8s/nlp/job-eval-x1", Workload: "nlp/job-eval-x1", Job: "eval", Team: "nlp", Flavor: "h100", GPUs: 4, AdmittedAt: t0}}
	util := fixedUtil{"k8s/nlp/job-eval-x1": {Peak: 0, Coverage: 1, Source: "DCGM via Prometheus"}}
	e := newEnv(t, parse(t, small), withZombies(pol), withOthers(&list), withUtil(util))
	outs := e.sweepAt(30 * time.Minute)
	diff(t, "where it goes", []string{"person bob", "channel #nlp z1"}, dests(outs))
	check(t, outs,
		want{"person bob", "nlp/job-eval-x1 (4× h100, nlp) holds 4 GPUs without using them: its GPUs have been idle since 08:00: the busiest was at 0% (below 5%; DCGM via Prometheus). It has no owner gpubot knows. gpubot will not release it: gpubot does not follow it. /gpu track nlp/job-eval-x1 lets gpubot follow it."},
		want{"channel #nlp z1", "Zombie check z1: nlp/job-eval-x1"})
	diff(t, "buttons", []string{"Still in use: keep z1"}, buttons(said(outs, "person bob")[0]))
	z := e.zombie("z1")
	diff(t, "z1", []any{"", "nlp/job-eval-x1", "", t0.Add(30 * time.Minute)}, []any{z.Request, z.Workload, z.Owner, z.LeadsToldAt})
	if outs := e.sweepAt(5 * time.Hour); len(outs) != 0 {
		t.Errorf("said more about other work:\n%s", show(outs))
	}
	outs = e.press("bob", commands.VerbKeep, "z1", "")
	check(t, outs, want{"thread z1", "bob says nlp/job-eval-x1 is still in use"})
	list[0].Workload, list[0].ID = "nlp/job-eval-x2", "k8s/nlp/job-eval-x2"
	util["k8s/nlp/job-eval-x2"] = commands.Utilized{Peak: 1, Coverage: 1, Source: "DCGM via Prometheus"}
	e.sweepAt(6 * time.Hour)
	list = nil
	outs = e.sweepAt(7 * time.Hour)
	check(t, outs, want{"thread z2", "It is no longer admitted work outside gpubot (it ended, or is tracked now); zombie check z2 closed."})
	diff(t, "outcomes", []records.ZombieOutcome{records.ZombieKept, records.ZombieFinished}, []records.ZombieOutcome{e.zombie("z1").Outcome, e.zombie("z2").Outcome})
	diff(t, "audit of the workload", []string{"gpubot zombie-found nlp/job-eval-x1 ok", "bob zombie-kept nlp/job-eval-x1 ok"}, e.audit("nlp/job-eval-x1"))
}

// TestZombieOtherWorkWithOwner: work gpubot does not follow whose owner
// is known: the owner is told with the leads, nothing is released.
func TestZombieOtherWorkWithOwner(t *testing.T) {
	pol := release
	pol.All = true
	list := others{{ID: "k8s/nlp/job-ci-1", Workload: "nlp/job-ci-1", Job: "ci", Team: "nlp", Owner: "alice", Flavor: "h100", GPUs: 2, AdmittedAt: t0,
		PodsNotReadySince: t0, PodsDetail: "Kueue says PodsReady: Not all pods are ready or succeeded"},
		{ID: "k8s/other/job-x", Workload: "other/job-x", Team: "marketing", GPUs: 8, AdmittedAt: t0}} // not a team of this gpubot
	e := newEnv(t, parse(t, small), withZombies(pol), withOthers(list), withUtil(nil))
	outs := e.sweepAt(20 * time.Minute)
	diff(t, "where it goes", []string{"person bob", "person alice", "channel #nlp z1"}, dests(outs))
	check(t, outs, want{"person alice", "nlp/job-ci-1 (2× h100, nlp) holds 2 GPUs without using them: its pods have not all been running since 08:00 (Kueue says PodsReady: Not all pods are ready or succeeded). Its owner, alice, is told too. gpubot will not release it: gpubot does not follow it."})
	z := e.zombie("z1")
	diff(t, "z1", []any{records.ZombiePodsNotReady, "alice", t0.Add(20 * time.Minute), t0.Add(20 * time.Minute)}, []any{z.Kind, z.Owner, z.OwnerToldAt, z.LeadsToldAt})
	if outs := e.sweepAt(5 * time.Hour); len(outs) != 0 {
		t.Errorf("said more:\n%s", show(outs))
	}
	check(t, e.press("alice", commands.VerbKeep, "z1", ""), want{"sender", "Noted: nlp/job-ci-1 stays."})
}

// TestSweepWithoutZombieStore: a service without WithZombies sweeps
// nothing, and Still using it says so.
func TestSweepWithoutZombieStore(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 6h")
	if outs := e.svc.Sweep(e.ctx, t0.Add(3*time.Hour)); outs != nil {
		t.Errorf("Sweep said %v", show(outs))
	}
	check(t, e.do("alice", "keep r1"), want{"sender", "gpubot is not checking for unused GPUs here"})
}

// TestZombieIdleNeedsCoverage: GPUs that reported for only part of the
// window are not judged idle, and an open idle check whose figures thin
// out is neither cleared nor escalated.
func TestZombieIdleNeedsCoverage(t *testing.T) {
	util := fixedUtil{"r1": {Peak: 0, Coverage: 0.5, Source: "DCGM via Prometheus"}}
	e := newEnv(t, parse(t, small), withZombies(notify), withUtil(util))
	e.do("alice", "request 8xh100 for 6h")
	if outs := e.sweepAt(40 * time.Minute); len(outs) != 0 {
		t.Fatalf("judged idle on half a window of samples:\n%s", show(outs))
	}
	util["r1"] = commands.Utilized{Peak: 0, Coverage: 0.95, Source: "DCGM via Prometheus"}
	check(t, e.sweepAt(50*time.Minute), want{"person alice", "its GPUs have been idle since 08:20"})
	util["r1"] = commands.Utilized{Peak: 90, Coverage: 0.2, Source: "DCGM via Prometheus"}
	if outs := e.sweepAt(3 * time.Hour); len(outs) != 0 {
		t.Errorf("acted on a fifth of a window of samples:\n%s", show(outs))
	}
	if z := e.zombie("z1"); z.Outcome != records.ZombieOpen || !z.LeadsToldAt.IsZero() {
		t.Errorf("z1 %s, leads told %v; want open, not escalated", z.Outcome, z.LeadsToldAt)
	}
}
