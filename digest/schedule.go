package digest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// Schedule says when a job runs: a standard five-field cron spec
// ("0 9 * * 1-5"), or a descriptor (@daily, @every 10m), in a time zone.
type Schedule struct {
	spec  string
	sched cron.Schedule
}

// ErrBadSchedule is wrapped by ParseSchedule's errors.
var ErrBadSchedule = errors.New("not a cron schedule")

// scheduleCheckFrom is where ParseSchedule looks for a first run, so
// that the check does not depend on the clock.
var scheduleCheckFrom = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// ParseSchedule parses a cron spec: minute, hour, day of month, month
// and day of week, as in crontab(5), or a descriptor (@hourly, @daily,
// @weekly, @monthly, @yearly, @every <Go duration>). Times are in loc
// (nil: UTC) unless the spec starts with CRON_TZ=<zone>. A spec that can
// never run (the 31st of February) is refused.
func ParseSchedule(spec string, loc *time.Location) (sch Schedule, err error) {
	if loc == nil {
		loc = time.UTC
	}
	spec = strings.TrimSpace(spec)
	zoned := strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=")
	if zoned && !strings.Contains(spec, " ") {
		// robfig/cron v3.0.1 panics on a zone with nothing after it.
		return Schedule{}, fmt.Errorf("%w: %q has a time zone but no schedule after it", ErrBadSchedule, spec)
	}
	defer func() {
		if r := recover(); r != nil {
			sch, err = Schedule{}, fmt.Errorf("%w: %q: %v", ErrBadSchedule, spec, r)
		}
	}()
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return Schedule{}, fmt.Errorf("%w: %q: %v", ErrBadSchedule, spec, err)
	}
	if ss, ok := s.(*cron.SpecSchedule); ok && !zoned {
		ss.Location = loc
	}
	if s.Next(scheduleCheckFrom).IsZero() {
		return Schedule{}, fmt.Errorf("%w: %q never runs", ErrBadSchedule, spec)
	}
	return Schedule{spec: spec, sched: s}, nil
}

// Next is the first run strictly after t, or the zero time if there is
// none (or for the zero Schedule).
func (s Schedule) Next(t time.Time) time.Time {
	if s.sched == nil {
		return time.Time{}
	}
	return s.sched.Next(t)
}

// String is the spec as written.
func (s Schedule) String() string { return s.spec }

// IsZero reports whether s is the zero Schedule, which never runs.
func (s Schedule) IsZero() bool { return s.sched == nil }

// Run is one run of a scheduled job.
type Run struct {
	Job string
	// Due is the scheduled time the run is for; Now is when it runs.
	Due, Now time.Time
	// Late says Now is more than the scheduler's late threshold past Due:
	// gpubot was not running at Due.
	Late bool
	// Missed counts earlier scheduled times that passed while gpubot was
	// not running; only the latest is run.
	Missed int
}

// Job is a scheduled job's body. It returns what to post (delivered by
// the caller of RunDue) or an error, after which the run is retried.
type Job func(ctx context.Context, run Run) ([]commands.Output, error)

// JobWrapper decorates a Job (robfig/cron's model).
type JobWrapper func(Job) Job

// Recover turns a panic in a job into an error (after which the run is
// retried), logged with its stack. Add wraps every job in it.
func Recover(log *slog.Logger) JobWrapper {
	return func(job Job) Job {
		return func(ctx context.Context, run Run) (outs []commands.Output, err error) {
			defer func() {
				if v := recover(); v != nil {
					log.Error("panic in scheduled job", "job", run.Job, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
					outs, err = nil, fmt.Errorf("panic: %v", v)
				}
			}()
			return job(ctx, run)
		}
	}
}

// Func makes a Job of a plain body of now that posts nothing.
func Func(f func(ctx context.Context, now time.Time) error) Job {
	return func(ctx context.Context, run Run) ([]commands.Output, error) { return nil, f(ctx, run.Now) }
}

// Outputs makes a Job of a body of now that returns what to post and
// cannot fail (a sweep that logs its own errors).
func Outputs(f func(ctx context.Context, now time.Time) []commands.Output) Job {
	return func(ctx context.Context, run Run) ([]commands.Output, error) { return f(ctx, run.Now), nil }
}

// RunLog keeps each job's last completed run. *store.DB satisfies it.
// LastRun's error wraps records.ErrNotFound for a job with no run
// recorded; any other error is a failure to read it.
type RunLog interface {
	LastRun(ctx context.Context, job string) (records.JobRun, error)
	PutRun(ctx context.Context, run records.JobRun) error
}

// Scheduler runs named jobs on their schedules, as plain calls of
// RunDue(now): the console and the simulated cluster's driver call it
// when their clock reaches Next; RunCron calls it in real time. It is
// safe for concurrent use; runs are serialised.
type Scheduler struct {
	runs      RunLog
	commit    Committer
	log       *slog.Logger
	lateAfter time.Duration
	retry     time.Duration
	attempts  int

	mu      sync.Mutex
	jobs    []*entry
	resumed bool
}

type entry struct {
	name   string
	sched  Schedule
	job    Job
	last   time.Time // Due of the last completed run (or the baseline)
	retry  time.Time // non-zero: a failed run is retried then
	failed int       // failed attempts of the current run
}

// SchedulerOption configures a Scheduler.
type SchedulerOption func(*Scheduler)

// WithLogger sets the operator's log. Default: discard.
func WithLogger(l *slog.Logger) SchedulerOption { return func(s *Scheduler) { s.log = l } }

// WithLateAfter sets how long after its due time a run counts as late.
// Default 5 minutes.
func WithLateAfter(d time.Duration) SchedulerOption { return func(s *Scheduler) { s.lateAfter = d } }

// WithRetry sets how long after a failed run it is tried again, and how
// many attempts a run gets before its period is given up (logged and
// recorded as failed). Default 5 minutes and 3 attempts.
func WithRetry(after time.Duration, attempts int) SchedulerOption {
	return func(s *Scheduler) { s.retry, s.attempts = after, max(1, attempts) }
}

// Committer makes a run's record and its posts durable together, the
// posts in an outbox until delivered (commands.Committer; *store.DB
// satisfies it). It returns the posts' outbox sequence numbers.
type Committer interface {
	Commit(ctx context.Context, w records.Writes, at time.Time) ([]uint64, error)
}

// WithCommitter records each run together with its posts, in one
// transaction with an outbox: a digest is posted exactly once, across
// crashes (the outbox delivers it after a restart). Default: the run is
// recorded first (RunLog.PutRun), so a crash before its posts go out
// loses them rather than posting twice.
func WithCommitter(c Committer) SchedulerOption { return func(s *Scheduler) { s.commit = c } }

// NewScheduler returns a scheduler that records runs in runs.
func NewScheduler(runs RunLog, opts ...SchedulerOption) *Scheduler {
	s := &Scheduler{
		runs:      runs,
		log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		lateAfter: 5 * time.Minute, retry: 5 * time.Minute, attempts: 3,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Add registers job under name (unique; it keys the job's record) to run
// on sch. Add jobs before the first Resume, Next or RunDue.
func (s *Scheduler) Add(name string, sch Schedule, job Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case name == "":
		return errors.New("adding a scheduled job: no name")
	case sch.IsZero():
		return fmt.Errorf("adding scheduled job %s: no schedule", name)
	case job == nil:
		return fmt.Errorf("adding scheduled job %s: no body", name)
	case s.resumed:
		return fmt.Errorf("adding scheduled job %s: the scheduler has started", name)
	}
	for _, e := range s.jobs {
		if e.name == name {
			return fmt.Errorf("adding scheduled job %s: a job of that name exists", name)
		}
	}
	s.jobs = append(s.jobs, &entry{name: name, sched: sch, job: Recover(s.log)(job)})
	return nil
}

// Jobs lists the registered jobs' names and schedules, in order.
func (s *Scheduler) Jobs() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, e := range s.jobs {
		out[e.name] = e.sched.String()
	}
	return out
}

// Resume reads each job's last run from the RunLog. A job with none
// (new, or never run) gets a baseline at now, recorded, so that nothing
// before now is due for it, while anything after now is, even across a
// restart. RunDue and Next resume on their first call.
func (s *Scheduler) Resume(ctx context.Context, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resume(ctx, now)
}

func (s *Scheduler) resume(ctx context.Context, now time.Time) error {
	if s.resumed {
		return nil
	}
	for _, e := range s.jobs {
		run, err := s.runs.LastRun(ctx, e.name)
		switch {
		case err == nil:
			e.last = run.Due
		case errors.Is(err, records.ErrNotFound):
			base := records.JobRun{Job: e.name, Due: now, At: now, Baseline: true}
			if err := s.runs.PutRun(ctx, base); err != nil {
				return fmt.Errorf("recording the start of scheduled job %s: %w", e.name, err)
			}
			e.last = now
		default:
			return fmt.Errorf("resuming scheduled job %s: %w", e.name, err)
		}
	}
	s.resumed = true
	return nil
}

// Next is the earliest time a job is due (after its last run, or a
// failed run's retry), or the zero time if none ever is. A time at or
// before now means a job is overdue: RunDue runs it.
func (s *Scheduler) Next() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for _, e := range s.jobs {
		t := e.next()
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

func (e *entry) next() time.Time {
	if !e.retry.IsZero() {
		return e.retry
	}
	return e.sched.Next(e.last)
}

// RunDue runs every job that is due at now, in the order added, and
// returns what they post. A job whose scheduled times passed while gpubot
// was not running runs once, for the latest of them, marked Late. Each
// completed run is recorded before RunDue returns: a job never runs twice
// for one due time, across restarts. A failed run is logged and retried
// after the retry delay; after the last attempt its due time is given up
// (logged as an error and recorded as failed).
func (s *Scheduler) RunDue(ctx context.Context, now time.Time) []commands.Output {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.resume(ctx, now); err != nil {
		s.log.Error("resuming scheduled jobs", "err", err)
		return nil
	}
	var outs []commands.Output
	for _, e := range s.jobs {
		if ctx.Err() != nil {
			break
		}
		outs = append(outs, s.runEntry(ctx, e, now)...)
	}
	return outs
}

// runEntry runs e if it is due at now.
func (s *Scheduler) runEntry(ctx context.Context, e *entry, now time.Time) []commands.Output {
	if !e.retry.IsZero() && now.Before(e.retry) {
		return nil
	}
	due := e.sched.Next(e.last)
	if due.IsZero() || due.After(now) {
		e.retry = time.Time{}
		return nil
	}
	missed := 0
	for n := e.sched.Next(due); !n.IsZero() && !n.After(now); n = e.sched.Next(n) {
		due = n
		missed++
	}
	run := Run{Job: e.name, Due: due, Now: now, Late: now.Sub(due) > s.lateAfter, Missed: missed}
	if missed > 0 {
		s.log.Warn("scheduled runs missed (gpubot was not running, or its clock jumped); running the latest only", "job", e.name, "missed", missed, "due", due)
	}
	outs, err := e.job(ctx, run)
	rec := records.JobRun{Job: e.name, Due: due, At: now, Late: run.Late}
	if err != nil {
		e.failed++
		if e.failed < s.attempts {
			e.retry = now.Add(s.retry)
			s.log.Warn("scheduled job failed; retrying", "job", e.name, "due", due, "attempt", e.failed, "retryAt", e.retry, "err", err)
			return nil
		}
		s.log.Error("scheduled job failed; giving up this run", "job", e.name, "due", due, "attempts", e.failed, "err", err)
		rec.Failed, outs = true, nil
	}
	e.failed, e.retry = 0, time.Time{}
	if s.commit != nil {
		if err := s.commitRun(ctx, rec, outs); err != nil {
			// Nothing was recorded: the run is retried as a failed one.
			e.failed++
			e.retry = now.Add(s.retry)
			s.log.Error("recording a scheduled run with its posts failed; retrying", "job", e.name, "due", due, "err", err)
			return nil
		}
		e.last = due
		if run.Late {
			s.log.Info("scheduled job ran late", "job", e.name, "due", due, "at", now)
		}
		return outs
	}
	if err := s.runs.PutRun(ctx, rec); err != nil {
		// Not posting is better than posting twice after a restart.
		s.log.Error("recording a scheduled run failed; its posts are dropped so that they cannot repeat", "job", e.name, "due", due, "err", err)
		e.last = due
		return nil
	}
	e.last = due
	if run.Late {
		s.log.Info("scheduled job ran late", "job", e.name, "due", due, "at", now)
	}
	return outs
}

// commitRun records rec with outs in one transaction: the posts that
// are not in the outbox yet (Seq 0; a job's body may have committed its
// own, as the zombie sweep does) go there, and get their Seq.
func (s *Scheduler) commitRun(ctx context.Context, rec records.JobRun, outs []commands.Output) error {
	w := records.Writes{Runs: []records.JobRun{rec}}
	var fresh []int
	for i, o := range outs {
		if o.Seq != 0 {
			continue
		}
		data, err := commands.EncodeOutput(o)
		if err != nil {
			return err
		}
		w.Outbox = append(w.Outbox, data)
		fresh = append(fresh, i)
	}
	seqs, err := s.commit.Commit(ctx, w, rec.At)
	if err != nil {
		return err
	}
	for k, i := range fresh {
		outs[i].Seq = seqs[k]
	}
	return nil
}
