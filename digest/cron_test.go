package digest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
)

// TestRunCronFiresWithTheRealCron is the one test of the real-time
// wiring: robfig/cron, on the wall clock, fires a job every second and
// RunCron delivers its posts.
func TestRunCronFiresWithTheRealCron(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	db := openStore(t, filepath.Join(t.TempDir(), "gpubot.db"))
	s := digest.NewScheduler(db)
	rec := &recorder{}
	if err := s.Add("tick", mustSchedule(t, "@every 1s", time.UTC), rec.job); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	if outs := s.RunDue(ctx, start); len(outs) != 0 {
		t.Fatalf("the first start posted: %d", len(outs))
	}
	got := make(chan commands.Output, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.RunCron(ctx, clock.RealClock{}, func(_ context.Context, outs []commands.Output) {
			for _, o := range outs {
				got <- o
			}
		})
	}()
	select {
	case o := <-got:
		if o.To.Kind != commands.ToPost {
			t.Errorf("delivered %+v, want a post", o.To)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("robfig/cron did not fire the job within 10 s")
	}
	cancel()
	<-done
	run, err := db.LastRun(context.Background(), "tick")
	if err != nil || run.Baseline || !run.Due.After(start) {
		t.Errorf("recorded run = %+v, %v; want one due after the start", run, err)
	}
}
