package commands_test

import (
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// TestObserveJobEndedOnItsOwn: a workload that ended before its time (a
// real cluster's Job that completed or failed) is not said to have
// reached its requested time: the thread, the card and the record say how
// it ended.
func TestObserveJobEndedOnItsOwn(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 2h")
	e.do("bob", "request 8xh100 for 1h")
	e.clock.SetTime(t0.Add(30 * time.Minute))
	for _, id := range []string{"r1", "r2"} { // gone from the cluster, as a finished Job's workload
		if _, err := e.sim.Apply(e.ctx, commands.Op{Kind: commands.OpRemove, ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	outs := e.svc.Observe(e.ctx, []allocator.Event{
		{Kind: allocator.EventFinished, ID: "r1", At: t0.Add(30 * time.Minute), Detail: "its Job completed"},
		{Kind: allocator.EventFinished, ID: "r2", At: t0.Add(30 * time.Minute), Detail: "its Job failed: BackoffLimitExceeded"},
	})
	check(t, outs,
		want{"thread r1", "Finished: ran 30m and its Job completed; 4 GPU-hours used."},
		want{"card r1", "Finished 08:30: its Job completed after running 30m."},
		want{"thread r2", "Finished: ran 30m and its Job failed: BackoffLimitExceeded; 4 GPU-hours used."},
	)
	checkNot(t, outs, want{"thread r1", "requested time"}, want{"thread r2", "requested time"})
	diff(t, "end reasons", []string{"its Job completed", "its Job failed: BackoffLimitExceeded"}, []string{e.req("r1").EndReason, e.req("r2").EndReason})
}
