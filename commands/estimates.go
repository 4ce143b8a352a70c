package commands

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// Estimates are made off the command path. A change of the cluster or the
// queue marks them stale; the refresher (RunEstimates in the background,
// or Settle when the caller wants the result at once, as the console
// does) recomputes them once for however many changes came meanwhile,
// publishes them for reads, and posts those that moved materially. A
// request command gets its own estimate without recomputing everyone's:
// when nothing but the request has changed since the last computation
// (and no refresh is under way), from that computation's checkpoints in
// a few milliseconds (fromCheckpoints, with the default engine); else by
// simulating the queue for it alone (allocator.EstimateFor), unless that
// would only add to the load: with a
// refresher in the background that is computing or has a change waiting,
// or with ownEstimatesAtOnce request estimates under way, its card and
// reply say the estimate is being worked out, and the refresher's next
// pass (which its submission asked for) saves it, updates the card and
// posts it in the thread as the request's first estimate (postEstimates:
// a request with no estimate yet always moved materially, and once saved
// it is not posted again unless it moves). One that computes its own
// waits for it at most the own-estimate wait, and is then answered the
// same way (ownestimate.go). Nothing is lost on a restart
// (the first refresh finds the request without an estimate) and nothing
// is posted for a request cancelled or admitted meanwhile (only queued
// requests are posted). What-ifs are simulated against the snapshot of
// the latest estimates and shared (hypothetical.go).

// EstimateEngine computes every pending workload's start estimate: the
// refresher's one expensive step, made by one goroutine at a time. The
// default is an allocator.Estimator, which answers from its last result
// when neither the cluster nor the options changed, and keeps its
// simulations' checkpoints for new requests' own estimates unless the
// queue is busy (busyChanges; an engine with a ForNew method, as the
// Estimator has, is asked those). One workload's
// estimate (a request's own, a what-if) is allocator.EstimateFor, which
// stops once that workload starts. The map returned is not modified.
type EstimateEngine interface {
	Estimates(s *allocator.Snapshot, opts allocator.EstimateOptions) map[string]allocator.Estimate
}

// WithEstimateEngine computes estimates with e. Default: an
// allocator.Estimator.
func WithEstimateEngine(e EstimateEngine) Option { return func(s *Service) { s.engine = e } }

var _ EstimateEngine = (*allocator.Estimator)(nil)

// busyChanges is how many changes since the last refresh make the queue
// busy: the default engine then keeps no checkpoints for the request
// commands' own estimates (fromCheckpoints). A request would find the
// queue moved on since the computation anyway (at 100 commands a second,
// 1 of 3 600 requests used them), and they cost each computation about
// 40 MB of allocation on 10 000 pending (BENCHMARKS.md).
const busyChanges = 4

// keepCheckpoints turns the default engine's checkpoints on for this
// refresh unless the queue is busy (under emu).
func (s *Service) keepCheckpoints() {
	n := s.estimates.stats.changes.Load()
	if s.own != nil {
		s.own.KeepCheckpoints = n-s.seen <= busyChanges
	}
	s.seen = n
}

// staleness is the refresher's "recompute" signal: marked by any number
// of changes, taken once. It counts the marks and the refreshes, for
// RefreshStats.
type staleness struct {
	ch    chan struct{}
	stats *refreshCounters
}

type refreshCounters struct {
	changes, simulated, reused, unchanged, nanos, checkpoints atomic.Uint64
}

func newStaleness() staleness {
	return staleness{ch: make(chan struct{}, 1), stats: &refreshCounters{}}
}

// changed marks the estimates stale. It never blocks.
func (st staleness) changed() {
	st.stats.changes.Add(1)
	select {
	case st.ch <- struct{}{}:
	default:
	}
}

// pending reports whether a change waits for a refresh.
func (st staleness) pending() bool { return len(st.ch) > 0 }

// take reports whether the estimates were stale, and clears the mark.
func (st staleness) take() bool {
	select {
	case <-st.ch:
		return true
	default:
		return false
	}
}

// RunEstimates keeps the estimates current until ctx ends: after every
// change (coalesced: changes that come while it computes cost one more
// computation), it recomputes them and hands the posts of those that
// moved to deliver. It waits at least every on clk between two
// computations, so that a stream of changes costs one computation per
// period, not one after the other (0: no wait).
func (s *Service) RunEstimates(ctx context.Context, clk clock.Clock, every time.Duration, deliver func(context.Context, []Output)) {
	bg := &refresher{ctx: ctx, clk: clk, deliver: deliver}
	s.bg.Store(bg)
	defer s.bg.CompareAndSwap(bg, nil)
	s.background.Add(1)
	defer s.background.Add(-1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.estimates.ch:
		}
		if outs := s.refresh(ctx); len(outs) > 0 {
			deliver(ctx, outs)
		}
		if every > 0 {
			select {
			case <-ctx.Done():
				return
			case <-clk.After(every):
			}
		}
	}
}

// RefreshStats says how the estimates were kept current since the
// service started: the changes that marked them stale (a change of the
// cluster or the queue, or refreshEvery passing) and the refreshes they
// cost, by what the estimate engine did — Simulated (the queue simulated
// again), Reused (rebuilt from the last simulations after an admission
// they predicted), Unchanged (nothing it depends on had changed; always 0
// but for an allocator.Estimator, whose counts say which) — and the time
// spent in the engine. Changes far above the refreshes is the coalescing
// at work. FromCheckpoints counts the request commands whose own
// estimate came from the engine's last computation (fromCheckpoints)
// rather than a simulation of their own.
type RefreshStats struct {
	Changes, Simulated, Reused, Unchanged uint64
	Computing                             time.Duration
	FromCheckpoints                       uint64
}

// RefreshStats returns the counts so far. It never waits.
func (s *Service) RefreshStats() RefreshStats {
	c := s.estimates.stats
	return RefreshStats{Changes: c.changes.Load(), Simulated: c.simulated.Load(), Reused: c.reused.Load(),
		Unchanged: c.unchanged.Load(), Computing: time.Duration(c.nanos.Load()), FromCheckpoints: c.checkpoints.Load()}
}

// computeEstimates runs the engine and counts what it did (under emu).
func (s *Service) computeEstimates(snap *allocator.Snapshot, opts allocator.EstimateOptions) map[string]allocator.Estimate {
	c := s.estimates.stats
	est, counted := s.engine.(*allocator.Estimator)
	var rec, reu int
	if counted {
		rec, reu = est.Recomputed, est.Reused
	}
	start := s.watch.Now()
	ests := s.engine.Estimates(snap, opts)
	c.nanos.Add(uint64(max(s.watch.Since(start), 0)))
	switch {
	case !counted || est.Recomputed > rec:
		c.simulated.Add(1)
	case est.Reused > reu:
		c.reused.Add(1)
	default:
		c.unchanged.Add(1)
	}
	return ests
}

// Settle recomputes the estimates now if anything changed since they
// were last made, and returns the posts of those that moved. The console
// and tests call it after each step so that replies come in order.
func (s *Service) Settle(ctx context.Context) []Output {
	if !s.estimates.take() {
		return nil
	}
	return s.refresh(ctx)
}

// refresh recomputes every queued request's estimate outside the write
// section, publishes them, and then, a chunk a write section, saves and
// posts those that moved materially.
func (s *Service) refresh(ctx context.Context) (outs []Output) {
	s.refreshing.Add(1)
	defer s.refreshing.Add(-1)
	s.emu.Lock()
	defer s.emu.Unlock()
	c := &call{ctx: ctx, now: s.deps.Clock.Now(), who: &Person{Name: "gpubot"}}
	defer s.recovered(c, "refreshing estimates", func(string) { outs = nil })
	v := s.view()
	snap := s.clone(v.snap)
	opts := s.estimateOptions(c)
	s.keepCheckpoints()
	ests := s.computeEstimates(snap, opts)
	s.setEstimates(ests, opts, s.requestMix(c), c.now, v.snap)
	s.prepareOffers(c, snap, ests)
	s.postEstimates(c, snap, ests)
	return c.unsent()
}

// movedIn is postEstimates' filter: queued requests whose estimate in
// ests moved materially (or who have none yet).
func movedIn(c *call, ests map[string]allocator.Estimate) func(*records.Request) bool {
	return func(r *records.Request) bool {
		e, ok := ests[r.ID]
		return ok && r.State == records.StateQueued && material(r.Estimate, toRecord(c.now, e), c.now)
	}
}

// prepareOffers works out, before the write section, the spot offers on
// the cards postEstimates is likely to re-post (each simulation copies
// the whole cluster: in the write section it would hold up every write,
// and under load most re-posted cards are requests' first estimates).
func (s *Service) prepareOffers(c *call, snap *allocator.Snapshot, ests map[string]allocator.Estimate) {
	for _, r := range s.readRefs(c, movedIn(c, ests), false) {
		if s.offerDue(c, snap, *r, toRecord(c.now, ests[r.ID])) {
			s.prepareOffer(c, snap, *r)
		}
	}
}

// postChunk is how many moved estimates postEstimates saves and posts in
// one write section.
var postChunk = 100

// betweenChunks, when set (tests only), runs after each chunk's write
// section but the last, before the next is entered.
var betweenChunks func()

// postEstimates saves and posts the estimates of queued requests that
// moved materially, postChunk of them a write section (each section
// commits its own), so that a pass that moves thousands (the first after
// a restart, when time has moved every estimate) does not hold up every
// write for its whole length. Each request is looked at again in its
// section, as it is then: one cancelled, admitted or estimated meanwhile
// is not posted.
func (s *Service) postEstimates(c *call, snap *allocator.Snapshot, ests map[string]allocator.Estimate) {
	// Of thousands queued, few move, mostly: those are sorted (posts in
	// ID order).
	moved := s.readRefs(c, movedIn(c, ests), true)
	for len(moved) > 0 {
		chunk := moved[:min(postChunk, len(moved))]
		moved = moved[len(chunk):]
		func() {
			defer s.enter(c)()
			keep := movedIn(c, ests)
			for _, was := range chunk {
				if r, ok := s.cache.get(was.ID); ok && keep(&r) {
					s.postEstimate(c, snap, r, ests[r.ID])
				}
			}
		}()
		if betweenChunks != nil && len(moved) > 0 {
			betweenChunks()
		}
	}
}

// postEstimate saves e as queued request r's estimate and posts it, on
// its card and in its thread (its first, one its card said would follow,
// as a plain line with the offer its reply left out). It runs in the
// write section.
func (s *Service) postEstimate(c *call, snap *allocator.Snapshot, r records.Request, e allocator.Estimate) {
	if _, never := s.neverStarts(c, r.ID); never {
		return // Kueue cannot admit it as it is: no estimate
	}
	if _, ok := s.provisioningWait(c, r); ok {
		return // it starts when its nodes are provisioned
	}
	next := toRecord(c.now, e)
	// A request's first estimate ever (one left to the refresher by
	// request.go: its card said it would follow) is a plain line; after
	// a preemption or a switch, the thread said a new one follows.
	prev := r.Estimate
	first := r.FirstEstimate == nil && r.Preemptions == 0 && r.Elastic == nil
	r.Estimate = next
	if r.FirstEstimate == nil {
		r.FirstEstimate = next
	}
	if err := s.putRequest(c, r); err != nil {
		s.log.Error("saving estimate", "request", r.ID, "err", err)
		return
	}
	var text string
	switch {
	case first:
		text = capitalize(s.estimateText(next))
	case prev != nil:
		text = "New estimate: " + s.estimateText(next) + " (was " + s.absWindow(prev) + ")"
	default:
		text = "New estimate: " + s.estimateText(next)
	}
	text += "."
	if first {
		// The requester's reply said the estimate follows: the offer
		// of elastic capacity it would have carried comes with it.
		if line := s.offerLine(c, snap, r, next, s.person(r.Requester)); line != "" {
			text += " " + line
		}
	}
	c.emit(thread(r.ID, plain(text)), Output{To: Destination{Kind: UpdateCard, Request: r.ID}, Reply: s.cardWith(c, r, snap, &e)})
}

// estimatesDue marks the estimates stale when they are older than
// refreshEvery: waits move with time even when nothing happens.
func (s *Service) estimatesDue(now time.Time) {
	if v := s.view(); v.estAt.IsZero() || now.Sub(v.estAt) >= refreshEvery {
		s.estimates.changed()
	}
}

// estimateOf is the latest estimate of pending workload id: from the
// view, else (not estimated yet) by the engine for it alone.
func (s *Service) estimateOf(c *call, snap *allocator.Snapshot, id string) allocator.Estimate {
	if e, ok := s.view().ests[id]; ok {
		return e
	}
	return allocator.EstimateFor(snap, id, s.viewOptions(c))
}

// viewOptions are the estimate options the latest estimates were made
// with (learning them costs a read of every request), or learned now if
// there are none yet.
func (s *Service) viewOptions(c *call) allocator.EstimateOptions {
	if v := s.view(); !v.estAt.IsZero() {
		return v.opts
	}
	return s.estimateOptions(c)
}
