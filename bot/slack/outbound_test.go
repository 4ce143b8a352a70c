package slackbot

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// until spins until cond holds (other goroutines get to run); it fails
// the test if that takes more than 10 s of real time.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// log records what calls did, in order.
type log struct {
	mu  sync.Mutex
	got []string
}

func (l *log) add(s string) { l.mu.Lock(); l.got = append(l.got, s); l.mu.Unlock() }
func (l *log) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}
func (l *log) len() int { return len(l.list()) }

func startQueue(t *testing.T, p Pacing, opts ...QueueOption) (*Queue, *clocktesting.FakeClock, context.CancelFunc) {
	t.Helper()
	fc := clocktesting.NewFakeClock(t0)
	q := NewQueue(p, append([]QueueOption{WithQueueClock(fc)}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	q.Start(ctx)
	t.Cleanup(func() { cancel(); q.Wait() })
	return q, fc, cancel
}

func TestQueueKeepsOrderWithinALaneThroughRateLimits(t *testing.T) {
	q, fc, _ := startQueue(t, Pacing{})
	var l log
	limited := 0
	for i := range 5 {
		q.Enqueue(Call{Lane: "ch:C1", Method: "chat.postMessage", Do: func(context.Context) error {
			if i == 1 && limited < 2 {
				limited++
				return &slack.RateLimitedError{RetryAfter: 3 * time.Second}
			}
			l.add(fmt.Sprint(i))
			return nil
		}})
	}
	for range 2 {
		until(t, "the lane to wait for Retry-After", fc.HasWaiters)
		fc.Step(3 * time.Second)
	}
	until(t, "all calls", func() bool { return q.Pending() == 0 })
	if d := cmp.Diff([]string{"0", "1", "2", "3", "4"}, l.list()); d != "" {
		t.Errorf("order (-want +got):\n%s", d)
	}
	if got := q.RateLimited(); got != 2 {
		t.Errorf("RateLimited() = %d, want the 2 answers of 429", got)
	}
}

func TestQueueHonoursRetryAfterAcrossLanes(t *testing.T) {
	q, fc, _ := startQueue(t, Pacing{})
	var l log
	first := true
	q.Enqueue(Call{Lane: "ch:A", Method: "chat.postMessage", Do: func(context.Context) error {
		if first {
			first = false
			return &slack.RateLimitedError{RetryAfter: 10 * time.Second}
		}
		l.add("A@" + fc.Now().Sub(t0).String())
		return nil
	}})
	until(t, "the 429", fc.HasWaiters)
	// Another lane's call of the same method waits for the Retry-After too;
	// a different method does not.
	q.Enqueue(Call{Lane: "ch:B", Method: "chat.postMessage", Do: func(context.Context) error {
		l.add("B@" + fc.Now().Sub(t0).String())
		return nil
	}})
	q.Enqueue(Call{Lane: "user:U1", Method: "chat.postEphemeral", Do: func(context.Context) error {
		l.add("E@" + fc.Now().Sub(t0).String())
		return nil
	}})
	until(t, "the ephemeral", func() bool { return l.len() == 1 })
	until(t, "both lanes to wait", func() bool { return fc.Waiters() == 2 })
	fc.Step(9 * time.Second)
	if got := l.list(); len(got) != 1 {
		t.Fatalf("calls before Retry-After passed: %v", got)
	}
	until(t, "timers to be re-armed or still waiting", func() bool { return fc.Waiters() == 2 })
	fc.Step(time.Second)
	until(t, "all calls", func() bool { return q.Pending() == 0 })
	got := l.list()
	if d := cmp.Diff([]string{"E@0s", "A@10s", "B@10s"}, got, cmpSortStrings); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}

var cmpSortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestQueueLanesAreIndependent(t *testing.T) {
	q, _, _ := startQueue(t, Pacing{})
	block := make(chan struct{})
	var l log
	q.Enqueue(Call{Lane: "ch:slow", Method: "chat.postMessage", Do: func(ctx context.Context) error {
		<-block
		l.add("slow")
		return nil
	}})
	for i := range 3 {
		q.Enqueue(Call{Lane: "ch:fast", Method: "chat.postMessage", Do: func(context.Context) error {
			l.add(fmt.Sprint("fast", i))
			return nil
		}})
	}
	until(t, "the fast lane", func() bool { return l.len() == 3 })
	close(block)
	until(t, "the slow lane", func() bool { return q.Pending() == 0 })
	if d := cmp.Diff([]string{"fast0", "fast1", "fast2", "slow"}, l.list()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestQueuePacesALaneAfterItsBurst(t *testing.T) {
	q, fc, _ := startQueue(t, Pacing{PerSecond: 1, Burst: 3})
	var l log
	for i := range 5 {
		q.Enqueue(Call{Lane: "ch:C1", Method: "chat.postMessage", Paced: true, Do: func(context.Context) error {
			l.add(fmt.Sprintf("%d@%s", i, fc.Now().Sub(t0)))
			return nil
		}})
	}
	// Unpaced calls (card updates) in another lane are not held back.
	q.Enqueue(Call{Lane: "ch:C2", Method: "chat.update", Do: func(context.Context) error { l.add("update"); return nil }})
	until(t, "the burst", func() bool { return l.len() == 4 })
	until(t, "the wait", fc.HasWaiters)
	fc.Step(time.Second)
	until(t, "the fourth", func() bool { return l.len() == 5 })
	until(t, "the wait", fc.HasWaiters)
	fc.Step(time.Second)
	until(t, "all", func() bool { return q.Pending() == 0 })
	want := []string{"0@0s", "1@0s", "2@0s", "3@1s", "4@2s", "update"}
	if d := cmp.Diff(want, l.list(), cmpSortStrings); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestQueueDropsNothingUnderRateLimits(t *testing.T) {
	q, fc, _ := startQueue(t, Pacing{})
	var mu sync.Mutex
	got := map[string][]int{}
	attempts := 0
	const lanes, per = 4, 25
	for i := range per {
		for ln := range lanes {
			lane := fmt.Sprint("ch:C", ln)
			q.Enqueue(Call{Lane: lane, Method: "chat.postMessage", Do: func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				attempts++
				if attempts%7 == 0 {
					return &slack.RateLimitedError{RetryAfter: time.Second}
				}
				got[lane] = append(got[lane], i)
				return nil
			}})
		}
	}
	stop := make(chan struct{})
	go func() { // keep time moving while lanes wait
		for {
			select {
			case <-stop:
				return
			default:
				if fc.HasWaiters() {
					fc.Step(time.Second)
				}
				runtime.Gosched()
			}
		}
	}()
	until(t, "every call", func() bool { return q.Pending() == 0 })
	close(stop)
	for ln := range lanes {
		lane := fmt.Sprint("ch:C", ln)
		want := make([]int, per)
		for i := range want {
			want[i] = i
		}
		if d := cmp.Diff(want, got[lane]); d != "" {
			t.Errorf("lane %s (-want +got):\n%s", lane, d)
		}
	}
}

func TestQueueRetriesTransientFailuresOnly(t *testing.T) {
	q, fc, _ := startQueue(t, Pacing{}, WithMaxAttempts(3))
	var l log
	q.Enqueue(Call{Lane: "a", Method: "chat.postMessage", Do: func(context.Context) error {
		l.add("permanent")
		return slack.SlackErrorResponse{Err: "channel_not_found"}
	}})
	q.Enqueue(Call{Lane: "b", Method: "chat.update", Do: func(context.Context) error {
		l.add("transient")
		return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
	}})
	q.Enqueue(Call{Lane: "c", Method: "views.publish", Do: func(context.Context) error {
		l.add("panic")
		panic("boom")
	}})
	for range 2 {
		until(t, "a backoff", fc.HasWaiters)
		fc.Step(time.Minute)
	}
	until(t, "all", func() bool { return q.Pending() == 0 })
	want := []string{"panic", "permanent", "transient", "transient", "transient"}
	if d := cmp.Diff(want, l.list(), cmpSortStrings); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestQueueStopsWithItsContext(t *testing.T) {
	q, fc, cancel := startQueue(t, Pacing{})
	var l log
	q.Enqueue(Call{Lane: "a", Method: "chat.postMessage", Do: func(context.Context) error {
		return &slack.RateLimitedError{RetryAfter: time.Hour}
	}})
	q.Enqueue(Call{Lane: "a", Method: "chat.postMessage", Do: func(context.Context) error { l.add("second"); return nil }})
	until(t, "the wait", fc.HasWaiters)
	dctx, dcancel := context.WithCancel(context.Background())
	dcancel()
	if err := q.Drain(dctx); err == nil {
		t.Error("Drain with a done context and pending calls: no error")
	}
	cancel()
	q.Wait() // returns: lanes stop with the context
	if l.len() != 0 {
		t.Errorf("calls made after cancel: %v", l.list())
	}
	q.Enqueue(Call{Lane: "b", Method: "chat.postMessage", Do: func(context.Context) error { l.add("late"); return nil }})
	if q.Pending() != 0 {
		t.Errorf("pending after stop: %d", q.Pending())
	}
}

func TestQueueRetriesThroughAnOutageForAWhile(t *testing.T) {
	q, fc, _ := startQueue(t, Pacing{}, WithRetryFor(2*time.Minute))
	var l log
	step := func() {
		for q.Pending() > 0 {
			until(t, "a backoff", func() bool { return fc.HasWaiters() || q.Pending() == 0 })
			if q.Pending() > 0 {
				fc.Step(time.Second)
			}
		}
	}
	q.Enqueue(Call{Lane: "a", Method: "chat.postMessage", Do: func(context.Context) error {
		l.add(fc.Now().Sub(t0).String())
		if fc.Now().Sub(t0) < time.Minute {
			return fmt.Errorf("dial: %w", errTransient) // the network is down for a minute
		}
		return nil
	}})
	step()
	if d := cmp.Diff([]string{"0s", "1s", "3s", "7s", "15s", "31s", "1m1s"}, l.list()); d != "" {
		t.Errorf("attempts (backoff 1, 2, 4, 8, 16, 30 s) (-want +got):\n%s", d)
	}
	began := fc.Now()
	q.Enqueue(Call{Lane: "b", Method: "chat.update", Do: func(context.Context) error {
		return slack.StatusCodeError{Code: 502, Status: "502 Bad Gateway"} // never recovers
	}})
	step()
	if took := fc.Now().Sub(began); took < 2*time.Minute || took > 3*time.Minute {
		t.Errorf("a call failing for ever was given up after %s; want 2 minutes and a backoff", took)
	}
}

func TestQueueDropsOnlySupersededCardUpdates(t *testing.T) {
	q, _, _ := startQueue(t, Pacing{})
	block := make(chan struct{})
	var l log
	add := func(name, supersedes string) {
		q.Enqueue(Call{Lane: "ch:C1", Method: "chat.update", Supersedes: supersedes, Do: func(context.Context) error {
			if name == "first" {
				<-block
			}
			l.add(name)
			return nil
		}})
	}
	add("first", "card:r1") // running: never dropped
	until(t, "the first call to start", func() bool { return q.Pending() == 1 })
	add("r1 v2", "card:r1")
	add("thread", "")
	add("r2 v1", "card:r2")
	add("r1 v3", "card:r1")
	if n := q.Pending(); n != 4 {
		t.Errorf("pending %d, want 4 (r1 v2 superseded)", n)
	}
	close(block)
	until(t, "all", func() bool { return q.Pending() == 0 })
	if d := cmp.Diff([]string{"first", "thread", "r2 v1", "r1 v3"}, l.list()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
