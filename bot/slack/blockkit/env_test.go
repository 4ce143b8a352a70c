package blockkit_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// t0 is when every scenario starts: Tuesday 09:00 in the bundled
// example's Europe/Berlin.
var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// env is the real service on the bundled example configuration, seeded,
// over a bbolt store in a temporary directory and the simulated cluster.
type env struct {
	t     *testing.T
	ctx   context.Context
	sim   *simcluster.Cluster
	clock *clocktesting.FakeClock
	svc   *commands.Service
	db    *store.DB
	eng   *digest.Engine
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{t: t, ctx: ctx, clock: clocktesting.NewFakeClock(t0), db: db}
	e.sim, _, err = simcluster.New(ctx, cfg.Cluster(), db, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	e.eng, err = digest.New(cfg.Settings(), digest.Sources{Cluster: e.sim, Requests: db, Usage: db, Audit: db, Samples: db})
	if err != nil {
		t.Fatal(err)
	}
	e.svc, err = commands.NewService(ctx, cfg.Settings(), commands.Deps{
		Cluster: e.sim, Requests: db, IDs: db, Audit: db, Usage: db, Clock: e.clock,
	}, commands.WithDigests(e.eng))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Seed(ctx, cfg.Seeds()); err != nil {
		t.Fatal(err)
	}
	return e
}

// do handles a typed command.
func (e *env) do(user, text string) []commands.Output {
	return append(e.svc.Handle(e.ctx, commands.Input{User: user, Text: text}), e.svc.Settle(e.ctx)...)
}

// press handles a button press.
func (e *env) press(user string, verb commands.Verb, id, arg string) []commands.Output {
	return append(e.svc.Handle(e.ctx, commands.Input{User: user, Action: &commands.Action{Name: verb, Request: id, Arg: arg}}), e.svc.Settle(e.ctx)...)
}

// advance moves time by d, stopping at every cluster event and service
// wake-up on the way, as the console does.
func (e *env) advance(d time.Duration) []commands.Output {
	target := e.clock.Now().Add(d)
	var outs []commands.Output
	for {
		now := e.clock.Now()
		next := target
		if t := e.sim.NextEvent(); t.After(now) && t.Before(next) {
			next = t
		}
		if t := e.svc.NextWakeup(e.ctx, now); t.After(now) && t.Before(next) {
			next = t
		}
		e.clock.SetTime(next)
		outs = append(outs, e.svc.Observe(e.ctx, nil)...)
		outs = append(outs, e.svc.Settle(e.ctx)...)
		if !next.Before(target) {
			return outs
		}
	}
}

// find returns the first output to kind (and request, if given) whose
// text contains phrase.
func find(t *testing.T, outs []commands.Output, kind commands.DestKind, request, phrase string) commands.Reply {
	t.Helper()
	for _, o := range outs {
		if o.To.Kind == kind && (request == "" || o.To.Request == request) && strings.Contains(text(o.Reply), phrase) {
			return o.Reply
		}
	}
	t.Fatalf("no output to %s %s says %q; outputs:\n%s", kind, request, phrase, show(outs))
	return commands.Reply{}
}
