package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// Deps are the service's required collaborators.
type Deps struct {
	Cluster  Cluster
	Requests RequestStore
	IDs      IDSource
	Audit    AuditLog
	Usage    UsageLog
	// Commit, if set, writes each decision's records, the simulated
	// cluster's state and the messages it means to send in one
	// transaction, with an outbox (batch.go). Without it the records are
	// written one by one and no output is kept.
	Commit Committer
	// Clock tells the time (k8s.io/utils/clock); tests pass a fake one.
	Clock clock.PassiveClock
}

// Option configures a Service.
type Option func(*Service)

// WithLogger sets the operator's log. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithDigests answers /gpu digest and /gpu report with d. Default: none
// (they answer that digests are not set up).
func WithDigests(d Digester) Option { return func(s *Service) { s.digests = d } }

// WithEstimateHorizon bounds how far ahead estimates simulate. Default 30 days.
func WithEstimateHorizon(d time.Duration) Option {
	return func(s *Service) { s.horizon = d }
}

// WithZombies keeps zombie findings in z and turns on the zombie sweep
// (Sweep). Default: none; Sweep does nothing.
func WithZombies(z ZombieStore) Option { return func(s *Service) { s.zombies = z } }

// WithUtilization lets the sweep find idle GPUs (zombies of kind idle).
// Default: none.
func WithUtilization(u Utilization) Option { return func(s *Service) { s.util = u } }

// WithOthers lets the sweep see admitted work gpubot does not follow,
// for zombies.scope: all. Default: none.
func WithOthers(o Others) Option { return func(s *Service) { s.others = o } }

// Service turns what people type and press, and what the cluster does,
// into decisions, stored state and replies. It is safe for concurrent use:
// reads never wait for writes, and writes for different requests do not
// wait for each other's API calls (concurrency.go says how).
type Service struct {
	set     Settings
	deps    Deps
	log     *slog.Logger
	horizon time.Duration
	tracker Tracker            // optional; nil refuses /gpu track
	kueue   KueueView          // optional; nil on the simulated cluster
	zombies ZombieStore        // optional; nil makes Sweep a no-op
	util    Utilization        // optional; nil: no idle detection
	others  Others             // optional; nil: zombies.scope all sweeps gpubot's work only
	digests Digester           // optional; nil answers that digests are off
	watch   clock.PassiveClock // measures how long a command took, for the log
	engine  EstimateEngine
	stepper Stepper // the cluster, when it is one (simulated)
	// provisioning is optional; nil: provisioning checks are not followed.
	provisioning Provisioning
	// early, if set, sends what a call committed as it commits it
	// (SetOrderedDelivery).
	early atomic.Pointer[func(context.Context, []Output)]
	// spotSims counts the spot offers' simulations (for tests).
	spotSims atomic.Uint64
	// copies counts the copies of the cluster's state the service made
	// or asked the cluster for (clone, snapshot; for tests).
	copies atomic.Uint64
	// bares counts the empty snapshots the offers' checks made (for
	// tests; see bareCluster).
	bares atomic.Uint64
	// hypos shares what-ifs' simulations (hypothetical.go).
	hypos hypotheticals
	// background counts the refreshers running (RunEstimates), refreshing
	// the refreshes under way or waiting to start, and ownEstimates the
	// request commands computing their own estimate (request.go).
	background, refreshing, ownEstimates atomic.Int32
	// bg is the running refresher's (ownestimate.go); ownWait bounds a
	// request command's wait for its own estimate, ownLate counts those
	// that missed it and lateDone those of them completed since.
	bg                atomic.Pointer[refresher]
	ownWait           time.Duration
	ownLate, lateDone atomic.Uint64
	// factsComputed counts the views' facts computed (facts.go).
	factsComputed atomic.Uint64
	// estimateOne is one workload's estimate (allocator.EstimateFor; tests
	// hold it).
	estimateOne func(*allocator.Snapshot, string, allocator.EstimateOptions) allocator.Estimate

	// Set once by NewService, then only read.
	vocab   Vocabulary
	cluster *allocator.Cluster
	people  map[string]*Person // by lower-case name and by chat ID
	teams   map[string]*Team
	prio    map[string]int32
	handle  stage // the chain every input goes through

	wmu sync.Mutex // the write section
	// unshown holds, by request, when reconciling last resubmitted a
	// queued request that the cluster took but still does not show in its
	// snapshot (its model cannot place it); it is resubmitted at most
	// every resubmitEvery. Guarded by wmu.
	unshown   map[string]time.Time
	reqs      keyLocks   // one per request being operated on
	emu       sync.Mutex // one estimate refresh at a time
	estimates staleness
	zmu       sync.Mutex // one zombie sweep at a time
	cache     requestCache
	vmu       sync.Mutex // publishing views
	cur       atomic.Pointer[view]

	// own is the default estimate engine (nil if replaced), whose
	// checkpoints each refresh turns on or off; seen is the changes
	// counted at the last refresh. Guarded by emu.
	own  *allocator.Estimator
	seen uint64
}

// NewService checks the settings against the cluster and returns a service.
func NewService(ctx context.Context, set Settings, deps Deps, opts ...Option) (*Service, error) {
	if deps.Cluster == nil || deps.Requests == nil || deps.IDs == nil || deps.Audit == nil || deps.Usage == nil || deps.Clock == nil {
		return nil, errors.New("commands: NewService needs every dependency in Deps")
	}
	own := allocator.NewEstimator()
	s := &Service{
		set:         set,
		deps:        deps,
		log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		horizon:     30 * 24 * time.Hour,
		people:      map[string]*Person{},
		teams:       map[string]*Team{},
		prio:        map[string]int32{},
		engine:      own,
		own:         own,
		ownWait:     DefaultOwnEstimateWait,
		estimateOne: allocator.EstimateFor,
		watch:       clock.RealClock{},
		estimates:   newStaleness(),
	}
	for _, o := range opts {
		o(s)
	}
	if s.engine != EstimateEngine(own) {
		s.own = nil
	}
	s.stepper, _ = deps.Cluster.(Stepper)
	if s.set.EndWarning <= 0 {
		s.set.EndWarning = 15 * time.Minute
	}
	if s.set.Location == nil {
		s.set.Location = time.UTC
	}
	s.set.Zombies = s.set.Zombies.withDefaults()
	for i := range s.set.People {
		p := &s.set.People[i]
		s.people[strings.ToLower(p.Name)] = p
		if p.ChatID != "" {
			s.people[p.ChatID] = p
		}
	}
	for i := range s.set.Teams {
		t := &s.set.Teams[i]
		s.teams[t.Name] = t
	}
	for _, p := range s.set.Priorities {
		s.prio[p.Name] = p.Value
	}
	if len(s.set.Priorities) == 0 {
		return nil, errors.New("commands: settings define no priorities")
	}
	if s.set.DefaultPriority == "" {
		s.set.DefaultPriority = s.set.Priorities[0].Name
	}
	s.cache.marked = s.onElastic
	if err := s.cache.load(ctx, deps.Requests); err != nil {
		return nil, err
	}
	snap, err := s.viewSnapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	s.cluster = snap.Cluster()
	s.cur.Store(&view{snap: snap, memo: s.newFacts()})
	s.estimates.changed()
	s.vocab = Vocabulary{Teams: teamNames(s.set.Teams), Templates: s.set.Templates}
	for _, f := range s.cluster.Flavors {
		s.vocab.Flavors = append(s.vocab.Flavors, f.Name)
	}
	for _, p := range s.set.Priorities {
		s.vocab.Priorities = append(s.vocab.Priorities, p.Name)
	}
	for _, t := range s.set.Teams {
		if _, ok := s.queue(t.Name); !ok {
			return nil, fmt.Errorf("commands: team %s has no queue in the cluster", t.Name)
		}
	}
	s.handle = chain(s.dispatch, s.logged, s.recovering("handling input", answerPanic), s.identify, s.understand, s.locking, s.authorize, s.audited)
	return s, nil
}

// Vocabulary returns the words the parser accepts (flavors, teams, …).
func (s *Service) Vocabulary() Vocabulary { return s.vocab }

// Settings returns the settings the service runs with.
func (s *Service) Settings() Settings { return s.set }

func teamNames(ts []Team) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func (s *Service) queue(name string) (allocator.Queue, bool) {
	for _, q := range s.cluster.Queues {
		if q.Name == name {
			return q, true
		}
	}
	return allocator.Queue{}, false
}

func (s *Service) flavor(name string) (allocator.Flavor, bool) {
	for _, f := range s.cluster.Flavors {
		if f.Name == name {
			return f, true
		}
	}
	return allocator.Flavor{}, false
}

// call carries one handled input.
type call struct {
	ctx  context.Context
	now  time.Time
	who  *Person
	in   Input
	outs []Output
	// changed is set when the cluster changed during the call, which
	// makes waiting requests' estimates worth refreshing.
	changed bool
	// logVerb, logTarget and outcome are what the call's log line says:
	// set by understand and by every audit entry (the last one wins).
	logVerb, logTarget, outcome string
	// manualVictims are the workloads an admin's preempt evicts in this
	// call: their preemption is audited as the admin's, not gpubot's.
	manualVictims []string
	// kueue is the KueueView's report, read at most once between two
	// operations on the cluster (see kueueReport).
	kueue *KueueReport
	// snap is the cluster as this call last read it (see snapshot).
	snap *allocator.Snapshot
	// What the input is: the command (typed, or the verb of a press), the
	// action on a request, and that request as authorize read it.
	cmd    *Command
	act    *Action
	target *records.Request
	// writing is set in the write section; holds names the request whose
	// lock the call holds.
	writing bool
	holds   string
	// republish makes leaving the write section publish a new view even
	// if nothing changed (time moved).
	republish bool
	audits    int // audit entries written
	// left are run once the call's write section is over (committed and
	// sent, or dropped after a panic).
	left []func()
	// w are the call's writes not yet committed; committed counts the
	// outputs already in the outbox (or not to be kept).
	w         pending
	committed int
	sent      int  // outputs already sent before an API call (apply)
	handled   bool // the input's delivery left the inbox with a commit
	// spot holds the starts on spot flavors this call worked out for
	// elastic offers, by request and flavor (see spotStart): a card and
	// the reply to its requester share one simulation, made outside the
	// write section when the call can.
	spot map[string]option
	// whatIf is the copy of a snapshot the spot offers' simulations
	// run on, kept between them (see spotStart).
	whatIf whatIfCopy
	// bare is an empty snapshot of the cluster the offers' checks read
	// (bareCluster).
	bare bareCluster
}

func (c *call) private(r Reply)  { c.outs = append(c.outs, private(r)) }
func (c *call) emit(o ...Output) { c.outs = append(c.outs, o...) }

// Handle answers one input. It never panics and always says something to
// the sender.
func (s *Service) Handle(ctx context.Context, in Input) []Output {
	c := &call{ctx: ctx, now: s.deps.Clock.Now(), in: in}
	s.handle(c)
	if len(c.outs) == 0 {
		c.private(plain("Done."))
	}
	s.flush(c)
	return c.outs[c.sent:]
}

// SetOrderedDelivery makes every call send what it committed with
// deliver as it commits it, still in the write section, and return only
// the rest from Handle (and Observe, Adopt, the refresher). Outputs then
// reach the sender in the order they were committed: a request's card
// before the refresher's first estimate on it, and a call's own words
// before what the cluster does in consequence (Kueue admits the workload
// at once, and the watch tells the thread: "Switched to spot by alice"
// comes first, since it is committed before the Kubernetes API call).
// Without it (the default) everything is returned, and two goroutines
// delivering what they returned may overtake each other. deliver must
// only queue (the Slack adapter's Send, the console's print): it runs
// in the write section. Set it once the runtime that delivers exists
// (the runtime is built after the service); it is safe to set while
// calls run. Only with a Committer (the outputs are in the outbox first).
func (s *Service) SetOrderedDelivery(deliver func(context.Context, []Output)) {
	s.early.Store(&deliver)
}

// dispatch runs the verb, after the middleware (see middleware.go).
func (s *Service) dispatch(c *call) {
	cmd := c.cmd
	if c.act != nil {
		switch c.act.Name {
		case VerbKeep:
			s.keep(c, *c.act)
		default:
			s.act(c, *c.act, *c.target)
		}
		return
	}
	switch cmd.Verb {
	case VerbRequest:
		s.request(c, *cmd.Spec)
	case VerbWhatIf:
		if cmd.Delta != nil {
			s.whatIfCapacity(c, *cmd.Delta)
		} else {
			s.whatIf(c, *cmd.Spec)
		}
	case VerbStatus:
		s.status(c, cmd.ID)
	case VerbQueue:
		s.queueView(c, cmd.Team, cmd.Flavor)
	case VerbCapacity:
		s.capacity(c)
	case VerbUsage:
		s.usage(c, cmd.Team, cmd.Days)
	case VerbTrack:
		s.track(c, cmd.Namespace, cmd.Job)
	case VerbDigest, VerbReport:
		s.digest(c, cmd.Verb, cmd.Team)
	case VerbHelp:
		c.private(helpReply(cmd.Topic))
	default:
		c.private(plain(fmt.Sprintf("%s is not implemented yet.", cmd.Verb)))
	}
}

// unreadable answers something the adapter could not make sense of.
func (s *Service) unreadable(c *call, u Unreadable) {
	s.audit(c, c.who.Name, u.What, u.Target, "invalid", u.Why)
	what := u.What
	if what == "" {
		what = "message"
	}
	next := "Please try again; /gpu help lists the commands."
	if u.What == "button" {
		next = "/gpu status shows your requests with fresh buttons."
	}
	c.private(plain(fmt.Sprintf("Sorry, gpubot couldn't understand that %s (%s). Nothing was changed. %s", what, u.Why, next)))
}

func (s *Service) who(user string) (*Person, bool) {
	if p, ok := s.people[user]; ok {
		return p, true
	}
	p, ok := s.people[strings.ToLower(user)]
	return p, ok
}

func (s *Service) person(name string) *Person {
	if p, ok := s.people[strings.ToLower(name)]; ok {
		return p
	}
	return &Person{Name: name}
}

// audit appends to the audit log; a failure is logged, not shown.
func (s *Service) audit(c *call, actor, action, target, outcome, detail string) {
	e := records.AuditEntry{At: c.now, Actor: actor, Action: action, Target: target, Outcome: outcome, Detail: detail}
	c.outcome = outcome
	if target != "" {
		c.logTarget = target
	}
	if c.in.Action != nil {
		e.Via = "button"
	}
	c.audits++
	c.w.audit = append(c.w.audit, e)
}

// apply carries out op in the cluster. Any change there can move the
// estimates of waiting requests, so a successful op marks the call as
// changed, even when it caused no event.
//
// It runs in the write section. On a cluster that is not a Stepper (an
// API call to Kubernetes) it leaves the section for the call, holding
// only the request's lock, so that other writes go on meanwhile; the
// caller reads its request again afterwards.
func (s *Service) apply(c *call, op Op) ([]allocator.Event, error) {
	began := s.watch.Now()
	if s.stepper == nil && c.writing {
		// Persist, then act: what the call decided so far is durable
		// before the API call.
		if err := s.commit(c, true); err != nil {
			return nil, fmt.Errorf("saving before acting: %w", err)
		}
		s.sendCommitted(c)
		s.wmu.Unlock()
		defer s.wmu.Lock()
	}
	events, err := s.deps.Cluster.Apply(c.ctx, op)
	c.kueue, c.snap = nil, nil
	if err == nil {
		c.changed = true
	}
	s.logAction(c, op, err, s.watch.Now().Sub(began))
	return events, err
}

// failed tells the sender that an operation failed on gpubot's side.
func (s *Service) failed(c *call, doing string, err error) {
	c.outcome = "error"
	s.log.Error(doing, "err", err, "user", c.who.Name)
	c.private(plain(fmt.Sprintf("Sorry, %s failed on gpubot's side: %s. Nothing else was changed; please try again.", doing, plainError(err))))
}

// plainError keeps the first line of an error for users.
func plainError(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// digest shows a digest or the weekly report privately.
func (s *Service) digest(c *call, verb Verb, team string) {
	if s.digests == nil {
		c.private(plain("Digests and reports are not set up in this gpubot."))
		return
	}
	var r Reply
	var err error
	if verb == VerbReport {
		r, err = s.digests.Report(c.ctx, c.now)
	} else {
		r, err = s.digests.Digest(c.ctx, team, c.now)
	}
	if err != nil {
		what := "building the digest"
		if verb == VerbReport {
			what = "building the report"
		}
		s.failed(c, what, err)
		return
	}
	c.private(r)
}
