package app_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/internal/app"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

var update = flag.Bool("update", false, "rewrite golden files")

// start is the simulated time of every fresh data directory in these
// tests: Tuesday 09:00 in the example's Europe/Berlin.
var start = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// chat runs the console over script in dir and returns what it printed.
func chat(t *testing.T, dir, script string) string {
	t.Helper()
	var out strings.Builder
	err := app.Run(context.Background(), app.Options{
		DataDir: dir,
		Stdin:   strings.NewReader(script),
		Stdout:  &out,
		Start:   start,
		LogFile: filepath.Join(dir, "test.log"),
	})
	if err != nil {
		t.Fatalf("app.Run: %v\noutput so far:\n%s", err, out.String())
	}
	return out.String()
}

// open opens the data directory's store after Run has closed it.
func open(t *testing.T, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func request(t *testing.T, db *store.DB, id string) records.Request {
	t.Helper()
	r, err := db.GetRequest(context.Background(), id)
	if err != nil {
		t.Fatalf("request %s: %v", id, err)
	}
	return r
}

func audit(t *testing.T, db *store.DB, target string) []string {
	t.Helper()
	es, err := db.Audit(context.Background(), store.AuditQuery{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Actor+" "+e.Action+" "+e.Outcome)
	}
	return out
}

// contains fails unless out has every phrase, in order.
func contains(t *testing.T, out string, phrases ...string) {
	t.Helper()
	rest := out
	for _, p := range phrases {
		i := strings.Index(rest, p)
		if i < 0 {
			t.Fatalf("output lacks %q (after the previous phrases); output:\n%s", p, out)
		}
		rest = rest[i+len(p):]
	}
}

// TestRequestLife follows one request: approved by the lead, queued with
// an estimate, admitted as time passes, extended, released.
func TestRequestLife(t *testing.T) {
	dir := t.TempDir()
	out := chat(t, dir, `
:as dave
# Reclaims alice's borrowed low-priority dev box at once (nlp is over its quota).
/gpu request 8xh100 for 4h
:as alice
# nlp borrows, so bob approves; h100's free GPUs are scattered, so it waits.
/gpu request 8xh100 for 4h reason "eval run"
:as bob
:click approve r11
:as alice
/gpu status r11
:advance 3h
/gpu extend r11 2h
:advance 30m
/gpu release r11
/gpu status
`)
	contains(t, out,
		"new card r10", "r10 running on",
		"Started at once by preempting r5 (alice, 4 GPUs, low)", "vision reclaims its quota from nlp",
		"new card r11", "r11 needs approval",
		"bob> :click approve r11", "Approved by bob.", "card r11 updated", "r11 queued: starts",
		"alice> /gpu status r11", "r11 queued", "Waiting for",
		"alice> :advance 3h", "thread of r11", "Admitted after",
		"alice> /gpu extend r11 2h", "Extended by 2h by alice; now ends",
		"alice> /gpu release r11", "Released by alice after",
	)
	db := open(t, dir)
	r := request(t, db, "r11")
	if r.State != records.StateFinished || r.EndReason != "released by alice" || r.Duration != 6*time.Hour {
		t.Errorf("r11 = state %s, end %q, duration %s; want finished, released by alice, 6h", r.State, r.EndReason, r.Duration)
	}
	if r.FirstEstimate == nil || !r.FirstEstimate.Known || r.FirstEstimate.Earliest.Before(r.CreatedAt) {
		t.Errorf("r11 first estimate = %+v; want a known range not before its creation", r.FirstEstimate)
	}
	if r.AdmittedAt.Before(r.FirstEstimate.Earliest) {
		t.Errorf("r11 admitted %s, before its estimate's earliest %s", r.AdmittedAt, r.FirstEstimate.Earliest)
	}
	victim := request(t, db, "r5")
	if victim.Preemptions != 1 {
		t.Errorf("r5 preemptions = %d, want 1", victim.Preemptions)
	}
	want := []string{"alice request ok", "bob approve ok", "gpubot admitted ok", "alice extend ok", "alice release ok"}
	if diff := cmp.Diff(want, audit(t, db, "r11")); diff != "" {
		t.Errorf("audit of r11 (-want +got):\n%s", diff)
	}
	use, err := db.Usage(context.Background(), start, start.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, u := range use {
		if u.Request == "r11" {
			found = true
			if got, want := u.End.Sub(u.Start), r.EndedAt.Sub(r.AdmittedAt); got != want || u.GPUs != 8 {
				t.Errorf("usage of r11 = %d GPUs for %s; want 8 for %s", u.GPUs, got, want)
			}
		}
	}
	if !found {
		t.Errorf("no usage recorded for r11")
	}
}

// TestApprovalFlow: a request over quota waits for its lead; another
// team's member cannot approve it; the lead can, once.
func TestApprovalFlow(t *testing.T) {
	dir := t.TempDir()
	out := chat(t, dir, `
/gpu request 8xh100 for 4h
:as dave
:click approve r10
/gpu approve r10
:as bob
:click approve r10
:click approve r10
`)
	contains(t, out,
		"r10 needs approval", "borrows 8 h100 GPUs beyond nlp's quota", "Bob (lead of nlp) or carol (admin) can approve it",
		"dave> :click approve r10", "Only bob (lead of nlp) or carol (admin) can approve r10. Nothing was changed.",
		"dave> /gpu approve r10", "Only bob (lead of nlp) or carol (admin) can approve r10. Nothing was changed.",
		"bob> :click approve r10", "Approved by bob.", "direct message to alice", "card r10 updated",
		"bob> :click approve r10", "r10 was already approved by bob",
	)
	db := open(t, dir)
	if r := request(t, db, "r10"); r.ApprovedBy != "bob" || r.State == records.StateAwaitingApproval {
		t.Errorf("r10 approved by %q in state %s; want bob, submitted", r.ApprovedBy, r.State)
	}
	want := []string{"alice request ok", "dave approve refused", "dave approve refused", "bob approve ok"}
	got := audit(t, db, "r10")
	if len(got) < len(want) {
		t.Fatalf("audit of r10 = %v; want at least %v", got, want)
	}
	if diff := cmp.Diff(want, got[:len(want)]); diff != "" {
		t.Errorf("audit of r10 (-want +got):\n%s", diff)
	}
	if last := got[len(got)-1]; last != "bob approve refused" {
		t.Errorf("the second approval was audited as %q; want it refused as stale", last)
	}
}

// TestDenyHoldsNoQuota: a held request is absent from the cluster and a
// denial ends it.
func TestDenyHoldsNoQuota(t *testing.T) {
	dir := t.TempDir()
	out := chat(t, dir, `
/gpu request 24xa100 for 1d reason "big eval"
/gpu queue a100
:as bob
/gpu deny r10 use fewer GPUs
/gpu cancel r10
`)
	contains(t, out,
		"r10 needs approval", "more than 16 GPUs",
		"r10 (alice, 24× a100) awaits approval by bob (lead of nlp) or carol (admin); it holds no quota.",
		"Denied by bob: use fewer GPUs", "direct message to alice",
		"r10 is already denied",
	)
	db := open(t, dir)
	if r := request(t, db, "r10"); r.State != records.StateDenied || r.DenyReason != "use fewer GPUs" {
		t.Errorf("r10 = %s (%q); want denied with the reason", r.State, r.DenyReason)
	}
}

// TestPreemptionFlow: an urgent request that cannot borrow waits; only an
// admin can start it by preempting the proposed lower-priority work, whose
// owners are told and whose work is requeued.
func TestPreemptionFlow(t *testing.T) {
	dir := t.TempDir()
	out := chat(t, dir, `
:as grace
/gpu request 16xh100 for 3h priority urgent team speech
:as frank
:click approve r10
:as dave
:click preempt r7
:as carol
:click preempt r7
`)
	contains(t, out,
		"r10 needs approval", "priority urgent",
		"frank> :click approve r10", "Approved by frank.", "Started at once by preempting r7 (frank, 5 GPUs, normal), r4 (grace, 6 GPUs, normal)",
		"thread of r7", "Preempted by r10 (grace, urgent) and requeued",
		"thread of r7", "New estimate:",
		"dave> :click preempt r7", "Only admins (carol) can preempt other work for r7. Nothing was changed.",
		"carol> :click preempt r7", "carol preempted r5 to start this now.",
		"direct message to alice", "Your request r5 was preempted by r7",
		"thread of r7", "Admitted at once",
		"Preempted r5; r7 is starting.",
	)
	db := open(t, dir)
	if r := request(t, db, "r7"); r.State != records.StateRunning {
		t.Errorf("r7 = %s, want running after the admin's preemption", r.State)
	}
	if r := request(t, db, "r5"); r.State != records.StateQueued || r.Preemptions != 1 {
		t.Errorf("r5 = %s with %d preemptions; want queued again after 1", r.State, r.Preemptions)
	}
	got := audit(t, db, "r7")
	if !slices(got, "dave preempt refused", "carol preempt ok") {
		t.Errorf("audit of r7 = %v; want dave refused, then carol ok", got)
	}
}

func slices(xs []string, want ...string) bool {
	i := 0
	for _, x := range xs {
		if i < len(want) && x == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestRestartMidFlow stops the console between an approval request and
// its approval, and between admission and the end: everything is where it
// was, and the simulated clock resumes.
func TestRestartMidFlow(t *testing.T) {
	dir := t.TempDir()
	first := chat(t, dir, `
/gpu request 8xh100 for 4h
:as dave
/gpu request 8xh100 for 2h
:advance 20m
`)
	contains(t, first, "r10 needs approval", "new card r11", "r11 running")
	db := open(t, dir)
	before, err := db.ListRequests(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	auditBefore, _ := db.Audit(context.Background(), store.AuditQuery{})
	db.Close()

	second := chat(t, dir, `
:now
/gpu status
:click 1
:as bob
/gpu approve r10
:advance 4h
/gpu usage
`)
	contains(t, second,
		"It is Tue Dec 1 09:20", // resumed where it stopped, not at start
		"r10", "awaiting-approval",
		"There is no button 1 in this session.",
		"Approved by bob.",
		"Finished:",
		"GPU usage over the last 7 days",
	)
	db = open(t, dir)
	after, err := db.ListRequests(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("%d requests after the restart, %d before: none may be lost or added", len(after), len(before))
	}
	auditAfter, _ := db.Audit(context.Background(), store.AuditQuery{})
	if diff := cmp.Diff(auditBefore, auditAfter[:len(auditBefore)]); diff != "" {
		t.Errorf("the audit log changed its past across a restart (-before +after):\n%s", diff)
	}
	for _, r := range after {
		if r.State == records.StateLost {
			t.Errorf("%s was marked lost across a clean restart", r.ID)
		}
	}
}

// TestBadInput: every kind of bad line gets an answer, nothing crashes,
// nothing is recorded as a request.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := []string{
		"/gpu",
		"/gpu reqest 8xh100 for 4h",
		"/gpu request",
		"/gpu request 8xh10 for 4h",
		"/gpu request 8xh100 for 4x",
		"/gpu request 0xh100 for 4h",
		"/gpu request 99999999999999999999xh100 for 4h",
		"/gpu request 9xh100 for 4h",
		"/gpu request 8xh100 for 30d",
		"/gpu request 200xh100 for 1h",
		"/gpu request 16xh100 for 1h topology host",
		"/gpu request 8xh100 for 4h team vision",
		"/gpu request 8xh100 for 4h team vizion",
		"/gpu request 8xh100 for 4h prio high",
		`/gpu request 8xh100 for 4h reason "unterminated`,
		"/gpu request 8xh100 for 4h team nlp team nlp",
		"/gpu extend r1",
		"/gpu extend r1 forever",
		"/gpu cancel banana",
		"/gpu cancel r999",
		"/gpu release r1",
		"/gpu whatif +16xh100",
		"/gpu usage 400d",
		"/gpu queue gpus",
		"/gpu help nonsense",
		"/gpu track not a job",
		"/gpu track nlp/llama",
		"/gpu \x00\x01\x02",
		"/gpu 🚀🚀🚀 request",
		"/gpu " + strings.Repeat("x", 100_000),
		":as nobody",
		":advance soon",
		":advance -1h",
		":click",
		":click 999",
		":click frobnicate",
		":fly",
	}
	out := chat(t, dir, strings.Join(bad, "\n")+"\n")
	// Split the transcript at each echoed input line and check that each
	// got some answer.
	echo := regexp.MustCompile(`(?m)^\[[^\]]+\] alice> `)
	parts := echo.Split(out, -1)[1:]
	if len(parts) != len(bad) {
		t.Fatalf("%d inputs echoed, want %d; output:\n%s", len(parts), len(bad), out)
	}
	for i, p := range parts {
		lines := strings.SplitN(p, "\n", 2)
		if len(lines) < 2 || strings.TrimSpace(lines[1]) == "" {
			t.Errorf("input %q got no answer", truncate(bad[i]))
		}
		if strings.Contains(p, "panic") || strings.Contains(p, "goroutine ") {
			t.Errorf("input %q: answer mentions a panic:\n%s", truncate(bad[i]), p)
		}
	}
	contains(t, out,
		"Unknown command 'reqest'; did you mean request?",
		"Unknown flavor 'h10'; did you mean h100?",
		"You are not a member of vision",
		"Unknown team 'vizion'; did you mean vision?",
		"There is no request r999.",
		"Only admins (carol) can ask what-ifs about capacity.",
		"track follows a workload submitted outside gpubot",
		`No person "nobody".`,
		"There is no button 999 in this session.",
		"Unknown directive :fly.",
	)
	db := open(t, dir)
	rs, err := db.ListRequests(context.Background(), func(r records.Request) bool { return r.Origin != "seed" })
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 0 {
		t.Errorf("bad input created %d requests: %+v", len(rs), rs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "test.log")); strings.Contains(string(b), "panic") {
		t.Errorf("the operator log records a panic:\n%s", b)
	}
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// TestDemoTranscript is the golden transcript of a short tour: it pins
// down what the console renderer prints for every kind of reply.
func TestDemoTranscript(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("testdata", "demo.script"))
	if err != nil {
		t.Fatal(err)
	}
	got := chat(t, t.TempDir(), string(script))
	path := filepath.Join("testdata", "demo.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s (go test ./internal/app -update writes it): %v", path, err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("transcript differs from %s (-want +got); if the change is intended, rerun with -update:\n%s", path, diff)
	}
}
