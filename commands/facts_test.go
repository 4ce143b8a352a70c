package commands_test

import (
	"strings"
	"testing"

	"github.com/gpubot/gpubot/commands"
)

// TestReadsShareTheirViewsFacts: /gpu capacity and /gpu usage work out
// what they show from the published view once (a second read of the same
// view computes nothing), answer exactly what a service that never
// computed them answers (a new one over the same store and cluster), and
// a change of the cluster or new estimates (a new view) make them work it
// out again: the answers after a release show it. Usage's lists of
// running and started requests, kept with every change, agree with those
// a new service reads from the store.
func TestReadsShareTheirViewsFacts(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 1h") // r3 queues, with an estimate
	e.do("dave", "request 8xh100 for 2h")  // r4 runs on vision's quota
	if r := e.req("r3"); r.FirstEstimate == nil {
		t.Fatalf("r3 has no first estimate: %+v", r)
	}
	read := func(svc *commands.Service, cmd string) string {
		t.Helper()
		outs := svc.Handle(e.ctx, commands.Input{User: "carol", Text: cmd})
		if len(outs) != 1 {
			t.Fatalf("%s: %d outputs:\n%s", cmd, len(outs), show(outs))
		}
		return text(outs[0].Reply)
	}
	// fresh answers cmd as a service that has computed nothing yet.
	fresh := func(cmd string) string {
		t.Helper()
		svc, err := commands.NewService(e.ctx, e.cfg.Settings(), commands.Deps{
			Cluster: e.cluster, Requests: e.db, IDs: e.db, Commit: e.db, Audit: e.db, Usage: e.db, Clock: e.clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		return read(svc, cmd)
	}
	// same reads cmd twice from one view: the second computes nothing,
	// and both answer what a fresh service does; the facts are computed
	// on the view's snapshot, not a copy of it.
	same := func(cmd string) string {
		t.Helper()
		before, copies := e.svc.FactsComputed(), e.svc.SnapshotCopies()
		first := read(e.svc, cmd)
		computed := e.svc.FactsComputed()
		if computed == before {
			t.Fatalf("%s computed no facts from a new view", cmd)
		}
		if n := e.svc.SnapshotCopies() - copies; n != 0 {
			t.Errorf("%s made %d copies of the cluster to compute its facts, want none", cmd, n)
		}
		if again := read(e.svc, cmd); again != first {
			t.Errorf("%s twice from one view:\n%s\n---\n%s", cmd, first, again)
		}
		if n := e.svc.FactsComputed(); n != computed {
			t.Errorf("%s again from the same view computed %d facts, want 0", cmd, n-computed)
		}
		if want := fresh(cmd); first != want {
			t.Errorf("%s from the view's facts:\n%s\nfrom a service that computed none:\n%s", cmd, first, want)
		}
		return first
	}
	capacity, usage := same("capacity"), same("usage")
	if !strings.Contains(usage, "no queued request has started") {
		t.Fatalf("usage before r3 started:\n%s", usage)
	}

	// r1 ends, r3 starts: a new view (no estimates recomputed meanwhile).
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "release r1"}), want{"card r3", "r3 running"})
	usage2 := same("usage")
	if usage2 == usage || !strings.Contains(usage2, " of 1 queued requests started") {
		t.Errorf("usage after r3 started:\n%s\nbefore:\n%s", usage2, usage)
	}
	// r4 ends: vision's 8 GPUs are free.
	check(t, e.svc.Handle(e.ctx, commands.Input{User: "dave", Text: "release r4"}), want{"sender", "r4"})
	if capacity2 := same("capacity"); capacity2 == capacity {
		t.Errorf("capacity unchanged after r4's release:\n%s", capacity2)
	}
	// New estimates (with the request mix capacity weighs by) are a new
	// view too.
	e.svc.MarkEstimatesStale()
	e.svc.Settle(e.ctx)
	same("capacity")
}
