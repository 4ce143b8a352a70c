// Package bot is gpubot's transport-neutral chat runtime. Chat adapters
// (bot/console, bot/slack) hand it what people typed or pressed; it
// drops duplicate deliveries, runs the command handler on a bounded pool
// of workers with panic recovery, and delivers the replies through one
// ordered outbound queue.
//
// # Basics
//
// An adapter acks its platform first (Slack wants that within 3 s), then
// calls Submit, which only enqueues. Process is the synchronous variant
// the console uses: it returns after the replies are delivered. Deliver
// sends outputs that did not come from an input, such as thread updates
// caused by the cluster.
//
// # Caveats
//
// Handlers are run concurrently up to the worker count; the handler must
// be safe for concurrent use (commands.Service serialises itself).
// Outbound delivery is in submission order; a Sender error is retried
// with backoff when it is Retryable, and logged and dropped otherwise.
package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gpubot/gpubot/commands"
)

// Handler answers one input. *commands.Service satisfies it.
type Handler interface {
	Handle(ctx context.Context, in commands.Input) []commands.Output
}

// Sender delivers one output to the chat platform.
type Sender interface {
	Send(ctx context.Context, out commands.Output) error
}

// Deduper remembers delivery keys. *store.DB satisfies it.
type Deduper interface {
	Seen(ctx context.Context, key string, now time.Time, ttl time.Duration) (bool, error)
}

// Clock tells the time (for dedupe expiry).
type Clock interface {
	Now() time.Time
}

// Event is one delivery from a chat platform.
type Event struct {
	// Key identifies the delivery for deduplication (Slack: the envelope
	// or action ID). Empty: no deduplication.
	Key string
	// Order, if set, makes events with the same Order run one at a time,
	// in the order submitted (Slack: the user, so that one person's
	// commands are answered in the order typed). Empty: no ordering.
	Order string
	Input commands.Input
}

// RetryableError marks a Sender error worth retrying after At least
// After.
type RetryableError struct {
	After time.Duration
	Err   error
}

func (e *RetryableError) Error() string { return fmt.Sprintf("retry after %s: %v", e.After, e.Err) }
func (e *RetryableError) Unwrap() error { return e.Err }

// ErrBusy is returned by Submit when the work queue is full.
var ErrBusy = errors.New("bot: too much work queued; try again shortly")

// Runtime is the chat runtime. Create it with New and Start it.
type Runtime struct {
	h       Handler
	send    Sender
	dedupe  Deduper
	clock   Clock
	ttl     time.Duration
	workers int
	log     *slog.Logger
	sleep   func(context.Context, time.Duration) error

	work chan Event
	out  chan commands.Output
	wg   sync.WaitGroup
	once sync.Once

	mu sync.Mutex
	// ordered holds, per Order key with an event at a worker, the events
	// of that key waiting for it.
	ordered map[string][]Event
	waiting int // events in ordered
}

// Option configures a Runtime.
type Option func(*Runtime)

// WithWorkers sets the number of handler workers. Default 4.
func WithWorkers(n int) Option { return func(r *Runtime) { r.workers = max(1, n) } }

// WithQueue sets the capacity of the work and outbound queues. Default 256.
func WithQueue(n int) Option {
	return func(r *Runtime) {
		r.work = make(chan Event, max(1, n))
		r.out = make(chan commands.Output, max(1, n))
	}
}

// WithDeduper drops deliveries whose Key was seen within ttl. Default: no
// deduplication.
func WithDeduper(d Deduper, ttl time.Duration, c Clock) Option {
	return func(r *Runtime) { r.dedupe, r.ttl, r.clock = d, ttl, c }
}

// WithLogger sets the operator's log. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(r *Runtime) { r.log = l } }

// WithSleep replaces the wait between delivery retries (tests).
func WithSleep(f func(context.Context, time.Duration) error) Option {
	return func(r *Runtime) { r.sleep = f }
}

// New returns a runtime; h and s are required.
func New(h Handler, s Sender, opts ...Option) *Runtime {
	r := &Runtime{
		h: h, send: s, workers: 4,
		log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		work:  make(chan Event, 256),
		out:   make(chan commands.Output, 256),
		sleep: sleepCtx,
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Start runs the workers and the outbound queue until ctx ends. Call it
// once before Submit or Deliver.
func (r *Runtime) Start(ctx context.Context) {
	r.once.Do(func() {
		for range r.workers {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				for {
					select {
					case <-ctx.Done():
						return
					case ev := <-r.work:
						for ok := true; ok && ctx.Err() == nil; ev, ok = r.next(ev) {
							for _, o := range r.handle(ctx, ev) {
								r.enqueue(ctx, o)
							}
						}
					}
				}
			}()
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case o := <-r.out:
					r.deliver(ctx, o)
				}
			}
		}()
	})
}

// Wait returns when Start's goroutines have stopped (after ctx ends).
func (r *Runtime) Wait() { r.wg.Wait() }

// Submit queues ev for a worker. It does not block; ErrBusy means the
// queue is full. An event whose Order key has an event at a worker waits
// behind it.
func (r *Runtime) Submit(ev Event) error {
	if ev.Order == "" {
		select {
		case r.work <- ev:
			return nil
		default:
			return ErrBusy
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ordered == nil {
		r.ordered = map[string][]Event{}
	}
	if q, busy := r.ordered[ev.Order]; busy {
		if r.waiting >= cap(r.work) {
			return ErrBusy
		}
		r.ordered[ev.Order] = append(q, ev)
		r.waiting++
		return nil
	}
	select {
	case r.work <- ev:
		r.ordered[ev.Order] = nil
		return nil
	default:
		return ErrBusy
	}
}

// next returns the event waiting behind ev's Order key, if any, and
// otherwise frees the key.
func (r *Runtime) next(ev Event) (Event, bool) {
	if ev.Order == "" {
		return Event{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.ordered[ev.Order]
	if len(q) == 0 {
		delete(r.ordered, ev.Order)
		return Event{}, false
	}
	r.ordered[ev.Order] = q[1:]
	r.waiting--
	return q[0], true
}

// Process handles ev and delivers its replies before returning.
func (r *Runtime) Process(ctx context.Context, ev Event) {
	for _, o := range r.handle(ctx, ev) {
		r.deliver(ctx, o)
	}
}

// Deliver queues outputs for delivery in order (asynchronous; Start first).
func (r *Runtime) Deliver(ctx context.Context, outs []commands.Output) {
	for _, o := range outs {
		r.enqueue(ctx, o)
	}
}

// DeliverNow delivers outputs before returning (synchronous).
func (r *Runtime) DeliverNow(ctx context.Context, outs []commands.Output) {
	for _, o := range outs {
		r.deliver(ctx, o)
	}
}

func (r *Runtime) enqueue(ctx context.Context, o commands.Output) {
	select {
	case r.out <- o:
	case <-ctx.Done():
	}
}

// handle dedupes and runs the handler with panic recovery.
func (r *Runtime) handle(ctx context.Context, ev Event) (outs []commands.Output) {
	if ev.Key != "" && r.dedupe != nil {
		seen, err := r.dedupe.Seen(ctx, ev.Key, r.clock.Now(), r.ttl)
		if err != nil {
			// Better to risk a duplicate than to lose the input.
			r.log.Error("checking delivery key", "key", ev.Key, "err", err)
		} else if seen {
			r.log.Info("duplicate delivery dropped", "key", ev.Key, "user", ev.Input.User)
			return nil
		}
	}
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("panic in handler", "panic", fmt.Sprint(v), "user", ev.Input.User, "stack", string(debug.Stack()))
			outs = []commands.Output{{
				To:    commands.Destination{Kind: commands.ToSender, User: ev.Input.User, Channel: ev.Input.Channel},
				Reply: commands.Reply{Text: "Something went wrong on gpubot's side; the operator's log has the details. Please try again."},
			}}
		}
	}()
	outs = r.h.Handle(ctx, ev.Input)
	for i := range outs {
		if outs[i].To.Kind == commands.ToSender {
			outs[i].To.User = ev.Input.User
			if outs[i].To.Channel == "" {
				outs[i].To.Channel = ev.Input.Channel
			}
		}
	}
	return outs
}

// deliver sends one output, retrying retryable failures a few times.
func (r *Runtime) deliver(ctx context.Context, o commands.Output) {
	const attempts = 5
	for i := 1; ; i++ {
		err := r.send.Send(ctx, o)
		if err == nil {
			return
		}
		var re *RetryableError
		if !errors.As(err, &re) || i == attempts {
			r.log.Error("delivering a reply", "to", string(o.To.Kind), "request", o.To.Request, "attempt", i, "err", err)
			return
		}
		if r.sleep(ctx, re.After) != nil {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
