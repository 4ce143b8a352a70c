package app_test

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/internal/app"
)

// chatAt is chat with the simulated time of a fresh data directory, or
// the time to resume an existing one at, given.
func chatAt(t *testing.T, dir string, at time.Time, script string) string {
	t.Helper()
	var out strings.Builder
	err := app.Run(context.Background(), app.Options{
		DataDir: dir,
		Stdin:   strings.NewReader(script),
		Stdout:  &out,
		Start:   at,
		LogFile: filepath.Join(dir, "test.log"),
	})
	if err != nil {
		t.Fatalf("app.Run: %v\noutput so far:\n%s", err, out.String())
	}
	return out.String()
}

// posts lists the console's banners of posts into channel, with their
// time stamps: "[Tue 09:00] ── #gpu-admins ──".
func posts(out, channel string) []string {
	return regexp.MustCompile(`\[[A-Z][a-z]{2} \d\d:\d\d\] ── `+regexp.QuoteMeta(channel)+` ──`).FindAllString(out, -1)
}

// TestConsoleDigestOnScheduleOnceAcrossRestarts: on the simulated clock
// the digests of the bundled example are posted at 09:00 on weekdays, in
// their channels, once: not again after a restart the same day; and one
// whose time passed while gpubot was stopped is posted once at the next
// start, marked late.
func TestConsoleDigestOnScheduleOnceAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	// Tuesday 07:00 in Berlin.
	tue7 := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	out := chatAt(t, dir, tue7, `
/gpu request 8xh100 for 4h reason "eval run"
:as bob
:click approve r10
:advance 1d
:advance 4h
`)
	want := []string{"[Tue 09:00] ── #gpu-admins ──", "[Wed 09:00] ── #gpu-admins ──"}
	if got := posts(out, "#gpu-admins"); !equal(got, want) {
		t.Fatalf("cluster digests posted %q, want %q; output:\n%s", got, want, out)
	}
	for _, ch := range []string{"#gpu-nlp", "#gpu-vision", "#gpu"} {
		if got := posts(out, ch); len(got) != 2 {
			t.Errorf("%s got %d digests, want 2: %q", ch, len(got), got)
		}
	}
	contains(t, out,
		"[Tue 09:00] ── #gpu-nlp ──", "Daily digest for nlp, Mon 30 Nov:",
		"[Tue 09:00] ── #gpu-admins ──", "Daily digest for the cluster, Mon 30 Nov:", "Chart: ",
		"[Wed 09:00] ── #gpu-admins ──", "Daily digest for the cluster, Tue 1 Dec:", "Team", "GPU-hours", "Fair share",
		"Capacity: Work waited in",
	)
	if strings.Contains(out, "Posted late") {
		t.Errorf("an on-time digest says it is late:\n%s", out)
	}
	chart := regexp.MustCompile(`Chart: (\S+gpubot-digest-cluster-2026-12-01\.png)`).FindStringSubmatch(out)
	if chart == nil {
		t.Fatalf("no chart path for Tuesday's cluster digest:\n%s", out)
	}
	checkPNG(t, chart[1])
	if !strings.HasPrefix(chart[1], filepath.Join(dir, "files")) {
		t.Errorf("chart written to %s, not under the data directory", chart[1])
	}

	// Restarted at Wednesday 11:00: nothing is posted again.
	out = chatAt(t, dir, tue7, ":advance 3h\n/gpu digest\n")
	if got := posts(out, "#gpu-admins"); len(got) != 0 {
		t.Fatalf("a restart the same day reposted: %q\n%s", got, out)
	}
	contains(t, out, "[Wed 11:00] ", ":advance 3h", "[Wed 14:00] ", "/gpu digest", "── only you ──", "Daily digest for the cluster, Tue 1 Dec:",
		"Only you see this.", "Chart: ")

	// Stopped until Friday 10:00: Thursday's digest is missed, Friday's
	// is posted once, at the start, marked late.
	fri10 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	out = chatAt(t, dir, fri10, ":advance 2h\n")
	want = []string{"[Fri 10:00] ── #gpu-admins ──"}
	if got := posts(out, "#gpu-admins"); !equal(got, want) {
		t.Fatalf("after the stop, cluster digests %q, want %q:\n%s", got, want, out)
	}
	contains(t, out, "[Fri 10:00] ── #gpu-admins ──", "Daily digest for the cluster, Thu 3 Dec:",
		"Posted late: it was due Fri 09:00, while gpubot was not running. 1 earlier one before it passed as well; only this one is posted.")
	log, err := os.ReadFile(filepath.Join(dir, "test.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "scheduled job ran late") || !strings.Contains(string(log), "missed=1") {
		t.Errorf("the log does not tell the operator about the late run and the missed one")
	}
	db := open(t, dir)
	run, err := db.LastRun(context.Background(), "digest cluster in #gpu-admins")
	if err != nil || !run.Late || !run.Due.Equal(time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("recorded run = %+v, %v; want Friday 09:00 Berlin, late", run, err)
	}
	samples, err := db.Samples(context.Background(), tue7, fri10)
	if err != nil || len(samples) < 6*24 {
		t.Errorf("%d samples from Tuesday 07:00 to Friday (%v); want one every 10 minutes while gpubot ran", len(samples), err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the chart: %v", err)
	}
	if _, err := png.Decode(bytes.NewReader(data)); err != nil {
		t.Errorf("%s is not a PNG: %v", path, err)
	}
}

// TestDigestTranscript is the golden transcript of a day on the bundled
// example and the digests posted the next morning: the README's example
// digest comes from it (paths to the data directory shown as
// /tmp/digest-demo, as in the README's command).
func TestDigestTranscript(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("testdata", "digest.script"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	got := chatAt(t, dir, time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC), string(script))
	checkPNG(t, filepath.Join(dir, "files", "gpubot-digest-cluster-2026-11-30.png"))
	got = strings.ReplaceAll(got, dir, "/tmp/digest-demo")
	path := filepath.Join("testdata", "digest.golden")
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
