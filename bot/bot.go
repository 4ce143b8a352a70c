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
// # Nothing lost
//
// With WithInbox, Submit writes a keyed event to the inbox (and
// deduplicates it there) before it returns, so before the adapter acks
// it; the handler's commit marks it handled, and Recover handles at the
// next start what a crash left unhandled. SubmitThen does the same
// without waiting (the Slack adapter acks a command from its done):
// events that arrive while the inbox is being written are written
// together next, one fsync for all (group commit). With WithOutbox, an output the
// handler kept (Output.Seq) leaves the outbox once delivered, and Replay
// sends what is left at the next start, in order; a private reply older
// than StaleReply is dropped then, with a log line.
//
// # Caveats
//
// Handlers are run concurrently up to the worker count; the handler must
// be safe for concurrent use (commands.Service is). Outbound delivery is
// in submission order. A Sender retries what is worth retrying itself
// (the Slack adapter's queue does, for rate limits and network failures);
// an error it returns is logged and the output dropped.
//
// # Middleware
//
// What every input goes through, whatever its handler, is a Middleware
// (func(Handler) Handler) around it: New wraps the handler in Recover, so
// that a panic becomes a plain answer to the sender and a log line; the
// Slack adapter adds e-mail matching (MatchByEmail) the same way.
package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
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
	// received: the inbox has it (and deduplicated it).
	received bool
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, in commands.Input) []commands.Output

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, in commands.Input) []commands.Output {
	return f(ctx, in)
}

// Middleware wraps a Handler with behaviour every input gets.
type Middleware func(Handler) Handler

// Chain wraps h in mws, the first outermost.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// Recover turns a panic in the handler into a private answer to the
// sender ("something went wrong on gpubot's side") and a log line with
// the stack.
func Recover(log *slog.Logger) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, in commands.Input) (outs []commands.Output) {
			defer func() {
				if v := recover(); v != nil {
					log.Error("panic in handler", "panic", fmt.Sprint(v), "user", in.User, "stack", string(debug.Stack()))
					outs = []commands.Output{{
						To:    commands.Destination{Kind: commands.ToSender},
						Reply: commands.Reply{Text: "Something went wrong on gpubot's side; the operator's log has the details. Please try again."},
					}}
				}
			}()
			return next.Handle(ctx, in)
		})
	}
}

// Outbox keeps the outputs the handler meant to send (those with a Seq)
// until they are delivered. *store.DB satisfies it.
type Outbox interface {
	Outbox(ctx context.Context) ([]records.Outbound, error)
	Delivered(ctx context.Context, seq uint64) error
}

// Inbox keeps deliveries from just before they are acked until they are
// handled, so that a command acked and then lost in a crash is handled
// after the restart. *store.DB satisfies it.
type Inbox interface {
	// ReceiveAll stores each delivery's Data under its Key, in one write,
	// unless the key was seen within ttl (then fresh[i] is false: a
	// redelivery), and removes the handled deliveries in the same write.
	// On error none is stored or removed.
	ReceiveAll(ctx context.Context, ds []records.Inbound, now time.Time, ttl time.Duration, handled ...string) (fresh []bool, err error)
	Inbox(ctx context.Context) ([]records.Inbound, error)
	// Handled removes deliveries, in one write.
	Handled(ctx context.Context, keys ...string) error
}

// HandledLog says whether the handler's commit said it handled a
// delivery: for an inbox kept apart from the handler's store (so that an
// ack waits only for the inbox's small write), where a crash can come
// between the handler's commit and the inbox's removal. *store.DB
// satisfies it.
type HandledLog interface {
	WasHandled(ctx context.Context, key string, now time.Time) (bool, error)
}

// StaleReply is how old a private reply may be and still be sent after a
// restart: an answer to what someone typed more than this long ago is
// dropped (with a log line) rather than sent out of the blue.
const StaleReply = time.Hour

// ErrBusy is returned by Submit when the work queue is full.
var ErrBusy = errors.New("bot: too much work queued; try again shortly")

// Runtime is the chat runtime. Create it with New and Start it.
type Runtime struct {
	h       Handler
	send    Sender
	dedupe  Deduper
	clock   clock.PassiveClock
	outbox  Outbox
	inbox   Inbox
	handled HandledLog
	// confirms: the runtime tells the outbox of a delivered output (a
	// Sender that delivers before Send returns); otherwise the Sender does.
	confirms bool
	oclock   clock.PassiveClock
	ttl      time.Duration
	workers  int
	log      *slog.Logger

	work chan Event
	out  chan commands.Output
	wg   sync.WaitGroup
	once sync.Once

	// The inbox has one writer at a time, drainInbox: deliveries on their
	// way in and the removal of handled ones share its writes.
	rmu    sync.Mutex
	rq     []receiving // on their way into the inbox, in order
	rdone  []string    // handled deliveries not yet removed from the inbox
	rflush bool        // rdone is to be written even with nothing to receive
	rbusy  bool        // a goroutine (drainInbox) is writing to the inbox
	ridle  *sync.Cond  // on rmu: signalled when rbusy becomes false

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
func WithDeduper(d Deduper, ttl time.Duration, c clock.PassiveClock) Option {
	return func(r *Runtime) { r.dedupe, r.ttl, r.clock = d, ttl, c }
}

// WithLogger sets the operator's log. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(r *Runtime) { r.log = l } }

// WithInbox keeps each keyed event in in from Submit (before the adapter
// acks it) until it is handled, deduplicating there with ttl by c's time
// instead of at the worker (WithDeduper); Recover handles what it still
// holds after a restart. The handler removes an event it acted on with
// its decision (Input.Delivery); the runtime removes it after any other.
// Default: none.
func WithInbox(in Inbox, ttl time.Duration, c clock.PassiveClock) Option {
	return func(r *Runtime) { r.inbox, r.ttl, r.clock = in, ttl, c }
}

// WithHandledLog tells Recover where the handler's commits record the
// deliveries they handled, when the inbox is kept in another store:
// those are removed from the inbox, not handled again. Default: the
// inbox is in the handler's store (its commit removes them).
func WithHandledLog(h HandledLog) Option { return func(r *Runtime) { r.handled = h } }

// WithOutbox keeps outputs in o until delivered, and Replay sends what o
// still holds (after a restart). With confirms, the Sender delivers
// before Send returns (the console) and the runtime tells o once Send
// returned, even with an error (the output is given up, logged);
// without, the Sender tells o itself when it has delivered (the Slack
// adapter, whose Send only queues). c dates stale private replies.
// Default: no outbox.
func WithOutbox(o Outbox, confirms bool, c clock.PassiveClock) Option {
	return func(r *Runtime) { r.outbox, r.confirms, r.oclock = o, confirms, c }
}

// New returns a runtime; h and s are required. h runs behind Recover.
func New(h Handler, s Sender, opts ...Option) *Runtime {
	r := &Runtime{
		h: h, send: s, workers: 4,
		log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		work: make(chan Event, 256),
		out:  make(chan commands.Output, 256),
	}
	for _, o := range opts {
		o(r)
	}
	r.ridle = sync.NewCond(&r.rmu)
	r.h = Chain(h, Recover(r.log))
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

// Wait returns when Start's goroutines have stopped (after ctx ends),
// having removed from the inbox what they handled.
func (r *Runtime) Wait() {
	r.wg.Wait()
	r.settleInbox()
}

// settleInbox waits for the inbox's writer to finish and removes the
// handled deliveries still waiting to be.
func (r *Runtime) settleInbox() {
	if r.inbox == nil {
		return
	}
	r.rmu.Lock()
	for r.rbusy {
		r.ridle.Wait()
	}
	keys := r.rdone
	r.rdone, r.rflush = nil, false
	r.rmu.Unlock()
	if len(keys) > 0 {
		if err := r.inbox.Handled(context.Background(), keys...); err != nil {
			r.log.Error("removing handled deliveries from the inbox", "deliveries", len(keys), "err", err)
		}
	}
}

// Submit queues ev for a worker. It does not block on the workers;
// ErrBusy means the queue is full. An event whose Order key has an event
// at a worker waits behind it. With an inbox, a keyed event is first
// written to it (Submit returns once it is durable), as SubmitThen does.
func (r *Runtime) Submit(ev Event) error {
	if r.inbox == nil {
		return r.submit(ev)
	}
	errc := make(chan error, 1)
	r.SubmitThen(ev, func(err error) { errc <- err })
	return <-errc
}

// Recover handles, in order, the deliveries the inbox still holds: acked
// before a crash and not handled. Call it once at start, before Start's
// workers take new work; their replies are delivered before it returns
// (or queued, by a Sender that queues).
func (r *Runtime) Recover(ctx context.Context) error {
	if r.inbox == nil {
		return nil
	}
	pending, err := r.inbox.Inbox(ctx)
	if err != nil {
		return fmt.Errorf("reading the inbox: %w", err)
	}
	if len(pending) > 0 {
		r.log.Info("handling what was acked but not handled before gpubot stopped", "deliveries", len(pending))
	}
	for _, in := range pending {
		var ev struct {
			Order string
			Input commands.Input
		}
		if err := json.Unmarshal(in.Data, &ev); err != nil {
			r.log.Error("a delivery in the inbox gpubot cannot read; dropped", "key", in.Key, "err", err)
			_ = r.inbox.Handled(ctx, in.Key)
			continue
		}
		if r.handled != nil {
			if done, err := r.handled.WasHandled(ctx, in.Key, r.clock.Now()); err == nil && done {
				_ = r.inbox.Handled(ctx, in.Key) // handled before the crash
				continue
			}
		}
		r.Process(ctx, Event{Key: in.Key, Order: ev.Order, Input: ev.Input, received: true})
	}
	r.settleInbox()
	return nil
}

func (r *Runtime) submit(ev Event) error {
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

// handledOne removes a handled delivery from the inbox: with the next
// deliveries' write (drainInbox, the inbox's one writer), or on its own
// once 64 are waiting or no more work is, so that a worker never waits
// for the inbox and a delivery's write never waits behind a removal's.
// Until then a crash leaves it there, and Recover asks whether it was
// handled.
func (r *Runtime) handledOne(key string) {
	r.rmu.Lock()
	r.rdone = append(r.rdone, key)
	if len(r.rdone) >= 64 || len(r.work) == 0 {
		r.rflush = true
	}
	start := r.rflush && !r.rbusy
	if start {
		r.rbusy = true
	}
	r.rmu.Unlock()
	if start {
		go r.drainInbox()
	}
}

// handle dedupes and runs the handler (behind Recover).
func (r *Runtime) handle(ctx context.Context, ev Event) []commands.Output {
	if ev.received {
		ev.Input.Delivery = ev.Key
		defer r.handledOne(ev.Key)
	} else if ev.Key != "" && r.dedupe != nil {
		seen, err := r.dedupe.Seen(ctx, ev.Key, r.clock.Now(), r.ttl)
		if err != nil {
			// Better to risk a duplicate than to lose the input.
			r.log.Error("checking delivery key", "key", ev.Key, "err", err)
		} else if seen {
			r.log.Info("duplicate delivery dropped", "key", ev.Key, "user", ev.Input.User)
			return nil
		}
	}
	outs := r.h.Handle(ctx, ev.Input)
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

// deliver sends one output; a failure is logged and the output dropped
// (the Sender retried what was worth retrying).
func (r *Runtime) deliver(ctx context.Context, o commands.Output) {
	err := r.send.Send(ctx, o)
	if err != nil {
		r.log.Error("delivering a reply", "to", string(o.To.Kind), "request", o.To.Request, "err", err)
	}
	if o.Seq != 0 && r.outbox != nil && r.confirms && ctx.Err() == nil {
		if err := r.outbox.Delivered(ctx, o.Seq); err != nil {
			r.log.Error("removing a delivered reply from the outbox; it may be sent again after a restart", "seq", o.Seq, "err", err)
		}
	}
}

// Replay sends, in order, what the outbox still holds: outputs decided
// before a crash or a shutdown that were not delivered. A private reply
// older than StaleReply is dropped, with a log line. Call it once at
// start, before new work; the console delivers before it returns, Slack
// queues.
func (r *Runtime) Replay(ctx context.Context) error {
	if r.outbox == nil {
		return nil
	}
	pending, err := r.outbox.Outbox(ctx)
	if err != nil {
		return fmt.Errorf("reading the outbox: %w", err)
	}
	if len(pending) > 0 {
		r.log.Info("sending what was not delivered before gpubot stopped", "messages", len(pending))
	}
	for _, m := range pending {
		o, err := commands.DecodeOutput(m.Message)
		if err != nil {
			r.log.Error("an outbox message gpubot cannot read; dropped", "seq", m.Seq, "err", err)
			_ = r.outbox.Delivered(ctx, m.Seq)
			continue
		}
		o.Seq, o.Replayed = m.Seq, true
		if age := r.oclock.Since(m.At); o.To.Kind == commands.ToSender && age > StaleReply {
			r.log.Warn("a private reply not delivered before gpubot stopped is too old to send now; dropped", "seq", m.Seq, "user", o.To.User, "age", age.Round(time.Minute).String())
			if err := r.outbox.Delivered(ctx, m.Seq); err != nil {
				return fmt.Errorf("dropping a stale reply from the outbox: %w", err)
			}
			continue
		}
		r.deliver(ctx, o)
	}
	return nil
}
