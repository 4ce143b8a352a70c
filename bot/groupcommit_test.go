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

// gatedInbox is a memInbox whose first write waits for release, and
// which records how many deliveries each write held.
type gatedInbox struct {
	memInbox
	entered chan struct{}
	release chan struct{}
	wmu     sync.Mutex
	writes  []int
}

func (g *gatedInbox) ReceiveAll(ctx context.Context, ds []records.Inbound, now time.Time, ttl time.Duration) ([]bool, error) {
	g.wmu.Lock()
	first := len(g.writes) == 0
	g.writes = append(g.writes, len(ds))
	g.wmu.Unlock()
	if first {
		close(g.entered)
		<-g.release
	}
	return g.memInbox.ReceiveAll(ctx, ds, now, ttl)
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
