package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

type handlerFunc func(context.Context, commands.Input) []commands.Output

func (f handlerFunc) Handle(ctx context.Context, in commands.Input) []commands.Output {
	return f(ctx, in)
}

// recorder is a Sender that keeps what it was sent.
type recorder struct {
	mu   sync.Mutex
	got  []commands.Output
	fail map[string]int // reply text → failures left
	err  error
	sent chan struct{} // if set, signalled once per delivered output
}

func (r *recorder) Send(_ context.Context, o commands.Output) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail[o.Reply.Text] > 0 {
		r.fail[o.Reply.Text]--
		return r.err
	}
	r.got = append(r.got, o)
	if r.sent != nil {
		r.sent <- struct{}{}
	}
	return nil
}

func (r *recorder) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, o := range r.got {
		out = append(out, o.Reply.Text)
	}
	return out
}

type memDedupe struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (m *memDedupe) Seen(_ context.Context, key string, now time.Time, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]time.Time{}
	}
	exp, ok := m.seen[key]
	m.seen[key] = now.Add(ttl)
	return ok && now.Before(exp), nil
}

func echo(_ context.Context, in commands.Input) []commands.Output {
	return []commands.Output{
		{To: commands.Destination{Kind: commands.ToSender}, Reply: commands.Reply{Text: "ack " + in.Text}},
		{To: commands.Destination{Kind: commands.ToThread, Request: "r1"}, Reply: commands.Reply{Text: "thread " + in.Text}},
	}
}

func TestProcessDeliversInOrderAndAddressesTheSender(t *testing.T) {
	rec := &recorder{}
	rt := New(handlerFunc(echo), rec)
	rt.Process(context.Background(), Event{Input: commands.Input{User: "U0ALICE", Channel: "C1", Text: "status"}})
	want := []commands.Output{
		{To: commands.Destination{Kind: commands.ToSender, User: "U0ALICE", Channel: "C1"}, Reply: commands.Reply{Text: "ack status"}},
		{To: commands.Destination{Kind: commands.ToThread, Request: "r1"}, Reply: commands.Reply{Text: "thread status"}},
	}
	if diff := cmp.Diff(want, rec.got); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
}

func TestDuplicateDeliveriesAreProcessedOnce(t *testing.T) {
	rec := &recorder{}
	calls := 0
	h := handlerFunc(func(ctx context.Context, in commands.Input) []commands.Output {
		calls++
		return echo(ctx, in)
	})
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	rt := New(h, rec, WithDeduper(&memDedupe{}, time.Hour, clock))
	ev := Event{Key: "env-1", Input: commands.Input{User: "U0ALICE", Text: "request 8xh100 4h"}}
	rt.Process(context.Background(), ev)
	rt.Process(context.Background(), ev)
	if calls != 1 {
		t.Fatalf("handler ran %d times for one delivery key, want 1", calls)
	}
	clock.SetTime(clock.Now().Add(2 * time.Hour)) // past the TTL: a new delivery
	rt.Process(context.Background(), ev)
	if calls != 2 {
		t.Fatalf("after the TTL the handler ran %d times in all, want 2", calls)
	}
	// No key: never deduplicated.
	rt.Process(context.Background(), Event{Input: ev.Input})
	rt.Process(context.Background(), Event{Input: ev.Input})
	if calls != 4 {
		t.Fatalf("events without a key ran the handler %d times in all, want 4", calls)
	}
}

func TestPanicInHandlerBecomesAPlainAnswer(t *testing.T) {
	rec := &recorder{}
	rt := New(handlerFunc(func(context.Context, commands.Input) []commands.Output { panic("boom") }), rec)
	rt.Process(context.Background(), Event{Input: commands.Input{User: "U0BOB", Channel: "C9", Text: "x"}})
	if len(rec.got) != 1 {
		t.Fatalf("got %d outputs after a panic, want 1 answer to the sender", len(rec.got))
	}
	o := rec.got[0]
	if o.To.Kind != commands.ToSender || o.To.User != "U0BOB" || o.Reply.Text == "" {
		t.Errorf("answer after a panic = %+v, want a private message to U0BOB", o)
	}
}

// TestSendErrorsDropOnlyThatOutput: the Sender retries what is worth
// retrying; an error it returns drops that output, and the next goes out.
func TestSendErrorsDropOnlyThatOutput(t *testing.T) {
	rec := &recorder{fail: map[string]int{"ack b": 1}, err: errors.New("channel_not_found")}
	rt := New(handlerFunc(echo), rec)
	rt.Process(context.Background(), Event{Input: commands.Input{Text: "b"}})
	if diff := cmp.Diff([]string{"thread b"}, rec.texts()); diff != "" {
		t.Errorf("a failed send should drop only that output (-want +got):\n%s", diff)
	}
}

// TestChainRunsMiddlewareOutermostFirst: Chain(h, a, b) is a(b(h)).
func TestChainRunsMiddlewareOutermostFirst(t *testing.T) {
	var order []string
	mw := func(name string) Middleware {
		return func(next Handler) Handler {
			return HandlerFunc(func(ctx context.Context, in commands.Input) []commands.Output {
				order = append(order, name)
				return next.Handle(ctx, in)
			})
		}
	}
	h := Chain(handlerFunc(func(context.Context, commands.Input) []commands.Output { order = append(order, "handler"); return nil }), mw("a"), mw("b"))
	h.Handle(context.Background(), commands.Input{})
	if diff := cmp.Diff([]string{"a", "b", "handler"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestSubmitRunsOnWorkersAndKeepsOutboundOrderPerInput(t *testing.T) {
	const n = 40
	rec := &recorder{sent: make(chan struct{}, 2*n)}
	h := handlerFunc(echo)
	ctx, cancel := context.WithCancel(context.Background())
	rt := New(h, rec, WithWorkers(3), WithQueue(64))
	rt.Start(ctx)
	for i := range n {
		if err := rt.Submit(Event{Input: commands.Input{Text: fmt.Sprint(i)}}); err != nil {
			t.Fatalf("Submit %d: %v", i, err)
		}
	}
	for range 2 * n {
		<-rec.sent
	}
	cancel()
	rt.Wait()
	pos := map[string]int{}
	for i, txt := range rec.texts() {
		pos[txt] = i
	}
	for i := range n {
		a, b := pos[fmt.Sprintf("ack %d", i)], pos[fmt.Sprintf("thread %d", i)]
		if a >= b {
			t.Errorf("input %d: reply delivered after its thread update (%d >= %d)", i, a, b)
		}
	}
}

func TestSubmitRefusesWhenTheQueueIsFull(t *testing.T) {
	rt := New(handlerFunc(echo), &recorder{}, WithQueue(1))
	if err := rt.Submit(Event{}); err != nil {
		t.Fatalf("first Submit: %v", err)
	}
	if err := rt.Submit(Event{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Submit on a full queue = %v, want ErrBusy", err)
	}
}

func TestSubmitKeepsOneOrderKeysEventsInOrder(t *testing.T) {
	rec := &recorder{sent: make(chan struct{}, 100)}
	release := make(chan struct{})
	h := handlerFunc(func(_ context.Context, in commands.Input) []commands.Output {
		if in.Text == "slow" {
			<-release
		}
		return []commands.Output{{To: commands.Destination{Kind: commands.ToSender}, Reply: commands.Reply{Text: in.User + ":" + in.Text}}}
	})
	rt := New(h, rec, WithWorkers(4))
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); rt.Wait() }()
	rt.Start(ctx)
	for _, ev := range []Event{
		{Order: "U1", Input: commands.Input{User: "U1", Text: "slow"}},
		{Order: "U1", Input: commands.Input{User: "U1", Text: "a"}},
		{Order: "U2", Input: commands.Input{User: "U2", Text: "b"}},
		{Order: "U1", Input: commands.Input{User: "U1", Text: "c"}},
	} {
		if err := rt.Submit(ev); err != nil {
			t.Fatal(err)
		}
	}
	<-rec.sent // U2's event is not held up by U1's slow one
	if got := rec.texts(); len(got) != 1 || got[0] != "U2:b" {
		t.Fatalf("first delivered: %q, want U2:b", got)
	}
	close(release)
	for range 3 {
		<-rec.sent
	}
	if d := cmp.Diff([]string{"U2:b", "U1:slow", "U1:a", "U1:c"}, rec.texts()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// memOutbox is an Outbox in memory.
type memOutbox struct {
	mu        sync.Mutex
	pending   []records.Outbound
	delivered []uint64
}

func (m *memOutbox) Outbox(context.Context) ([]records.Outbound, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.pending), nil
}

func (m *memOutbox) Delivered(_ context.Context, seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delivered = append(m.delivered, seq)
	m.pending = slices.DeleteFunc(m.pending, func(o records.Outbound) bool { return o.Seq == seq })
	return nil
}

func outbound(t *testing.T, seq uint64, at time.Time, o commands.Output) records.Outbound {
	t.Helper()
	data, err := commands.EncodeOutput(o)
	if err != nil {
		t.Fatal(err)
	}
	return records.Outbound{Seq: seq, At: at, Message: data}
}

// TestOutboxConfirmsAndReplays: a kept output leaves the outbox once
// delivered; after a restart, Replay sends what is left in order, except
// a private reply too old to make sense, which is dropped.
func TestOutboxConfirmsAndReplays(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	ob := &memOutbox{pending: []records.Outbound{
		outbound(t, 3, now.Add(-time.Minute), commands.Output{To: commands.Destination{Kind: commands.ToChannel, Channel: "#nlp", Request: "r1"}, Reply: commands.Reply{Text: "card r1"}}),
		outbound(t, 4, now.Add(-2*StaleReply), commands.Output{To: commands.Destination{Kind: commands.ToSender, User: "U0ALICE"}, Reply: commands.Reply{Text: "old answer"}}),
		outbound(t, 5, now.Add(-time.Minute), commands.Output{To: commands.Destination{Kind: commands.ToThread, Request: "r1"}, Reply: commands.Reply{Text: "thread r1"}}),
	}}
	rec := &recorder{}
	h := handlerFunc(func(context.Context, commands.Input) []commands.Output {
		return []commands.Output{{To: commands.Destination{Kind: commands.ToSender}, Reply: commands.Reply{Text: "kept"}, Seq: 6},
			{To: commands.Destination{Kind: commands.ToSender}, Reply: commands.Reply{Text: "not kept"}}}
	})
	rt := New(h, rec, WithOutbox(ob, true, clk))
	if err := rt.Replay(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"card r1", "thread r1"}, rec.texts()); diff != "" {
		t.Errorf("replayed (-want +got):\n%s", diff)
	}
	rt.Process(context.Background(), Event{Input: commands.Input{User: "U0BOB", Text: "x"}})
	if diff := cmp.Diff([]uint64{3, 4, 5, 6}, ob.delivered); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	if len(ob.pending) != 0 {
		t.Errorf("left in the outbox: %+v", ob.pending)
	}
}

// memInbox is an Inbox in memory.
type memInbox struct {
	mu      sync.Mutex
	seen    map[string]bool
	pending []records.Inbound
	seq     uint64
}

func (m *memInbox) ReceiveAll(_ context.Context, ds []records.Inbound, now time.Time, _ time.Duration, handled ...string) ([]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = slices.DeleteFunc(m.pending, func(in records.Inbound) bool { return slices.Contains(handled, in.Key) })
	fresh := make([]bool, len(ds))
	for i, d := range ds {
		if m.seen[d.Key] {
			continue
		}
		m.seen[d.Key] = true
		m.seq++
		m.pending = append(m.pending, records.Inbound{Seq: m.seq, Key: d.Key, At: now, Data: d.Data})
		fresh[i] = true
	}
	return fresh, nil
}

func (m *memInbox) Inbox(context.Context) ([]records.Inbound, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.pending), nil
}

func (m *memInbox) Handled(_ context.Context, keys ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = slices.DeleteFunc(m.pending, func(in records.Inbound) bool { return slices.Contains(keys, in.Key) })
	return nil
}

// TestInboxKeepsWhatWasAckedUntilHandled: Submit keeps a keyed event in
// the inbox before it returns (before the adapter acks), drops a
// redelivery there, and the event leaves the inbox once handled; what a
// crash left in it is handled by Recover after the restart, with its
// delivery key in the input.
func TestInboxKeepsWhatWasAckedUntilHandled(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	in := &memInbox{seen: map[string]bool{}}
	var mu sync.Mutex
	var deliveries []string
	h := handlerFunc(func(_ context.Context, i commands.Input) []commands.Output {
		mu.Lock()
		deliveries = append(deliveries, i.Delivery)
		mu.Unlock()
		return []commands.Output{{To: commands.Destination{Kind: commands.ToSender}, Reply: commands.Reply{Text: "ok " + i.Text}}}
	})
	// A runtime that never starts: as if it crashed after the acks.
	crashed := New(h, &recorder{}, WithInbox(in, time.Hour, clk))
	for _, key := range []string{"e1", "e2", "e1"} {
		if err := crashed.Submit(Event{Key: key, Order: "U0ALICE", Input: commands.Input{User: "U0ALICE", Text: key}}); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := in.Inbox(context.Background()); len(got) != 2 {
		t.Fatalf("the inbox holds %d deliveries after e1, e2 and e1 again; want 2", len(got))
	}
	rec := &recorder{}
	restarted := New(h, rec, WithInbox(in, time.Hour, clk))
	if err := restarted.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ok e1", "ok e2"}, rec.texts()); diff != "" {
		t.Errorf("recovered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"e1", "e2"}, deliveries); diff != "" {
		t.Errorf("the handler was told the deliveries (-want +got):\n%s", diff)
	}
	if got, _ := in.Inbox(context.Background()); len(got) != 0 {
		t.Errorf("left in the inbox: %+v", got)
	}
}
