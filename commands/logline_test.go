package commands_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// ticking moves 5 ms each time it is read: every command takes 5 ms.
type ticking struct {
	mu sync.Mutex
	t  time.Time
}

func (c *ticking) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(5 * time.Millisecond)
	return c.t
}

func (c *ticking) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func TestOneLogLinePerCommandAndButton(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			ctx := context.Background()
			cfg := parse(t, small)
			db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			clk := clocktesting.NewFakeClock(t0)
			sim, _, err := simcluster.New(ctx, cfg.Cluster(), db, clk)
			if err != nil {
				t.Fatal(err)
			}
			var buf logBuffer
			svc, err := commands.NewService(ctx, cfg.Settings(), commands.Deps{Cluster: sim, Requests: db, IDs: db, Audit: db, Usage: db, Clock: clk},
				commands.WithLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))),
				commands.WithLatencyClock(&ticking{t: t0}))
			if err != nil {
				t.Fatal(err)
			}
			svc.Handle(ctx, commands.Input{User: "U0ALICE", Text: `request 16xh100 for 2h reason "secret project"`})
			svc.Handle(ctx, commands.Input{User: "U0ALICE", Text: "capacity"})
			svc.Handle(ctx, commands.Input{User: "U0ALICE", Text: "reqest 8xh100"})
			svc.Handle(ctx, commands.Input{User: "U0BOB", Action: &commands.Action{Name: commands.VerbApprove, Request: "r1"}})
			svc.Handle(ctx, commands.Input{User: "U0DAVE", Action: &commands.Action{Name: commands.VerbCancel, Request: "r1"}})
			svc.Handle(ctx, commands.Input{User: "U0MALLORY", Text: "status"})
			type line struct {
				Msg       string
				User      string
				Person    string
				Verb      string
				Request   string
				Outcome   string
				LatencyMs float64
				Text      string
			}
			type action struct {
				Msg, Person, Action, Request, Outcome string
				LatencyMs                             float64
			}
			var got []line
			var actions []action
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var v line
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatalf("log line %q is not JSON: %v", l, err)
				}
				switch v.Msg {
				case "command handled":
					got = append(got, v)
				case "cluster action":
					var a action
					_ = json.Unmarshal([]byte(l), &a)
					actions = append(actions, a)
				}
			}
			// r1 needed approval: it went to the cluster when bob approved.
			if d := cmp.Diff([]action{{Msg: "cluster action", Person: "bob", Action: "submit", Request: "r1", Outcome: "ok", LatencyMs: 5}}, actions); d != "" {
				t.Errorf("cluster action lines (-want +got):\n%s", d)
			}
			text := func(s string) string {
				if level == slog.LevelDebug {
					return s
				}
				return ""
			}
			want := []line{
				{User: "U0ALICE", Person: "alice", Verb: "request", Request: "r1", Outcome: "ok", Text: text(`request 16xh100 for 2h reason "secret project"`)},
				{User: "U0ALICE", Person: "alice", Verb: "capacity", Outcome: "ok", Text: text("capacity")},
				{User: "U0ALICE", Person: "alice", Verb: "command", Outcome: "invalid", Text: text("reqest 8xh100")},
				{User: "U0BOB", Person: "bob", Verb: "button:approve", Request: "r1", Outcome: "ok"},
				{User: "U0DAVE", Person: "dave", Verb: "button:cancel", Request: "r1", Outcome: "refused"},
				{User: "U0MALLORY", Verb: "command", Outcome: "refused", Text: text("status")},
			}
			for i := range want {
				want[i].Msg, want[i].LatencyMs = "command handled", 5
			}
			want[3].LatencyMs = 15 // the approval's submit read the ticking clock twice more
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("log lines (-want +got):\n%s\nlog:\n%s", d, buf.String())
			}
			if level == slog.LevelInfo && strings.Contains(buf.String(), "secret project") {
				t.Errorf("what alice typed is in the log at info level:\n%s", buf.String())
			}
		})
	}
}
