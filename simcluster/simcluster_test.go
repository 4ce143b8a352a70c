package simcluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// t0 is when every test's clock starts.
var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// flakyStore is a StateStore over a real store that fails on demand.
type flakyStore struct {
	db      *store.DB
	failPut error
	failGet error
	puts    int
}

func (f *flakyStore) GetState(ctx context.Context, name string) ([]byte, error) {
	if f.failGet != nil {
		return nil, f.failGet
	}
	return f.db.GetState(ctx, name)
}

func (f *flakyStore) PutState(ctx context.Context, name string, data []byte) error {
	if f.failPut != nil {
		return f.failPut
	}
	f.puts++
	return f.db.PutState(ctx, name, data)
}

// twoNodes is a cluster of two 8-GPU nodes in one rack and one queue
// that may use them all.
func twoNodes() *allocator.Cluster {
	return &allocator.Cluster{
		Flavors: []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}},
		Nodes: []allocator.Node{
			{Name: "n1", Flavor: "h100", GPUs: 8, Block: "b1", Rack: "r1"},
			{Name: "n2", Flavor: "h100", GPUs: 8, Block: "b1", Rack: "r1"},
		},
		Queues: []allocator.Queue{{
			Name: "team", Flavors: []string{"h100"},
			Quotas: map[string]allocator.Quota{"h100": {Nominal: 16}},
		}},
		Policy: allocator.Policy{Mode: allocator.BestEffortFIFO, HalfLife: 24 * time.Hour},
	}
}

type fixture struct {
	ctx   context.Context
	db    *store.DB
	st    *flakyStore
	clock *clocktesting.FakeClock
	sim   *simcluster.Cluster
}

func newFixture(t *testing.T, c *allocator.Cluster) *fixture {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{ctx: context.Background(), db: db, st: &flakyStore{db: db}, clock: clocktesting.NewFakeClock(t0)}
	sim, fresh, err := simcluster.New(f.ctx, c, f.st, f.clock)
	if err != nil {
		t.Fatalf("New on an empty store: %v", err)
	}
	if !fresh {
		t.Fatalf("New on an empty store: fresh = false, want true")
	}
	f.sim = sim
	return f
}

// at moves the clock to t0+d.
func (f *fixture) at(d time.Duration) { f.clock.SetTime(t0.Add(d)) }

func wl(id string, gpus int, prio int32, d time.Duration) allocator.Workload {
	return allocator.Workload{ID: id, Queue: "team", GPUs: gpus, Priority: prio, Duration: d, Created: t0}
}

// rel shows t as an offset from t0.
func rel(t time.Time) string {
	d := t.Sub(t0)
	if d < 0 {
		return "-" + (-d).String()
	}
	return "+" + d.String()
}

// events shows events as "kind id at +offset [on nodes] [by id]".
func events(evs []allocator.Event) []string {
	var out []string
	for _, e := range evs {
		s := fmt.Sprintf("%s %s at %s", e.Kind, e.ID, rel(e.At))
		if e.Admission != nil {
			s += fmt.Sprintf(" on %v", e.Admission.Nodes)
		}
		if e.By != "" {
			s += " by " + e.By
		}
		out = append(out, s)
	}
	return out
}

// state shows the cluster's workloads as "id pending" or
// "id running since +offset on nodes for duration".
func state(s *allocator.Snapshot) []string {
	var out []string
	for _, w := range s.Workloads() {
		if w.Admission == nil {
			out = append(out, w.ID+" pending")
			continue
		}
		out = append(out, fmt.Sprintf("%s running since %s on %v for %s", w.ID, rel(w.Admission.At), w.Admission.Nodes, w.Duration))
	}
	return out
}

func (f *fixture) state(t *testing.T) []string {
	t.Helper()
	s, err := f.sim.Snapshot(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return state(s)
}

// step is one thing done to the cluster at t0+at: an Op, or with a zero
// Op.Kind, Advance.
type step struct {
	at   time.Duration
	op   commands.Op
	want []string // events
}

func (f *fixture) run(t *testing.T, s step) ([]allocator.Event, error) {
	t.Helper()
	f.at(s.at)
	if s.op.Kind == "" {
		return f.sim.Advance(f.ctx)
	}
	return f.sim.Apply(f.ctx, s.op)
}

func submit(w allocator.Workload) commands.Op {
	return commands.Op{Kind: commands.OpSubmit, Workload: w}
}
func remove(id string) commands.Op { return commands.Op{Kind: commands.OpRemove, ID: id} }
func extend(id string, d time.Duration) commands.Op {
	return commands.Op{Kind: commands.OpExtend, ID: id, Duration: d}
}
func preempt(id string, victims ...string) commands.Op {
	return commands.Op{Kind: commands.OpPreempt, ID: id, Victims: victims}
}

var advance = commands.Op{}

func TestApply(t *testing.T) {
	tests := map[string]struct {
		steps []step
		want  []string // workloads after the last step
	}{
		"submit admits at the clock's time": {
			steps: []step{{at: 10 * time.Minute, op: submit(wl("w1", 8, 0, time.Hour)), want: []string{"admitted w1 at +10m0s on [n1]"}}},
			want:  []string{"w1 running since +10m0s on [n1] for 1h0m0s"},
		},
		"submit queues what does not fit": {
			steps: []step{
				{op: submit(wl("w1", 16, 0, time.Hour)), want: []string{"admitted w1 at +0s on [n1 n2]"}},
				{at: time.Minute, op: submit(wl("w2", 8, 0, time.Hour))},
			},
			want: []string{"w1 running since +0s on [n1 n2] for 1h0m0s", "w2 pending"},
		},
		"submitting twice is harmless": {
			steps: []step{
				{op: submit(wl("w1", 8, 0, time.Hour)), want: []string{"admitted w1 at +0s on [n1]"}},
				{at: time.Minute, op: submit(wl("w1", 8, 0, time.Hour))},
			},
			want: []string{"w1 running since +0s on [n1] for 1h0m0s"},
		},
		"every operation catches up to the clock first": {
			steps: []step{
				{op: submit(wl("w1", 16, 0, time.Hour)), want: []string{"admitted w1 at +0s on [n1 n2]"}},
				{at: 90 * time.Minute, op: submit(wl("w2", 8, 0, time.Hour)), want: []string{
					"finished w1 at +1h0m0s",
					"admitted w2 at +1h30m0s on [n1]",
				}},
			},
			want: []string{"w2 running since +1h30m0s on [n1] for 1h0m0s"},
		},
		"removing a running workload admits the next": {
			steps: []step{
				{op: submit(wl("w1", 16, 0, time.Hour)), want: []string{"admitted w1 at +0s on [n1 n2]"}},
				{op: submit(wl("w2", 8, 0, time.Hour))},
				{at: 30 * time.Minute, op: remove("w1"), want: []string{"admitted w2 at +30m0s on [n1]"}},
			},
			want: []string{"w2 running since +30m0s on [n1] for 1h0m0s"},
		},
		"removing a pending workload": {
			steps: []step{
				{op: submit(wl("w1", 16, 0, time.Hour)), want: []string{"admitted w1 at +0s on [n1 n2]"}},
				{op: submit(wl("w2", 8, 0, time.Hour))},
				{at: time.Minute, op: remove("w2")},
			},
			want: []string{"w1 running since +0s on [n1 n2] for 1h0m0s"},
		},
		"removing twice, or what never was, is harmless": {
			steps: []step{
				{op: submit(wl("w1", 8, 0, time.Hour)), want: []string{"admitted w1 at +0s on [n1]"}},
				{at: time.Minute, op: remove("w1")},
				{at: 2 * time.Minute, op: remove("w1")},
				{at: 3 * time.Minute, op: remove("nope")},
			},
		},
		"extending a running workload moves its end": {
			steps: []step{
				{op: submit(wl("w1", 8, 0, time.Hour)), want: []string{"admitted w1 at +0s on [n1]"}},
				{at: 30 * time.Minute, op: extend("w1", 2*time.Hour)},
				{at: 90 * time.Minute, op: advance},
				{at: 3 * time.Hour, op: advance, want: []string{"finished w1 at +2h0m0s"}},
			},
		},
		"extending twice to the same total is harmless": {
			steps: []step{
				{op: submit(wl("w1", 8, 0, time.Hour)), want: []string{"admitted w1 at +0s on [n1]"}},
				{at: time.Minute, op: extend("w1", 2*time.Hour)},
				{at: 2 * time.Minute, op: extend("w1", 2*time.Hour)},
			},
			want: []string{"w1 running since +0s on [n1] for 2h0m0s"},
		},
		"preempt evicts the victims and admits": {
			steps: []step{
				{op: submit(wl("low", 16, 1, 4*time.Hour)), want: []string{"admitted low at +0s on [n1 n2]"}},
				{op: submit(wl("high", 8, 9, time.Hour))},
				{at: time.Hour, op: preempt("high", "low"), want: []string{
					"preempted low at +1h0m0s by high",
					"admitted high at +1h0m0s on [n1]",
				}},
			},
			want: []string{"high running since +1h0m0s on [n1] for 1h0m0s", "low pending"},
		},
		"preempting for what already runs is harmless": {
			steps: []step{
				{op: submit(wl("low", 16, 1, 4*time.Hour)), want: []string{"admitted low at +0s on [n1 n2]"}},
				{op: submit(wl("high", 8, 9, time.Hour))},
				{at: time.Hour, op: preempt("high", "low"), want: []string{
					"preempted low at +1h0m0s by high",
					"admitted high at +1h0m0s on [n1]",
				}},
				{at: time.Hour + 2*time.Minute, op: preempt("high", "low")},
			},
			want: []string{"high running since +1h0m0s on [n1] for 1h0m0s", "low pending"},
		},
		"a seed runs since its admission time, placed now": {
			steps: []step{{op: submit(allocator.Workload{ID: "seed", Queue: "team", GPUs: 8, Duration: 3 * time.Hour, Created: t0.Add(-2 * time.Hour),
				Admission: &allocator.Admission{At: t0.Add(-2 * time.Hour)}}), want: []string{"admitted seed at -2h0m0s on [n1]"}}},
			want: []string{"seed running since -2h0m0s on [n1] for 3h0m0s"},
		},
		"advance finishes and admits in time order": {
			steps: []step{
				{op: submit(wl("w1", 8, 0, time.Hour)), want: []string{"admitted w1 at +0s on [n1]"}},
				{op: submit(wl("w2", 8, 0, 2*time.Hour)), want: []string{"admitted w2 at +0s on [n2]"}},
				{op: submit(wl("w3", 8, 0, 30*time.Minute))},
				{op: submit(wl("w4", 16, 0, 4*time.Hour))},
				{at: 3 * time.Hour, op: advance, want: []string{
					"finished w1 at +1h0m0s",
					"admitted w3 at +1h0m0s on [n1]",
					"finished w3 at +1h30m0s",
					"finished w2 at +2h0m0s",
					"admitted w4 at +2h0m0s on [n1 n2]",
				}},
			},
			want: []string{"w4 running since +2h0m0s on [n1 n2] for 4h0m0s"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, twoNodes())
			for i, s := range tc.steps {
				evs, err := f.run(t, s)
				if err != nil {
					t.Fatalf("step %d (%s %s): %v", i, s.op.Kind, s.op.ID, err)
				}
				if diff := cmp.Diff(s.want, events(evs)); diff != "" {
					t.Errorf("step %d (%s %s) events (-want +got):\n%s", i, s.op.Kind, s.op.ID, diff)
				}
				if got := f.sim.Now(); !got.Equal(f.clock.Now()) {
					t.Errorf("step %d: cluster time %s, want the clock's %s", i, rel(got), rel(f.clock.Now()))
				}
			}
			if diff := cmp.Diff(tc.want, f.state(t)); diff != "" {
				t.Errorf("workloads (-want +got):\n%s", diff)
			}
			// Every change was saved: a cluster loaded from the store now
			// is the same.
			loaded, fresh, err := simcluster.New(f.ctx, twoNodes(), f.st, f.clock)
			if err != nil || fresh {
				t.Fatalf("reloading: fresh %v, err %v", fresh, err)
			}
			snap, _ := loaded.Snapshot(f.ctx)
			if diff := cmp.Diff(tc.want, state(snap)); diff != "" {
				t.Errorf("workloads after reloading (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyErrors(t *testing.T) {
	tests := map[string]struct {
		op   commands.Op
		want string
	}{
		"unknown operation":         {op: commands.Op{Kind: "reboot"}, want: `unknown operation "reboot"`},
		"extending what is absent":  {op: extend("nope", time.Hour), want: "no such workload"},
		"preempting for the absent": {op: preempt("nope", "w1"), want: "no such workload"},
		"victims that do not make room": {
			op: preempt("w3", "w1"), want: "would still not fit",
		},
		"a seed that does not fit": {
			op:   submit(allocator.Workload{ID: "big", Queue: "team", GPUs: 16, Admission: &allocator.Admission{At: t0}}),
			want: "does not fit in the simulated cluster",
		},
		"an invalid workload": {op: submit(allocator.Workload{ID: "x", Queue: "nobody", GPUs: 8}), want: "nobody"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, twoNodes())
			for _, w := range []allocator.Workload{wl("w1", 8, 0, time.Hour), wl("w2", 8, 0, time.Hour), wl("w3", 16, 5, time.Hour)} {
				if _, err := f.sim.Apply(f.ctx, submit(w)); err != nil {
					t.Fatal(err)
				}
			}
			before := f.state(t)
			puts := f.st.puts
			f.at(time.Minute)
			evs, err := f.sim.Apply(f.ctx, tc.op)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Apply = %v, %v; want an error containing %q", events(evs), err, tc.want)
			}
			if diff := cmp.Diff(before, f.state(t)); diff != "" {
				t.Errorf("a failed operation changed the cluster (-before +after):\n%s", diff)
			}
			if f.st.puts != puts {
				t.Errorf("a failed operation saved the state")
			}
			if got := f.sim.Now(); !got.Equal(t0) {
				t.Errorf("a failed operation moved the cluster's time to %s", rel(got))
			}
		})
	}
}

// TestSaveFailure: when the state cannot be saved, the operation is
// undone: the cluster, its time and the stored state stay as they were,
// and the same operation works once saving works again.
func TestSaveFailure(t *testing.T) {
	f := newFixture(t, twoNodes())
	if _, err := f.sim.Apply(f.ctx, submit(wl("w1", 16, 0, time.Hour))); err != nil {
		t.Fatal(err)
	}
	before := f.state(t)
	saved, err := f.db.GetState(f.ctx, simcluster.StateName)
	if err != nil {
		t.Fatal(err)
	}
	disk := errors.New("disk full")
	f.st.failPut = disk
	f.at(2 * time.Hour) // w1 would finish on the way
	for name, call := range map[string]func() ([]allocator.Event, error){
		"Apply":   func() ([]allocator.Event, error) { return f.sim.Apply(f.ctx, submit(wl("w2", 8, 0, time.Hour))) },
		"Advance": func() ([]allocator.Event, error) { return f.sim.Advance(f.ctx) },
	} {
		evs, err := call()
		if !errors.Is(err, disk) || evs != nil {
			t.Errorf("%s with a failing store = %v, %v; want no events and an error wrapping %v", name, events(evs), err, disk)
		}
		if diff := cmp.Diff(before, f.state(t)); diff != "" {
			t.Errorf("%s: the failed save changed the cluster (-before +after):\n%s", name, diff)
		}
		if got := f.sim.Now(); !got.Equal(t0) {
			t.Errorf("%s: cluster time is %s after a failed save, want +0s", name, rel(got))
		}
		if got, _ := f.db.GetState(f.ctx, simcluster.StateName); string(got) != string(saved) {
			t.Errorf("%s: the stored state changed", name)
		}
	}
	if next := f.sim.NextEvent(); !next.Equal(t0.Add(time.Hour)) {
		t.Errorf("NextEvent after failed saves = %s, want +1h0m0s", rel(next))
	}

	f.st.failPut = nil
	evs, err := f.sim.Apply(f.ctx, submit(wl("w2", 8, 0, time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"finished w1 at +1h0m0s", "admitted w2 at +2h0m0s on [n1]"}
	if diff := cmp.Diff(want, events(evs)); diff != "" {
		t.Errorf("events once saving works again (-want +got):\n%s", diff)
	}
}

func TestNextEvent(t *testing.T) {
	f := newFixture(t, twoNodes())
	if next := f.sim.NextEvent(); !next.IsZero() {
		t.Errorf("NextEvent of an empty cluster = %s, want zero", rel(next))
	}
	for _, w := range []allocator.Workload{wl("long", 8, 0, 3*time.Hour), wl("short", 8, 0, time.Hour), wl("pending", 8, 0, time.Minute)} {
		if _, err := f.sim.Apply(f.ctx, submit(w)); err != nil {
			t.Fatal(err)
		}
	}
	if next := f.sim.NextEvent(); !next.Equal(t0.Add(time.Hour)) {
		t.Errorf("NextEvent = %s, want +1h0m0s (the end of short; pending ones do not count)", rel(next))
	}
	f.at(time.Hour)
	if _, err := f.sim.Advance(f.ctx); err != nil {
		t.Fatal(err)
	}
	// pending took short's place at +1h for a minute.
	if next := f.sim.NextEvent(); !next.Equal(t0.Add(time.Hour + time.Minute)) {
		t.Errorf("NextEvent = %s, want +1h1m0s", rel(next))
	}

	unknown := newFixture(t, twoNodes())
	if _, err := unknown.sim.Apply(unknown.ctx, submit(wl("forever", 8, 0, 0))); err != nil {
		t.Fatal(err)
	}
	if next := unknown.sim.NextEvent(); !next.IsZero() {
		t.Errorf("NextEvent with only a workload of unknown duration = %s, want zero", rel(next))
	}
}

// TestLoad: a cluster loaded from the store has the saved workloads,
// time and usage, whatever the clock says.
func TestLoad(t *testing.T) {
	f := newFixture(t, twoNodes())
	if _, err := f.sim.Apply(f.ctx, submit(wl("w1", 8, 0, 4*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sim.Apply(f.ctx, submit(wl("w2", 16, 0, time.Hour))); err != nil {
		t.Fatal(err)
	}
	f.at(2 * time.Hour)
	if _, err := f.sim.Advance(f.ctx); err != nil {
		t.Fatal(err)
	}
	want, _ := f.sim.Snapshot(f.ctx)

	later := clocktesting.NewFakeClock(t0.Add(48 * time.Hour))
	got, fresh, err := simcluster.New(f.ctx, twoNodes(), f.st, later)
	if err != nil {
		t.Fatal(err)
	}
	if fresh {
		t.Errorf("New over a saved state: fresh = true")
	}
	if !got.Now().Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("loaded Now = %s, want the saved +2h0m0s", rel(got.Now()))
	}
	snap, _ := got.Snapshot(f.ctx)
	if diff := cmp.Diff(want.Workloads(), snap.Workloads()); diff != "" {
		t.Errorf("workloads (-saved +loaded):\n%s", diff)
	}
	if diff := cmp.Diff(want.Usage(), snap.Usage()); diff != "" {
		t.Errorf("usage (-saved +loaded):\n%s", diff)
	}
	if u := snap.Usage()["team"]; !(u > 0) {
		t.Errorf("usage of team = %v; two hours of 8 GPUs should count", u)
	}
}

func TestLoadErrors(t *testing.T) {
	saved := func(t *testing.T) *fixture {
		f := newFixture(t, twoNodes())
		if _, err := f.sim.Apply(f.ctx, submit(wl("w1", 16, 0, 4*time.Hour))); err != nil {
			t.Fatal(err)
		}
		return f
	}
	oneNode := func() *allocator.Cluster {
		c := twoNodes()
		c.Nodes = c.Nodes[:1]
		return c
	}
	renamedQueue := func() *allocator.Cluster {
		c := twoNodes()
		c.Queues[0].Name = "other"
		return c
	}
	tests := map[string]struct {
		cluster func() *allocator.Cluster
		prepare func(t *testing.T, f *fixture)
		want    []string
	}{
		"a node the saved work runs on is gone": {
			cluster: oneNode,
			want:    []string{"no longer matches the configuration", "n2", "move the data directory aside"},
		},
		"the queue is gone": {
			cluster: renamedQueue,
			want:    []string{"no longer matches the configuration", "team"},
		},
		"another version": {
			cluster: twoNodes,
			prepare: func(t *testing.T, f *fixture) {
				data, _ := json.Marshal(map[string]any{"version": 99})
				if err := f.db.PutState(f.ctx, simcluster.StateName, data); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"version 99", "reads version 1"},
		},
		"not JSON": {
			cluster: twoNodes,
			prepare: func(t *testing.T, f *fixture) {
				if err := f.db.PutState(f.ctx, simcluster.StateName, []byte("{")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"decoding the simulated cluster's saved state"},
		},
		"the store cannot be read": {
			cluster: twoNodes,
			prepare: func(t *testing.T, f *fixture) { f.st.failGet = errors.New("i/o error") },
			want:    []string{"loading the simulated cluster", "i/o error"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := saved(t)
			if tc.prepare != nil {
				tc.prepare(t, f)
			}
			sim, _, err := simcluster.New(f.ctx, tc.cluster(), f.st, f.clock)
			if err == nil {
				t.Fatalf("New = %v, nil; want an error", sim)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestFreshStartSaves: a fresh cluster is saved at once, so that the next
// start is not fresh even if nothing happened; a failing save is an error.
func TestFreshStartSaves(t *testing.T) {
	f := newFixture(t, twoNodes())
	if _, err := f.db.GetState(f.ctx, simcluster.StateName); err != nil {
		t.Fatalf("fresh start did not save: %v", err)
	}
	if !f.sim.Now().Equal(t0) {
		t.Errorf("fresh cluster's time = %s, want the clock's", rel(f.sim.Now()))
	}

	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	disk := errors.New("disk full")
	_, _, err = simcluster.New(f.ctx, twoNodes(), &flakyStore{db: db, failPut: disk}, f.clock)
	if !errors.Is(err, disk) {
		t.Errorf("fresh start with a failing store: %v; want an error wrapping %v", err, disk)
	}
}
