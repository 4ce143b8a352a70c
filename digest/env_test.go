package digest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

// The organisation of these tests: three teams in one cohort, as in the
// bundled example, on a small cluster.
var settings = commands.Settings{
	People: []commands.Person{
		{Name: "alice"}, {Name: "bob"}, {Name: "carol", Admin: true}, {Name: "dave"},
		{Name: "erin"}, {Name: "frank"}, {Name: "grace"},
	},
	Teams: []commands.Team{
		{Name: "nlp", Leads: []string{"bob"}, Members: []string{"alice"}, Channel: "#gpu-nlp"},
		{Name: "vision", Leads: []string{"erin"}, Members: []string{"dave"}, Channel: "#gpu-vision"},
		{Name: "speech", Leads: []string{"frank"}, Members: []string{"grace"}, Channel: "#gpu"},
	},
	Priorities: []commands.Priority{{Name: "low", Value: 100}, {Name: "normal", Value: 200}, {Name: "high", Value: 500}, {Name: "urgent", Value: 1000}},
	Location:   berlin,
}

var prio = map[string]int32{"low": 100, "normal": 200, "high": 500, "urgent": 1000}

// cluster is h100 nodes of 8 GPUs and the three teams' queues with the
// given nominal h100 quotas and borrowing limits (-1: none).
func cluster(nodes int, quotas map[string][2]int) *allocator.Cluster {
	c := &allocator.Cluster{Flavors: []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}}}
	for i := range nodes {
		c.Nodes = append(c.Nodes, allocator.Node{Name: fmt.Sprintf("h100-n%d", i+1), Flavor: "h100", GPUs: 8, Block: "b1", Rack: fmt.Sprintf("r%d", i/4+1)})
	}
	for _, team := range []string{"nlp", "vision", "speech"} {
		q, ok := quotas[team]
		if !ok {
			continue
		}
		quota := allocator.Quota{Nominal: q[0]}
		if q[1] >= 0 {
			b := q[1]
			quota.BorrowingLimit = &b
		}
		c.Queues = append(c.Queues, allocator.Queue{Name: team, Cohort: "research", Flavors: []string{"h100"},
			Quotas: map[string]allocator.Quota{"h100": quota}, Weight: 1})
	}
	return c
}

// snapshot is a Cluster port over a fixed snapshot.
type snapshot struct{ s *allocator.Snapshot }

func (c snapshot) Snapshot(context.Context) (*allocator.Snapshot, error) { return c.s.Clone(), nil }

// zombieList is the zombie log as a slice.
type zombieList []records.Zombie

func (zs zombieList) Zombies(_ context.Context, from, to time.Time) ([]records.Zombie, error) {
	var out []records.Zombie
	for _, z := range zs {
		end := z.ResolvedAt
		if z.Outcome == records.ZombieOpen || end.IsZero() {
			end = to
		}
		if z.Since.Before(to) && end.After(from) {
			out = append(out, z)
		}
	}
	return out, nil
}

// env is a real bbolt store with an engine over it.
type env struct {
	t   *testing.T
	ctx context.Context
	db  *store.DB
}

func newEnv(t *testing.T) *env {
	return &env{t: t, ctx: context.Background(), db: openStore(t, filepath.Join(t.TempDir(), "gpubot.db"))}
}

func (e *env) engine(cl *allocator.Cluster, now time.Time, workloads []allocator.Workload, zombies digest.ZombieLog) *digest.Engine {
	e.t.Helper()
	snap, err := allocator.NewSnapshot(cl, now, workloads, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	src := digest.Sources{Cluster: snapshot{snap}, Requests: e.db, Usage: e.db, Audit: e.db, Samples: e.db}
	if zombies != nil {
		src.Zombies = zombies
	}
	eng, err := digest.New(settings, src)
	if err != nil {
		e.t.Fatal(err)
	}
	return eng
}

func (e *env) put(rs ...records.Request) {
	e.t.Helper()
	for _, r := range rs {
		if err := e.db.PutRequest(e.ctx, r); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) use(us ...records.UsageRecord) {
	e.t.Helper()
	for _, u := range us {
		if err := e.db.AppendUsage(e.ctx, u); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) audit(es ...records.AuditEntry) {
	e.t.Helper()
	for _, a := range es {
		if _, err := e.db.AppendAudit(e.ctx, a); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) sample(ss ...records.Sample) {
	e.t.Helper()
	for _, s := range ss {
		if err := e.db.AppendSample(e.ctx, s); err != nil {
			e.t.Fatal(err)
		}
	}
}

// at is a time in Berlin.
func at(day, hour, minute int) time.Time {
	return time.Date(2026, 11, day, hour, minute, 0, 0, berlin)
}

// text is a reply as plain text: headline, then every block's text,
// fields and table rows.
func text(r commands.Reply) string {
	var b strings.Builder
	b.WriteString(r.Text + "\n")
	for _, blk := range r.Blocks {
		if blk.Text != "" {
			b.WriteString(blk.Text + "\n")
		}
		if blk.Table != nil {
			b.WriteString(strings.Join(blk.Table.Columns, " | ") + "\n")
			for _, row := range blk.Table.Rows {
				b.WriteString(strings.Join(row, " | ") + "\n")
			}
		}
	}
	return b.String()
}

// has fails unless s contains every phrase.
func has(t *testing.T, s string, phrases ...string) {
	t.Helper()
	for _, p := range phrases {
		if !strings.Contains(s, p) {
			t.Errorf("missing %q in:\n%s", p, s)
		}
	}
}

// newEngine is an engine over snap and db, without zombies.
func newEngine(snap *allocator.Snapshot, db *store.DB) (*digest.Engine, error) {
	return digest.New(settings, digest.Sources{Cluster: snapshot{snap}, Requests: db, Usage: db, Audit: db, Samples: db})
}
