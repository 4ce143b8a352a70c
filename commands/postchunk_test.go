package commands_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// shiftedEngine estimates as the allocator does, later by shift.
type shiftedEngine struct{ shift time.Duration }

func (e *shiftedEngine) Estimates(s *allocator.Snapshot, opts allocator.EstimateOptions) map[string]allocator.Estimate {
	out := allocator.Estimates(s, opts)
	for id, est := range out {
		if est.Known {
			est.Earliest, est.Latest = est.Earliest.Add(e.shift), est.Latest.Add(e.shift)
			out[id] = est
		}
	}
	return out
}

// requestsPerCommit counts the requests each commit writes, once on.
type requestsPerCommit struct {
	commands.Committer
	mu     sync.Mutex
	on     bool
	counts []int
}

func (c *requestsPerCommit) Commit(ctx context.Context, w records.Writes, at time.Time) ([]uint64, error) {
	c.mu.Lock()
	if c.on && len(w.Requests) > 0 {
		c.counts = append(c.counts, len(w.Requests))
	}
	c.mu.Unlock()
	return c.Committer.Commit(ctx, w, at)
}

// TestMovedEstimatesArePostedInChunks: a refresh that moves many
// estimates saves and posts them a chunk a write section (each its own
// commit), every one once, so that it does not hold up every write for
// its whole length.
func TestMovedEstimatesArePostedInChunks(t *testing.T) {
	defer commands.SetPostChunk(3)()
	en := &shiftedEngine{}
	counted := &requestsPerCommit{}
	e := newEnv(t, parse(t, small), withEngine(en), func(o *envOptions) {
		o.commit = func(c commands.Committer) commands.Committer { counted.Committer = c; return counted }
	})
	const queued = 7
	twoRunningSevenQueued(e)
	en.shift = 5 * time.Hour
	counted.mu.Lock()
	counted.on = true
	counted.mu.Unlock()
	e.svc.MarkEstimatesStale()
	outs := e.svc.Settle(e.ctx)

	posted := newEstimatesPosted(outs)
	if len(posted) != queued {
		t.Errorf("new estimates posted for %d requests, want %d:\n%s", len(posted), queued, show(outs))
	}
	for id, n := range posted {
		if n != 1 {
			t.Errorf("%s: %d new estimates posted, want 1", id, n)
		}
	}
	counted.mu.Lock()
	defer counted.mu.Unlock()
	if want := []int{3, 3, 1}; !slices.Equal(counted.counts, want) {
		t.Errorf("requests per commit in the refresh: %v, want %v (chunks of 3)", counted.counts, want)
	}
}

// TestChunkLooksAgainAtItsRequests: a request cancelled while a refresh
// posts its earlier chunks is not posted in its own chunk, nor saved
// back as queued with the new estimate: each chunk reads its requests
// again in its write section.
func TestChunkLooksAgainAtItsRequests(t *testing.T) {
	defer commands.SetPostChunk(3)()
	en := &shiftedEngine{}
	e := newEnv(t, parse(t, small), withEngine(en))
	twoRunningSevenQueued(e) // r3 … r9 queued; chunks [r3 r4 r5] [r6 r7 r8] [r9]
	var cancelled []commands.Output
	once := sync.Once{}
	defer commands.SetBetweenChunks(func() {
		once.Do(func() {
			for _, id := range []string{"r7", "r9"} {
				cancelled = append(cancelled, e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "cancel " + id})...)
			}
		})
	})()
	en.shift = 5 * time.Hour
	e.svc.MarkEstimatesStale()
	outs := e.svc.Settle(e.ctx)

	posted := newEstimatesPosted(outs)
	for _, id := range []string{"r3", "r4", "r5", "r6", "r8"} {
		if posted[id] == 0 {
			t.Errorf("%s: no new estimate posted:\n%s", id, show(outs))
		}
	}
	rs := e.requests()
	for _, id := range []string{"r7", "r9"} {
		if posted[id] > 0 {
			t.Errorf("%s was cancelled before its chunk, but its new estimate was posted:\n%s", id, show(outs))
		}
		if r := rs[id]; r.State != records.StateCancelled {
			t.Errorf("%s is %s in the store after the refresh, want cancelled (cancel said: %s)", id, r.State, show(cancelled))
		}
	}
}

// twoRunningSevenQueued has alice fill the small cluster (r1, r2) and
// queue seven more (r3 … r9).
func twoRunningSevenQueued(e *env) {
	e.do("alice", "request 8xh100 for 4h")
	e.do("alice", "request 8xh100 for 4h")
	for range 7 {
		e.do("alice", "request 8xh100 for 1h")
	}
}

// newEstimatesPosted counts, per request, the "New estimate" posts in its
// thread among outs.
func newEstimatesPosted(outs []commands.Output) map[string]int {
	posted := map[string]int{}
	for _, o := range outs {
		if o.To.Kind == commands.ToThread && strings.HasPrefix(text(o.Reply), "New estimate") {
			posted[o.To.Request]++
		}
	}
	return posted
}
