package digest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// The small interfaces the engine reads through. *store.DB satisfies the
// storage ones; the simulated cluster and the Kubernetes bridge satisfy
// Cluster.

// Cluster gives the cluster's current state.
type Cluster interface {
	Snapshot(ctx context.Context) (*allocator.Snapshot, error)
}

// Requests lists requests.
type Requests interface {
	ListRequests(ctx context.Context, keep func(records.Request) bool) ([]records.Request, error)
}

// Usage lists finished GPU use overlapping [from, to).
type Usage interface {
	Usage(ctx context.Context, from, to time.Time) ([]records.UsageRecord, error)
}

// Audit reads the audit log.
type Audit interface {
	// AuditRange returns the entries with from <= At < to.
	AuditRange(ctx context.Context, from, to time.Time) ([]records.AuditEntry, error)
	// FirstAudit returns the log's first entry (when gpubot started).
	FirstAudit(ctx context.Context) (records.AuditEntry, error)
}

// SampleLog keeps the periodic samples of the cluster.
type SampleLog interface {
	AppendSample(ctx context.Context, s records.Sample) error
	Samples(ctx context.Context, from, to time.Time) ([]records.Sample, error)
}

// ZombieLog lists zombies (see records.Zombie) whose waste overlaps
// [from, to): found before to, and still open or resolved after from.
type ZombieLog interface {
	Zombies(ctx context.Context, from, to time.Time) ([]records.Zombie, error)
}

// Sources are what the engine reads. All but Zombies are required.
type Sources struct {
	Cluster  Cluster
	Requests Requests
	Usage    Usage
	Audit    Audit
	Samples  SampleLog
	// Zombies is nil when zombie sweeps are not running; the digest then
	// says so instead of reporting none.
	Zombies ZombieLog
}

// Engine builds digests and reports from gpubot's records and the
// cluster, and provides the scheduled jobs that post them. It satisfies
// commands.Digester.
type Engine struct {
	set     commands.Settings
	src     Sources
	log     *slog.Logger
	horizon time.Duration
	// approvalAge is how long an approval may wait before the digest
	// lists it.
	approvalAge time.Duration

	mu    sync.Mutex
	cache *whatIfs // the capacity what-ifs of the latest snapshot
}

var _ commands.Digester = (*Engine)(nil)

// Option configures an Engine.
type Option func(*Engine)

// WithEngineLogger sets the operator's log. Default: discard.
func WithEngineLogger(l *slog.Logger) Option { return func(e *Engine) { e.log = l } }

// WithEstimateHorizon bounds how far ahead the capacity what-ifs
// simulate, as the service's estimates do. Default 30 days.
func WithEstimateHorizon(d time.Duration) Option { return func(e *Engine) { e.horizon = d } }

// WithApprovalAge sets how old a pending approval must be for the digest
// to list it. Default 2 hours.
func WithApprovalAge(d time.Duration) Option { return func(e *Engine) { e.approvalAge = d } }

// New returns an engine for the organisation in set reading src.
func New(set commands.Settings, src Sources, opts ...Option) (*Engine, error) {
	if src.Cluster == nil || src.Requests == nil || src.Usage == nil || src.Audit == nil || src.Samples == nil {
		return nil, errors.New("digest: New needs Cluster, Requests, Usage, Audit and Samples")
	}
	if set.Location == nil {
		set.Location = time.UTC
	}
	e := &Engine{
		set: set, src: src,
		log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		horizon:     allocator.DefaultHorizon,
		approvalAge: 2 * time.Hour,
	}
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

// SampleEvery is the sampler's schedule: the digest's averages of
// fragmentation and of what the queue waited for come from these samples.
const SampleEvery = "*/10 * * * *"

// Sample records the cluster's state at now: per flavor, measure (a) of
// fragmentation (weighed, as /gpu capacity does, by the last 14 days'
// requests) and the largest request that fits; the pending workloads by
// what they wait for; the requests held for approval. It is the body of
// the sampling job.
func (e *Engine) Sample(ctx context.Context, now time.Time) error {
	snap, err := e.src.Cluster.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("sampling the cluster: %w", err)
	}
	recent, err := e.src.Requests.ListRequests(ctx, func(r records.Request) bool {
		return r.CreatedAt.After(now.Add(-commands.MixWindow)) || r.State == records.StateAwaitingApproval
	})
	if err != nil {
		return fmt.Errorf("sampling the cluster: listing requests: %w", err)
	}
	s := records.Sample{At: now, Waiting: map[string]int{}}
	var mixed []records.Request
	for _, r := range recent {
		if r.State == records.StateAwaitingApproval {
			s.AwaitingApproval++
		}
		if r.CreatedAt.After(now.Add(-commands.MixWindow)) {
			mixed = append(mixed, r)
		}
	}
	elastic := e.elasticTerms()
	for _, f := range snap.Capacity(commands.RequestMix(snap.Cluster(), mixed)) {
		if _, ok := elastic[f.Flavor]; ok {
			continue // bought on demand: not the cluster's fragmentation
		}
		s.Flavors = append(s.Flavors, records.FlavorSample{
			Flavor: f.Flavor, GPUs: f.Total, Free: f.Free, Fragmented: f.Fragmented,
			Largest: f.Largest[allocator.LevelNone], LargestHost: f.Largest[allocator.LevelHost],
			LargestRack: f.Largest[allocator.LevelRack], LargestBlock: f.Largest[allocator.LevelBlock],
		})
	}
	for _, id := range snap.Order() {
		s.Pending++
		s.Waiting[string(snap.Diagnose(id))]++
	}
	if err := e.src.Samples.AppendSample(ctx, s); err != nil {
		return fmt.Errorf("sampling the cluster: %w", err)
	}
	return nil
}

// Posting is one scheduled post: the digest of Team (or of the whole
// cluster for "") into Channel, or the weekly report; its days are
// calendar days in Location (nil: the settings' zone).
type Posting struct {
	Team, Channel string
	Schedule      Schedule
	Location      *time.Location
}

func (p Posting) loc(e *Engine) *time.Location {
	if p.Location != nil {
		return p.Location
	}
	return e.set.Location
}

// JobName is the scheduler's name for the posting: it keys what was
// posted in the store, so it must stay the same across restarts.
func (p Posting) JobName() string {
	scope := "cluster"
	if p.Team != "" {
		scope = "team " + p.Team
	}
	return "digest " + scope + " in " + p.Channel
}

// Register adds the sampler, every digest posting and, unless its
// schedule is zero, the weekly report (whose Team is ignored) to s.
func (e *Engine) Register(s *Scheduler, postings []Posting, report Posting) error {
	sample, err := ParseSchedule(SampleEvery, e.set.Location)
	if err != nil {
		return err
	}
	if err := s.Add("sample cluster", sample, Func(e.Sample)); err != nil {
		return err
	}
	for _, p := range postings {
		if err := s.Add(p.JobName(), p.Schedule, e.digestJob(p)); err != nil {
			return err
		}
	}
	if report.Schedule.IsZero() {
		return nil
	}
	return s.Add("weekly report in "+report.Channel, report.Schedule, e.reportJob(report))
}

func (e *Engine) digestJob(p Posting) Job {
	return func(ctx context.Context, run Run) ([]commands.Output, error) {
		d, err := e.daily(ctx, p.Team, p.loc(e), run.Due, run.Now)
		if err != nil {
			return nil, err
		}
		r := d.reply(e, true)
		if run.Late {
			r.Blocks = append([]commands.Block{lateNote(run, p.loc(e))}, r.Blocks...)
		}
		return []commands.Output{{To: commands.Destination{Kind: commands.ToPost, Channel: p.Channel}, Reply: r}}, nil
	}
}

func (e *Engine) reportJob(p Posting) Job {
	return func(ctx context.Context, run Run) ([]commands.Output, error) {
		w, err := e.weekly(ctx, p.loc(e), run.Due, run.Now)
		if err != nil {
			return nil, err
		}
		r := w.reply(e)
		if run.Late {
			r.Blocks = append([]commands.Block{lateNote(run, p.loc(e))}, r.Blocks...)
		}
		return []commands.Output{{To: commands.Destination{Kind: commands.ToPost, Channel: p.Channel}, Reply: r}}, nil
	}
}

func lateNote(run Run, loc *time.Location) commands.Block {
	text := fmt.Sprintf("Posted late: it was due %s, while gpubot was not running.", when(run.Due, loc))
	if run.Missed > 0 {
		text += fmt.Sprintf(" %s before it passed as well; only this one is posted.", plural(run.Missed, "earlier one", "earlier ones"))
	}
	return commands.Block{Kind: commands.BlockContext, Text: text}
}

// Digest is yesterday's digest as of now, for /gpu digest: of team, or
// of the whole cluster for "".
func (e *Engine) Digest(ctx context.Context, team string, now time.Time) (commands.Reply, error) {
	d, err := e.daily(ctx, team, e.set.Location, now, now)
	if err != nil {
		return commands.Reply{}, err
	}
	return d.reply(e, false), nil
}

// Report is the weekly success report as of now, for /gpu report.
func (e *Engine) Report(ctx context.Context, now time.Time) (commands.Reply, error) {
	w, err := e.weekly(ctx, e.set.Location, now, now)
	if err != nil {
		return commands.Reply{}, err
	}
	return w.reply(e), nil
}

// when is t as the digest shows times: "Tue 09:00".
func when(t time.Time, loc *time.Location) string { return t.In(loc).Format("Mon 15:04") }

// date is t's day: "Mon 30 Nov".
func date(t time.Time, loc *time.Location) string { return t.In(loc).Format("Mon 2 Jan") }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// team returns the settings' team called name.
func (e *Engine) team(name string) (commands.Team, bool) {
	for _, t := range e.set.Teams {
		if t.Name == name {
			return t, true
		}
	}
	return commands.Team{}, false
}

// approvers says who can decide a request of team: its leads, then the
// admins who are not among them.
func (e *Engine) approvers(team string) string {
	var out []string
	leads := map[string]bool{}
	if t, ok := e.team(team); ok {
		for _, l := range t.Leads {
			leads[l] = true
			out = append(out, l+" (lead)")
		}
	}
	for _, p := range e.set.People {
		if p.Admin && !leads[p.Name] {
			out = append(out, p.Name+" (admin)")
		}
	}
	switch len(out) {
	case 0:
		return "nobody (no leads or admins are configured)"
	case 1:
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}
