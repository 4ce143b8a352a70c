package bot

import (
	"context"
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

// gatedInbox is a memInbox whose first write (after skip others) waits
// for release, and which records how many deliveries each write held.
type gatedInbox struct {
	memInbox
	entered chan struct{}
	release chan struct{}
	skip    int
	wmu     sync.Mutex
	writes  []int
}

func (g *gatedInbox) ReceiveAll(ctx context.Context, ds []records.Inbound, now time.Time, ttl time.Duration, handled ...string) ([]bool, error) {
	g.wmu.Lock()
	first := len(g.writes) == g.skip
	g.writes = append(g.writes, len(ds))
	g.wmu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	return g.memInbox.ReceiveAll(ctx, ds, now, ttl, handled...)
}

// holds reports whether key was written (the worker may have handled
// and removed it since).
func (g *gatedInbox) holds(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen[key]
}

// TestGroupCommit: deliveries that arrive while the inbox is being
// written go into it together in the next write; each is reported taken
// (acked) only once the inbox holds it, none before; a redelivery within
// the batch is dropped; the workers get them in the order given.
func TestGroupCommit(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	in := &gatedInbox{memInbox: memInbox{seen: map[string]bool{}}, entered: make(chan struct{}), release: make(chan struct{})}
	handled := make(chan string, 10)
	h := handlerFunc(func(_ context.Context, i commands.Input) []commands.Output {
		handled <- i.Text
		return nil
	})
	r := New(h, &recorder{}, WithInbox(in, time.Hour, clk), WithWorkers(1))
	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)

	type taken struct {
		key     string
		err     error
		durable bool // the inbox held it when it was reported taken
	}
	tk := make(chan taken, 10)
	submit := func(key string) {
		r.SubmitThen(Event{Key: key, Order: "U0ALICE", Input: commands.Input{User: "U0ALICE", Text: key}}, func(err error) {
			tk <- taken{key, err, in.holds(key)}
		})
	}
	submit("e1")
	<-in.entered // e1's write is under way
	for _, k := range []string{"e2", "e3", "e2", "e4"} {
		submit(k)
	}
	select {
	case got := <-tk:
		t.Fatalf("%s reported taken before its write finished", got.key)
	default:
	}
	close(in.release)
	var order []string
	for range 5 {
		got := <-tk
		if got.err != nil {
			t.Errorf("%s: %v", got.key, got.err)
		}
		if !got.durable {
			t.Errorf("%s reported taken before the inbox held it", got.key)
		}
		order = append(order, got.key)
	}
	if diff := cmp.Diff([]string{"e1", "e2", "e3", "e2", "e4"}, order); diff != "" {
		t.Errorf("reported taken in another order (-want +got):\n%s", diff)
	}
	in.wmu.Lock()
	writes := slices.Clone(in.writes)
	in.wmu.Unlock()
	if diff := cmp.Diff([]int{1, 4}, writes); diff != "" {
		t.Errorf("deliveries per inbox write (-want +got):\n%s", diff)
	}
	var got []string
	for range 4 {
		got = append(got, <-handled)
	}
	cancel()
	r.Wait()
	if diff := cmp.Diff([]string{"e1", "e2", "e3", "e4"}, got); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	if got, _ := in.Inbox(context.Background()); len(got) != 0 {
		t.Errorf("the inbox still holds %d handled deliveries: %v", len(got), fmt.Sprint(got))
	}
}

// stuckRemovals is a memInbox whose removals on their own (Handled) wait
// for release, as a slow fsync would.
type stuckRemovals struct {
	memInbox
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *stuckRemovals) Handled(ctx context.Context, keys ...string) error {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return s.memInbox.Handled(ctx, keys...)
}

// TestWorkersDoNotWaitForTheInbox: removing handled deliveries from the
// inbox is the inbox writer's work, not the worker's: while a removal is
// stuck, the worker handles the next command. (The workers' removals
// used to be written by the workers themselves, each with its fsync,
// and a delivery's write waited behind them.)
func TestWorkersDoNotWaitForTheInbox(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	in := &stuckRemovals{memInbox: memInbox{seen: map[string]bool{}}, entered: make(chan struct{}), release: make(chan struct{})}
	handled := make(chan string, 10)
	gate := make(chan struct{})
	h := handlerFunc(func(_ context.Context, i commands.Input) []commands.Output {
		if i.Text == "e1" {
			<-gate // e2 is queued behind e1 before e1 is done
		}
		handled <- i.Text
		return nil
	})
	r := New(h, &recorder{}, WithInbox(in, time.Hour, clk), WithWorkers(1))
	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)
	for _, k := range []string{"e1", "e2"} {
		if err := r.Submit(Event{Key: k, Order: "U0ALICE", Input: commands.Input{User: "U0ALICE", Text: k}}); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	if got := <-handled; got != "e1" {
		t.Fatalf("handled %s first, want e1", got)
	}
	<-in.entered // e1's removal is stuck
	if got := <-handled; got != "e2" {
		t.Fatalf("handled %s second, want e2", got)
	}
	close(in.release)
	cancel()
	r.Wait()
	if got, _ := in.Inbox(context.Background()); len(got) != 0 {
		t.Errorf("the inbox still holds %d handled deliveries: %v", len(got), fmt.Sprint(got))
	}
}

// loggedInbox is a gatedInbox that logs its removals in log.
type loggedInbox struct {
	*gatedInbox
	log func(string)
}

func (l loggedInbox) Handled(ctx context.Context, keys ...string) error {
	l.log(fmt.Sprint("removed ", keys))
	return l.gatedInbox.Handled(ctx, keys...)
}

// TestRefusedTogether: the deliveries of one write that the runtime has no
// room for are removed from the inbox in one write, after the others of
// the batch are told they were taken, and are reported busy only once
// removed. (Each used to be removed with its own write, one fsync each,
// holding up the acks of everything behind it when gpubot was busiest.)
func TestRefusedTogether(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var log []string
	add := func(s string) {
		mu.Lock()
		log = append(log, s)
		mu.Unlock()
	}
	in := loggedInbox{&gatedInbox{memInbox: memInbox{seen: map[string]bool{}}, entered: make(chan struct{}), release: make(chan struct{}), skip: 1}, add}
	gate, started := make(chan struct{}), make(chan struct{}, 1)
	h := handlerFunc(func(context.Context, commands.Input) []commands.Output {
		select {
		case started <- struct{}{}:
		default:
		}
		<-gate
		return nil
	})
	r := New(h, &recorder{}, WithInbox(in, time.Hour, clk), WithWorkers(1), WithQueue(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		close(gate)
		cancel()
		r.Wait()
	}()
	r.Start(ctx)
	told := make(chan struct{}, 10)
	submit := func(key, order string) {
		r.SubmitThen(Event{Key: key, Order: order, Input: commands.Input{User: order, Text: key}}, func(err error) {
			add(fmt.Sprintf("%s: %v", key, err))
			told <- struct{}{}
		})
	}
	// e0 at the worker; e1 (in the second write, held up) fills the
	// queue; in the third write e2 waits behind e0 (same person), e3 and
	// e4 find no room.
	submit("e0", "U0A")
	<-started
	submit("e1", "U0B")
	<-in.entered
	submit("e2", "U0A")
	submit("e3", "U0C")
	submit("e4", "U0D")
	close(in.release)
	for range 5 {
		<-told
	}
	mu.Lock()
	got := slices.Clone(log)
	mu.Unlock()
	want := []string{"e0: <nil>", "e1: <nil>", "e2: <nil>", "removed [e3 e4]", fmt.Sprintf("e3: %v", ErrBusy), fmt.Sprintf("e4: %v", ErrBusy)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what happened, in order (-want +got):\n%s", diff)
	}
	for _, k := range []string{"e3", "e4"} {
		if held, _ := in.Inbox(context.Background()); slices.ContainsFunc(held, func(d records.Inbound) bool { return d.Key == k }) {
			t.Errorf("refused %s is still in the inbox", k)
		}
	}
}
