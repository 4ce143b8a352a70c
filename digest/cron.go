package digest

import (
	"context"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/commands"
)

// RunCron runs the scheduler in real time until ctx ends, with
// robfig/cron driving: each job's schedule is a cron entry, and a tick
// every minute runs retries of failed runs. Every firing calls
// RunDue(clk.Now()) and hands its posts to deliver, so a firing that finds
// nothing due (another entry's run came first, or a restart already
// caught up) does nothing. Call Resume or RunDue once before, so that
// what was missed while gpubot was down is posted at start.
func (s *Scheduler) RunCron(ctx context.Context, clk clock.PassiveClock, deliver func(context.Context, []commands.Output)) {
	logger := cronLogger{s.log}
	c := cron.New(
		cron.WithLocation(time.UTC),
		cron.WithLogger(logger),
		cron.WithChain(cron.Recover(logger), cron.SkipIfStillRunning(logger)),
	)
	fire := cron.FuncJob(func() {
		if outs := s.RunDue(ctx, clk.Now()); len(outs) > 0 {
			deliver(ctx, outs)
		}
	})
	s.mu.Lock()
	for _, e := range s.jobs {
		c.Schedule(e.sched.sched, fire)
	}
	s.mu.Unlock()
	c.Schedule(cron.Every(time.Minute), fire)
	c.Start()
	<-ctx.Done()
	<-c.Stop().Done()
}

// cronLogger is robfig/cron's Logger over slog: its chatter at debug.
type cronLogger struct{ log *slog.Logger }

func (l cronLogger) Info(msg string, kv ...any) { l.log.Debug("cron: "+msg, kv...) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error("cron: "+msg, append([]any{"err", err}, kv...)...)
}
