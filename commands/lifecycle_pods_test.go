package commands_test

import (
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// TestObservePods: a running request's pods becoming ready is said once
// in its thread; pods not ready are said in the thread and to the
// requester directly; both are audited and change no record. Events about
// requests that are not running, or about an earlier admission, are
// ignored.
func TestObservePods(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 2h")
	e.do("bob", "request 8xh100 for 1h")
	e.do("alice", "request 8xh100 for 1h") // nlp is at its quota: r3 waits
	e.clock.SetTime(t0.Add(2 * time.Minute))
	before := e.req("r1")

	outs := e.svc.Observe(e.ctx, []allocator.Event{{Kind: allocator.EventPodsReady, ID: "r1", At: t0.Add(time.Minute), Pods: 2}})
	diff(t, "destinations of pods ready", []string{"thread r1"}, dests(outs))
	check(t, outs, want{"thread r1", "All 2 pods are running."})

	outs = e.svc.Observe(e.ctx, []allocator.Event{{Kind: allocator.EventPodsReady, ID: "r2", At: t0.Add(time.Minute), Pods: 1}})
	check(t, outs, want{"thread r2", "Its pod is running."})

	e.clock.SetTime(t0.Add(20 * time.Minute))
	detail := "1 of 2 pods ready; pod gpubot-r1-x7k2p: ImagePullBackOff"
	outs = e.svc.Observe(e.ctx, []allocator.Event{{Kind: allocator.EventPodsNotReady, ID: "r1", At: t0.Add(20 * time.Minute), Pods: 2, Detail: detail}})
	diff(t, "destinations of pods not ready", []string{"person alice", "thread r1"}, dests(outs))
	check(t, outs,
		want{"thread r1", "Not all pods are running: " + detail + "."},
		want{"person alice", "Your request r1 holds 8 GPUs, but its pods are not all running: " + detail + ". Check its Job, or free the GPUs with /gpu release r1."},
	)

	// Not running, or about an earlier admission: nothing said.
	outs = e.svc.Observe(e.ctx, []allocator.Event{
		{Kind: allocator.EventPodsNotReady, ID: "r3", At: t0.Add(20 * time.Minute), Pods: 1, Detail: "0 of 1 pods ready"},
		{Kind: allocator.EventPodsReady, ID: "r3", At: t0.Add(20 * time.Minute), Pods: 1},
		{Kind: allocator.EventPodsReady, ID: "r2", At: t0.Add(-time.Minute), Pods: 1},
	})
	checkNot(t, outs, want{"thread r3", "pod"}, want{"person alice", "pod"}, want{"thread r2", "pod"})

	diff(t, "audit of r1", []string{"alice request r1 ok", "gpubot admitted r1 ok", "gpubot pods-ready r1 ok", "gpubot pods-not-ready r1 ok"}, e.audit("r1"))
	diff(t, "audit of r3", []string{"alice request r3 ok"}, e.audit("r3"))
	after := e.req("r1")
	diff(t, "r1's record", []any{records.StateRunning, before.AdmittedAt, before.Nodes}, []any{after.State, after.AdmittedAt, after.Nodes})
	if a := e.auditEntries("r1"); a[len(a)-1].Detail != "Not all pods are running: "+detail+"." {
		t.Errorf("audit detail %q", a[len(a)-1].Detail)
	}
}
