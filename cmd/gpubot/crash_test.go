package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// The crash-consistency tests run the built gpubot binary, kill it with
// SIGKILL at random moments, start it again on the same data directory,
// and check that nothing acked was lost or done twice. GPUBOT_CRASH_CYCLES
// sets the number of kill/restart cycles (default 40, well under a
// minute); the README reports a long run (600).

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds gpubot once for the package's tests.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpubot-crash-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gpubot")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func crashCycles(t *testing.T) int {
	t.Helper()
	if testing.Short() {
		t.Skip("kills real processes: skipped with -short")
	}
	n := 40
	if v := os.Getenv("GPUBOT_CRASH_CYCLES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("GPUBOT_CRASH_CYCLES=%q: want a positive number", v)
		}
	}
	return n
}

// consoleScript is what a cycle types: requests by several people, a
// decision or two, an end, and simulated time moving on, so that kills
// land in submissions, approvals, cancellations, reminders, admissions,
// completions, zombie sweeps and digests.
func consoleScript(k int) string {
	lines := []string{
		":as alice", fmt.Sprintf(`request %dxh100 for %dh reason "cycle %d"`, 4*(1+k%2), 1+k%3, k),
		":as dave", "request 8xa100 for 1h",
		":as bob", "status",
		":advance 20m",
		":as erin", fmt.Sprintf("request %dxh100 for 2h priority low", 8*(1+k%2)),
		":as bob", ":click approve",
		":as alice", fmt.Sprintf("cancel r%d", 10+k),
		":advance 45m",
		":as grace", "request 2xa100 for 30m",
		":advance 1h",
		":as carol", fmt.Sprintf("request %dxa100 for 3h", 4*(1+k%2)),
		":as dave", "queue", ":advance 2h",
		":as erin", "request 8xh100 for 90m", ":advance 3h",
	}
	return strings.Join(lines, "\n") + "\n"
}

var (
	cardRe  = regexp.MustCompile(`── #[a-z0-9-]+ · new card (r\d+) ──`)
	replyRe = regexp.MustCompile(`(?m)^\[[^\]]+\] ── only you ──\n(r\d+)[ :]`)
)

// run starts the console on dir with script as its input, kills it after
// killAfter (0: lets it finish) and returns what it printed and whether
// the kill came before it finished.
func runConsole(t *testing.T, bin, dir, script string, killAfter time.Duration) (string, bool) {
	t.Helper()
	cmd := exec.Command(bin, "console", "--data-dir", dir, "--start", "2026-12-01T08:00:00Z")
	cmd.Stdin = strings.NewReader(script)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if killAfter > 0 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("gpubot failed before the kill: %v\n%s", err, out.String())
			}
			return out.String(), false
		case <-time.After(killAfter):
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return out.String(), true
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gpubot: %v\n%s", err, out.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("gpubot did not finish its input\n%s", out.String())
	}
	return out.String(), false
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestConsoleSurvivesKills: across many SIGKILLs at random moments, every
// request gpubot answered is kept, in agreement with the simulated
// cluster; no finished work is marked lost; every decision is audited
// once; every card is printed, at least once, and again only for a kill
// between printing it and recording that (the console cannot take back
// what it printed: at most one more printing per kill); nothing is left
// undelivered at the end.
func TestConsoleSurvivesKills(t *testing.T) {
	cycles := crashCycles(t)
	bin := binary(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, uint64(cycles)))
	cards := map[string]int{}
	answered := map[string]bool{}
	kills := 0
	collect := func(out string) {
		for _, m := range cardRe.FindAllStringSubmatch(out, -1) {
			cards[m[1]]++
		}
		for _, m := range replyRe.FindAllStringSubmatch(out, -1) {
			answered[m[1]] = true
		}
	}
	for k := range cycles {
		kill := time.Duration(20+rng.IntN(350)) * time.Millisecond
		out, killed := runConsole(t, bin, dir, consoleScript(k), kill)
		collect(out)
		if killed {
			kills++
		}
	}
	final, _ := runConsole(t, bin, dir, ":advance 10m\n", 0)
	collect(final)

	ctx := context.Background()
	db, err := store.Open(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		t.Fatalf("the store after %d kills: %v", kills, err)
	}
	defer db.Close()
	rs, err := db.ListRequests(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]records.Request{}
	for _, r := range rs {
		byID[r.ID] = r
		if r.State == records.StateLost {
			t.Errorf("%s was marked lost: %s", r.ID, r.EndReason)
		}
	}
	for id := range answered {
		if _, ok := byID[id]; !ok {
			t.Errorf("%s was answered but is not in the store", id)
		}
	}
	dup := 0 // printings beyond the first
	for id, n := range cards {
		if _, ok := byID[id]; !ok {
			t.Errorf("the card of %s was printed but the request is not in the store", id)
		}
		dup += n - 1
	}
	if dup > kills {
		t.Errorf("cards printed %d times more than once in %d kills: more than one per kill between printing and recording it", dup, kills)
	}
	for _, r := range rs {
		if r.Origin == "seed" {
			continue
		}
		if cards[r.ID] == 0 {
			t.Errorf("%s (%s) never got its card", r.ID, r.State)
		}
	}
	audit, err := db.Audit(ctx, store.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	requested := map[string]int{}
	for _, e := range audit {
		if e.Action == "request" && e.Outcome == "ok" {
			requested[e.Target]++
		}
	}
	for _, r := range rs {
		if r.Origin == "seed" {
			continue
		}
		if requested[r.ID] != 1 {
			t.Errorf("%s has %d audit entries for its request, want 1", r.ID, requested[r.ID])
		}
	}
	if out, err := db.Outbox(ctx); err != nil || len(out) != 0 {
		t.Errorf("after a clean run the outbox holds %d messages (%v)", len(out), err)
	}
	checkAgainstCluster(t, ctx, db, rs)
	t.Logf("%d cycles, %d killed before the end of their input: %d requests, %d cards, %d printings beyond the first, %d audit entries", cycles, kills, len(rs), len(cards), dup, len(audit))
}

// checkAgainstCluster fails the test if a request and the simulated
// cluster disagree: a running request's workload must be admitted, a
// queued one pending, and no other in the cluster.
func checkAgainstCluster(t *testing.T, ctx context.Context, db *store.DB, rs []records.Request) {
	t.Helper()
	ws, err := simcluster.SavedWorkloads(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	for _, w := range ws {
		in[w.ID] = w.Admission != nil
	}
	for _, r := range rs {
		admitted, ok := in[r.ID]
		switch {
		case r.State == records.StateRunning && (!ok || !admitted):
			t.Errorf("%s is running but the cluster has it admitted: %v (present %v)", r.ID, admitted, ok)
		case r.State == records.StateQueued && (!ok || admitted):
			t.Errorf("%s is queued but the cluster has it pending: %v (present %v)", r.ID, !admitted, ok)
		case r.State != records.StateRunning && r.State != records.StateQueued && ok:
			t.Errorf("%s is %s but still in the cluster", r.ID, r.State)
		}
	}
}
