package commands

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// A request command's own estimate is bounded in time. Its command holds
// its person's queue (their next command waits behind it), and one
// estimate over thousands of queued requests can take far longer than
// the person's commands come. With a refresher in the background, the
// command waits for its own estimate (and its spot offer's starts) at
// most the own-estimate wait (WithOwnEstimateWait, default
// DefaultOwnEstimateWait); if it is not ready by then, the card and
// the reply go out at once saying that the estimate is being worked out,
// as when the estimate is left to the refresher (estimates.go), and the
// estimate goes on in the background. Whichever comes first, that
// estimate or the refresher's next pass, saves the request's first
// estimate, updates its card and posts it in its thread, in the write
// section: the other finds it saved and posts nothing (the refresher
// posts again only if its estimate moved materially). A restart in
// between loses nothing: the first refresh finds the request without an
// estimate. The reply to the person is not delayed or reordered: only the
// card and the thread get the late estimate.

// DefaultOwnEstimateWait is how long a request command waits for its
// own estimate by default: a few of a person's commands at the rates
// gpubot is built for (the estimate of a request among 10 000 queued
// takes 70–100 ms of CPU on an idle core, several times that under load).
const DefaultOwnEstimateWait = 200 * time.Millisecond

// WithOwnEstimateWait bounds how long a request command waits for its
// own estimate while a refresher runs in the background (see
// DefaultOwnEstimateWait, the default for 0); negative: no bound (the
// command waits for its estimate, as with no refresher).
func WithOwnEstimateWait(d time.Duration) Option {
	return func(s *Service) {
		if d == 0 {
			d = DefaultOwnEstimateWait
		}
		s.ownWait = d
	}
}

// refresher is what the background refresher (RunEstimates) lends the
// request commands' late estimates: its context (they stop with it),
// its clock (the wait is timed on it) and its delivery.
type refresher struct {
	ctx     context.Context
	clk     clock.Clock
	deliver func(context.Context, []Output)
}

// ownResult is an own estimate and the spot offer's starts worked out
// with it.
type ownResult struct {
	e    allocator.Estimate
	spot map[string]option
}

// ownEstimateWithin works out r's own estimate on snap with opts, unless
// known already (fromCheckpoints), and, if due, the spot offer's starts,
// into c, releasing the own-estimate turn when done. With a refresher in
// the background it waits at most the own-estimate wait: ok false means
// the estimate was not ready, and it completes later (lateEstimate). It
// runs outside the write section.
func (s *Service) ownEstimateWithin(c *call, snap *allocator.Snapshot, r records.Request, opts allocator.EstimateOptions, known *allocator.Estimate, release func()) (allocator.Estimate, bool) {
	estimate := func() allocator.Estimate {
		if known != nil {
			return *known
		}
		return s.estimateOne(snap, r.ID, opts)
	}
	bg := s.bg.Load()
	if bg == nil || s.ownWait < 0 {
		defer release()
		e := estimate()
		if s.offerDue(c, snap, r, toRecord(c.now, e)) {
			s.prepareOffer(c, snap, r)
		}
		return e, true
	}
	timeout := bg.clk.NewTimer(s.ownWait)
	defer timeout.Stop()
	// Its own call: after the wait it is no longer c's.
	own := &call{ctx: bg.ctx, now: c.now, who: &Person{Name: "gpubot"}}
	done := make(chan ownResult, 1)
	// A late estimate waits for c's card to be committed (and sent, with
	// the ordered delivery) before it updates it.
	carded := make(chan struct{})
	c.left = append(c.left, func() { close(carded) })
	go func() {
		defer release()
		defer s.recovered(own, "working out a request's own estimate", func(string) {})
		e := estimate()
		if s.offerDue(own, snap, r, toRecord(own.now, e)) {
			s.prepareOffer(own, snap, r)
		}
		done <- ownResult{e: e, spot: own.spot}
	}()
	select {
	case res := <-done:
		for k, o := range res.spot {
			if c.spot == nil {
				c.spot = map[string]option{}
			}
			c.spot[k] = o
		}
		return res.e, true
	case <-timeout.C():
		s.ownLate.Add(1)
		go func() {
			var res ownResult
			select {
			case res = <-done:
			case <-bg.ctx.Done():
				return
			}
			select {
			case <-carded:
				s.lateEstimate(bg, r.ID, snap, res)
				s.lateDone.Add(1)
			case <-bg.ctx.Done():
			}
		}()
		return allocator.Estimate{}, false
	}
}

// lateEstimate saves and posts a request's own estimate that came after
// its command answered, unless the refresher did first (or the request
// is no longer queued).
func (s *Service) lateEstimate(bg *refresher, id string, snap *allocator.Snapshot, res ownResult) {
	c := &call{ctx: bg.ctx, now: s.deps.Clock.Now(), who: &Person{Name: "gpubot"}, spot: res.spot}
	outs := func() (outs []Output) {
		defer s.recovered(c, "posting a request's own estimate", func(string) { outs = nil })
		func() {
			defer s.enter(c)()
			r, err := s.getRequest(c, id)
			if err != nil || r.State != records.StateQueued || r.Estimate != nil {
				return // gone, moved on, or the refresher posted it
			}
			s.postEstimate(c, snap, r, res.e)
		}()
		return c.unsent()
	}()
	if len(outs) > 0 {
		bg.deliver(bg.ctx, outs)
	}
}

// checkpointed is an estimate engine that can answer a new request's own
// estimate from its last computation (allocator.Estimator.ForNew).
type checkpointed interface {
	ForNew(s *allocator.Snapshot, id string, opts allocator.EstimateOptions) (allocator.Estimate, bool)
}

// fromCheckpoints is a request's own estimate from the estimate engine's
// last computation, in the write section: on 10 000 queued requests a few
// milliseconds, where simulating the queue for it alone takes about a
// hundred. It answers when the engine is free (no refresh under way: the
// refresher computes under emu, and the engine is not safe for concurrent
// use), the cluster is in the state the last computation saw but for the
// request (and its Now, while nothing that computation foresaw has come
// due; see ForNew). Its estimate is then the one the last computation
// would have made with the request there, as every other request's
// estimate is until the refresher's next pass, which this submission asks
// for and which posts it again only if it moved materially. If the
// request gets a spot offer, whose starts need simulations of their own,
// those are worked out as for a simulated own estimate (ownEstimateWithin,
// with this estimate).
func (s *Service) fromCheckpoints(c *call, snap *allocator.Snapshot, r records.Request) (allocator.Estimate, bool) {
	eng, ok := s.engine.(checkpointed)
	if !ok || !s.emu.TryLock() {
		return allocator.Estimate{}, false
	}
	defer s.emu.Unlock()
	return eng.ForNew(snap, r.ID, s.viewOptions(c))
}
