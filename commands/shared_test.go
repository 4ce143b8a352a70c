package commands_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// workloadsOf shows a snapshot's workloads as "id pending" or "id on
// nodes for duration", with its time.
func workloadsOf(s *allocator.Snapshot) []string {
	out := []string{"now " + s.Now().UTC().Format(time.RFC3339)}
	for _, w := range s.Workloads() {
		if w.Admission == nil {
			out = append(out, w.ID+" pending")
			continue
		}
		out = append(out, w.ID+" on "+strings.Join(w.Admission.Nodes, ",")+" for "+w.Duration.String())
	}
	return out
}

// TestPublishedSnapshotIsNeverChanged: a view's snapshot is the
// simulated cluster's own (not a copy), so the writes after it was
// published (a submission, an extension, a cancel, time passing) must
// leave it as it was, while the next views show them; and reads that
// clone it while writes go on do not race with them (go test -race).
func TestPublishedSnapshotIsNeverChanged(t *testing.T) {
	e := newEnv(t, parse(t, small))
	check(t, e.do("alice", "request 8xh100 for 1h"), want{"channel #nlp r1", "r1 running"})
	v1 := e.svc.ViewSnapshot()
	if again := e.svc.ViewSnapshot(); again != v1 {
		t.Fatal("two reads of one view gave two snapshots")
	}
	before := workloadsOf(v1)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, text := range []string{"queue", "status", "capacity", "whatif 8xh100 for 1h"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if outs := e.svc.Handle(e.ctx, commands.Input{User: "bob", Text: text}); len(outs) == 0 {
					t.Errorf("%q answered nothing", text)
					return
				}
			}
		}()
	}
	check(t, e.do("dave", "request 8xh100 for 2h"), want{"channel #vision r2", "r2 running"})
	check(t, e.do("alice", "extend r1 2h"), want{"sender", "now ends"})
	e.advance(30 * time.Minute)
	check(t, e.do("alice", "cancel r1"), want{"sender", "r1"})
	close(stop)
	wg.Wait()

	if diff := cmp.Diff(before, workloadsOf(v1)); diff != "" {
		t.Errorf("the published snapshot changed after the writes (-then +now):\n%s", diff)
	}
	now := e.svc.ViewSnapshot()
	if now == v1 {
		t.Fatal("the writes published no new view")
	}
	if diff := cmp.Diff(e.workloads(), placed(now)); diff != "" {
		t.Errorf("the latest view is not the cluster (-cluster +view):\n%s", diff)
	}
}

// placed shows s's workloads: "ID pending" or "ID on [nodes]".
func placed(s *allocator.Snapshot) []string {
	var out []string
	for _, w := range s.Workloads() {
		if w.Admission == nil {
			out = append(out, w.ID+" pending")
		} else {
			out = append(out, fmt.Sprintf("%s on %v", w.ID, w.Admission.Nodes))
		}
	}
	return out
}

// TestRequestDecidesWithoutACopy: a request command decides (can it ever
// run, does it need approval) on the cluster's current state itself, and
// copies it only after submitting: once, for a queued request's own
// estimate from the last computation's checkpoints and its card (a
// simulated own estimate copies it again, after the simulation outside
// the write section), or for a running one's card; with the borrowing
// rule, which fits the request on the cluster, it copies it to decide
// too.
func TestRequestDecidesWithoutACopy(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml   string
		user   string
		copies uint64
		want   want
	}{
		"no borrowing rule": {small, "alice", 1, want{"channel #nlp r3", "r3 queued: starts in"}},
		// nlp borrows vision's free GPUs: a lead approves his own.
		"borrowing rule": {pooled, "bob", 2, want{"channel #nlp r3", "r3 running"}},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, parse(t, tc.yaml))
			e.do("alice", "request 8xh100 for 4h")
			e.do("alice", "request 8xh100 for 4h") // nlp's quota is full
			before := e.svc.SnapshotCopies()
			outs := e.svc.Handle(e.ctx, commands.Input{User: tc.user, Text: "request 8xh100 for 1h"})
			check(t, outs, tc.want)
			if n := e.svc.SnapshotCopies() - before; n != tc.copies {
				t.Errorf("a request command copied the cluster %d times, want %d", n, tc.copies)
			}
			check(t, e.do("alice", "request 1000xh100 for 1h"), want{"sender", "can never be admitted"})
		})
	}
}
