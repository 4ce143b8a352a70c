package slackbot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
	"k8s.io/utils/clock"
)

// Call is one outbound Slack API call waiting in the Queue.
type Call struct {
	// Lane orders calls: those of one lane run one at a time, in the
	// order enqueued; different lanes run independently.
	Lane string
	// Method is the Slack API method (chat.postMessage…). A 429 on a
	// method holds back every lane's calls of that method until its
	// Retry-After has passed.
	Method string
	// Paced calls count against their lane's message rate (messages
	// posted to a channel).
	Paced bool
	// Supersedes, if set, names what the call replaces: a call with the
	// same Supersedes still waiting in the lane is dropped, since this one
	// makes it moot (a card update replaces an older one of the card).
	Supersedes string
	// Do makes the call. It is retried after a rate limit
	// (*slack.RateLimitedError) or a transient failure.
	Do func(ctx context.Context) error
}

// Pacing is a lane's message rate: Burst messages at once, then one
// every 1/PerSecond seconds.
type Pacing struct {
	PerSecond float64
	Burst     int
}

// Queue is gpubot's one way out to Slack. Every Web API call goes through
// it, so that it can respect Slack's rate limits without losing or
// reordering anything:
//
//   - calls of one lane (a channel, a thread's channel, a person's
//     private replies) run in the order they were enqueued, one at a time;
//     different lanes proceed independently;
//   - paced calls (messages posted in a channel) keep to the lane's rate,
//     about one message per second per channel by default, after a burst;
//   - an HTTP 429 holds back the method for its Retry-After, in every lane,
//     and the call is tried again: rate limits never drop a call;
//   - transient failures (network, 5xx) are retried with backoff (1 s
//     doubling to 30 s) for up to 15 minutes (WithRetryFor), so that a
//     network outage delays replies rather than losing them; other errors
//     are logged and the call is given up.
//
// Enqueue never blocks. A lane's goroutine exists only while it has calls.
type Queue struct {
	clock       clock.Clock
	pace        Pacing
	log         *slog.Logger
	maxAttempts int
	retryFor    time.Duration
	maxBackoff  time.Duration
	scrub       func(string) string
	// refused tells an error that means Slack refuses the token; the
	// call is then retried, and onRefused told, until the adapter has
	// checked the token (and stops gpubot if it is gone).
	refused   func(error) bool
	onRefused func(error)

	mu      sync.Mutex
	ctx     context.Context
	lanes   map[string]*lane
	buckets map[string]*bucket
	held    map[string]time.Time // method → not before
	pending int
	idle    *sync.Cond
	running sync.WaitGroup
	stopped bool
	// limited counts the HTTP 429 answers seen (for metrics).
	limited atomic.Uint64
}

type lane struct {
	calls []Call
}

// bucket is a token bucket; idle lanes keep their bucket so that a lane
// that empties and refills cannot exceed its rate.
type bucket struct {
	tokens float64
	at     time.Time
}

// QueueOption configures a Queue.
type QueueOption func(*Queue)

// WithQueueClock sets the clock used for pacing and waits. Default: the
// real clock.
func WithQueueClock(c clock.Clock) QueueOption { return func(q *Queue) { q.clock = c } }

// WithQueueLogger sets the operator's log. Default: discard.
func WithQueueLogger(l *slog.Logger) QueueOption { return func(q *Queue) { q.log = l } }

// WithMaxAttempts bounds attempts at a transiently failing call (rate
// limits do not count). Default: no bound but WithRetryFor's.
func WithMaxAttempts(n int) QueueOption { return func(q *Queue) { q.maxAttempts = max(1, n) } }

// WithRetryFor bounds how long a transiently failing call is retried,
// from its first attempt. Default 15 minutes.
func WithRetryFor(d time.Duration) QueueOption { return func(q *Queue) { q.retryFor = d } }

// NewQueue returns a queue pacing each lane's paced calls at p; a zero
// PerSecond means no pacing. Start it before enqueueing.
func NewQueue(p Pacing, opts ...QueueOption) *Queue {
	q := &Queue{
		clock: clock.RealClock{}, pace: p, log: slog.New(slog.DiscardHandler),
		retryFor: 15 * time.Minute, maxBackoff: 30 * time.Second, scrub: func(s string) string { return s },
		lanes: map[string]*lane{}, buckets: map[string]*bucket{}, held: map[string]time.Time{},
	}
	q.idle = sync.NewCond(&q.mu)
	if q.pace.Burst < 1 {
		q.pace.Burst = 1
	}
	for _, o := range opts {
		o(q)
	}
	return q
}

// Start runs lanes until ctx ends. Calls still queued then are not made
// (the count is logged).
func (q *Queue) Start(ctx context.Context) {
	q.mu.Lock()
	q.ctx = ctx
	for key, l := range q.lanes {
		if len(l.calls) > 0 {
			q.run(key)
		}
	}
	q.mu.Unlock()
	context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.stopped = true
		q.idle.Broadcast()
		q.mu.Unlock()
	})
}

// Enqueue adds c at the end of its lane. It never blocks, and drops
// nothing but the waiting calls c supersedes.
func (q *Queue) Enqueue(c Call) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || (q.ctx != nil && q.ctx.Err() != nil) {
		q.log.Warn("Slack call not made: gpubot is stopping", "method", c.Method, "lane", c.Lane)
		return
	}
	l, ok := q.lanes[c.Lane]
	if !ok {
		l = &lane{}
		q.lanes[c.Lane] = l
	}
	if c.Supersedes != "" && len(l.calls) > 1 {
		// calls[0] may be running: leave it.
		kept := l.calls[:1]
		for _, w := range l.calls[1:] {
			if w.Supersedes == c.Supersedes {
				q.pending--
				continue
			}
			kept = append(kept, w)
		}
		clear(l.calls[len(kept):])
		l.calls = kept
	}
	l.calls = append(l.calls, c)
	q.pending++
	if !ok && q.ctx != nil {
		q.run(c.Lane)
	}
}

// Pending is the number of calls enqueued and not yet finished.
func (q *Queue) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending
}

// RateLimited is the number of calls Slack answered with HTTP 429 (rate
// limited) so far; each was held back and tried again.
func (q *Queue) RateLimited() uint64 { return q.limited.Load() }

// Drain waits until no call is pending or ctx ends.
func (q *Queue) Drain(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.idle.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.pending > 0 && ctx.Err() == nil && !q.stopped {
		q.idle.Wait()
	}
	if q.pending > 0 {
		return fmt.Errorf("%d Slack calls still pending: %w", q.pending, context.Cause(ctx))
	}
	return nil
}

// Wait returns when every lane goroutine has stopped (after ctx ends).
func (q *Queue) Wait() { q.running.Wait() }

// run starts lane key's goroutine; q.mu is held.
func (q *Queue) run(key string) {
	q.running.Add(1)
	go func() {
		defer q.running.Done()
		q.lane(key)
	}()
}

func (q *Queue) lane(key string) {
	ctx := q.ctx
	for {
		q.mu.Lock()
		l := q.lanes[key]
		if len(l.calls) == 0 || ctx.Err() != nil {
			if ctx.Err() != nil && len(l.calls) > 0 {
				q.log.Warn("Slack calls not made: gpubot is stopping", "lane", key, "calls", len(l.calls))
				q.pending -= len(l.calls)
			}
			delete(q.lanes, key)
			q.idle.Broadcast()
			q.mu.Unlock()
			return
		}
		c := l.calls[0]
		q.mu.Unlock()

		q.make(ctx, c)

		q.mu.Lock()
		l.calls[0] = Call{}
		l.calls = l.calls[1:]
		q.pending--
		q.idle.Broadcast()
		q.mu.Unlock()
	}
}

// make makes one call, waiting for its turn and retrying as needed.
func (q *Queue) make(ctx context.Context, c Call) {
	if c.Paced {
		if !q.sleep(ctx, q.takeToken(c.Lane)) {
			return
		}
	}
	first := q.clock.Now()
	for attempt := 1; ; {
		if !q.sleep(ctx, q.holdFor(c.Method)) {
			return
		}
		err := q.do(ctx, c)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		if rl, ok := errors.AsType[*slack.RateLimitedError](err); ok {
			after := max(rl.RetryAfter, time.Second)
			q.limited.Add(1)
			q.hold(c.Method, after)
			q.log.Info("Slack rate limit; waiting", "method", c.Method, "lane", c.Lane, "retryAfter", after)
			continue
		}
		if q.refused != nil && q.refused(err) {
			q.onRefused(err)
			wait := min(q.maxBackoff, time.Second<<min(attempt-1, 10))
			q.log.Warn("Slack refuses the bot token; holding the call while gpubot checks the token", "method", c.Method, "lane", c.Lane, "in", wait)
			attempt++
			if !q.sleep(ctx, wait) {
				return
			}
			continue
		}
		if !transient(err) || (q.maxAttempts > 0 && attempt >= q.maxAttempts) || q.clock.Since(first) >= q.retryFor {
			q.log.Error("Slack call failed", "method", c.Method, "lane", c.Lane, "attempt", attempt, "err", q.scrub(err.Error()))
			return
		}
		wait := min(q.maxBackoff, time.Second<<min(attempt-1, 10))
		q.log.Warn("Slack call failed; retrying", "method", c.Method, "lane", c.Lane, "attempt", attempt, "in", wait, "err", q.scrub(err.Error()))
		attempt++
		if !q.sleep(ctx, wait) {
			return
		}
	}
}

// do runs c.Do, turning a panic into an error.
func (q *Queue) do(ctx context.Context, c Call) (err error) {
	defer func() {
		if v := recover(); v != nil {
			q.log.Error("panic in a Slack call", "method", c.Method, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return c.Do(ctx)
}

// takeToken takes one of lane's tokens and says how long to wait for it.
func (q *Queue) takeToken(key string) time.Duration {
	if q.pace.PerSecond <= 0 {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	b, ok := q.buckets[key]
	if !ok {
		b = &bucket{tokens: float64(q.pace.Burst), at: now}
		q.buckets[key] = b
	}
	if now.After(b.at) {
		b.tokens = min(float64(q.pace.Burst), b.tokens+now.Sub(b.at).Seconds()*q.pace.PerSecond)
		b.at = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	// The token is owed: it arrives after -tokens/rate seconds.
	return time.Duration(-b.tokens / q.pace.PerSecond * float64(time.Second))
}

func (q *Queue) hold(method string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	until := q.clock.Now().Add(d)
	if until.After(q.held[method]) {
		q.held[method] = until
	}
}

func (q *Queue) holdFor(method string) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held[method].Sub(q.clock.Now())
}

// sleep waits d (if positive) and reports whether ctx is still alive.
func (q *Queue) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := q.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// transient reports whether err is worth retrying: network trouble, a
// timeout, or a server error.
func transient(err error) bool {
	if sc, ok := errors.AsType[slack.StatusCodeError](err); ok {
		return sc.Code >= http.StatusInternalServerError || sc.Code == http.StatusRequestTimeout
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return true
		}
		return false
	}
	return errors.Is(err, errTransient)
}

// errTransient marks an error as worth retrying.
var errTransient = errors.New("transient")
