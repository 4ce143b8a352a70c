package digest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

var berlin = mustZone("Europe/Berlin")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// openStore opens a bbolt store at path for the test.
func openStore(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustSchedule(t *testing.T, spec string, loc *time.Location) digest.Schedule {
	t.Helper()
	s, err := digest.ParseSchedule(spec, loc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseSchedule(t *testing.T) {
	from := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC) // a Tuesday, 08:00 in Berlin
	for spec, want := range map[string]string{
		"0 9 * * 1-5":                      "2026-12-01T08:00:00Z", // 09:00 Berlin
		"CRON_TZ=America/New_York 0 9 * *": "",                     // four fields
		"CRON_TZ=UTC 0 9 * * *":            "2026-12-01T09:00:00Z",
		"*/10 * * * *":                     "2026-12-01T07:10:00Z",
		"@daily":                           "2026-12-01T23:00:00Z", // midnight Berlin
		"@every 10m":                       "2026-12-01T07:10:00Z",
		"0 9 * * 6":                        "2026-12-05T08:00:00Z", // Saturday
	} {
		s, err := digest.ParseSchedule(spec, berlin)
		if want == "" {
			if !errors.Is(err, digest.ErrBadSchedule) {
				t.Errorf("ParseSchedule(%q) = %v, want ErrBadSchedule", spec, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSchedule(%q): %v", spec, err)
			continue
		}
		if got := s.Next(from).UTC().Format(time.RFC3339); got != want {
			t.Errorf("ParseSchedule(%q).Next = %s, want %s", spec, got, want)
		}
	}
	for _, bad := range []string{"", "0 9 * *", "61 * * * *", "0 9 * * mon-xyz", "CRON_TZ=Europe/Berlin", "CRON_TZ=Mars/Olympus 0 9 * * *", "0 0 31 2 *", "@fortnightly"} {
		if _, err := digest.ParseSchedule(bad, berlin); !errors.Is(err, digest.ErrBadSchedule) {
			t.Errorf("ParseSchedule(%q) = %v, want ErrBadSchedule", bad, err)
		}
	}
	var zero digest.Schedule
	if !zero.IsZero() || !zero.Next(from).IsZero() {
		t.Error("the zero Schedule runs")
	}
}

// recorder is a job that remembers its runs and posts one message each.
type recorder struct {
	runs []digest.Run
	fail int // fail this many times first
}

func (r *recorder) job(_ context.Context, run digest.Run) ([]commands.Output, error) {
	if r.fail > 0 {
		r.fail--
		return nil, errors.New("disk on fire")
	}
	r.runs = append(r.runs, run)
	return []commands.Output{{To: commands.Destination{Kind: commands.ToPost, Channel: "#gpu"}, Reply: commands.Reply{Text: run.Due.UTC().Format(time.RFC3339)}}}, nil
}

func texts(outs []commands.Output) []string {
	var out []string
	for _, o := range outs {
		out = append(out, o.Reply.Text)
	}
	return out
}

// Tue 2026-12-01 08:00 Berlin.
var t0 = time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)

func TestSchedulerRunsOnTimeOnceAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gpubot.db")
	db := openStore(t, path)
	rec := &recorder{}
	daily := mustSchedule(t, "0 9 * * 1-5", berlin)
	s := digest.NewScheduler(db)
	if err := s.Add("digest", daily, rec.job); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("digest", daily, rec.job); err == nil {
		t.Error("a second job of the same name was accepted")
	}
	if err := s.Resume(ctx, t0); err != nil {
		t.Fatal(err)
	}
	nine := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	if got := s.Next(); !got.Equal(nine) {
		t.Fatalf("Next = %s, want %s", got, nine)
	}
	if outs := s.RunDue(ctx, nine.Add(-time.Minute)); len(outs) != 0 {
		t.Fatalf("ran before it was due: %v", texts(outs))
	}
	if d := cmp.Diff([]string{"2026-12-01T08:00:00Z"}, texts(s.RunDue(ctx, nine))); d != "" {
		t.Fatalf("at 09:00 (-want +got):\n%s", d)
	}
	if outs := s.RunDue(ctx, nine.Add(2*time.Hour)); len(outs) != 0 {
		t.Fatalf("ran twice for one due time: %v", texts(outs))
	}
	if rec.runs[0].Late || rec.runs[0].Missed != 0 {
		t.Errorf("on-time run = %+v, want not late, nothing missed", rec.runs[0])
	}
	next := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	if got := s.Next(); !got.Equal(next) {
		t.Errorf("Next after the run = %s, want %s", got, next)
	}

	// A restart at noon: nothing to do.
	db.Close()
	db = openStore(t, path)
	s2 := digest.NewScheduler(db)
	if err := s2.Add("digest", daily, rec.job); err != nil {
		t.Fatal(err)
	}
	if outs := s2.RunDue(ctx, nine.Add(3*time.Hour)); len(outs) != 0 {
		t.Fatalf("a restart reposted: %v", texts(outs))
	}
	run, err := db.LastRun(ctx, "digest")
	if err != nil || !run.Due.Equal(nine) || run.Baseline {
		t.Errorf("recorded run = %+v, %v; want the 09:00 run", run, err)
	}
}

func TestSchedulerPostsAMissedRunOnceLate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gpubot.db")
	db := openStore(t, path)
	rec := &recorder{}
	daily := mustSchedule(t, "0 9 * * *", berlin)
	s := digest.NewScheduler(db)
	if err := s.Add("digest", daily, rec.job); err != nil {
		t.Fatal(err)
	}
	// First start Tuesday 08:00: the baseline.
	if outs := s.RunDue(ctx, t0); len(outs) != 0 {
		t.Fatalf("the first start posted: %v", texts(outs))
	}
	db.Close()

	// Down until Thursday 10:30: Tuesday's and Wednesday's digests are
	// missed; Thursday's is posted once, late.
	db = openStore(t, path)
	var logs bytes.Buffer
	s = digest.NewScheduler(db, digest.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err := s.Add("digest", daily, rec.job); err != nil {
		t.Fatal(err)
	}
	back := time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC)
	if d := cmp.Diff([]string{"2026-12-03T08:00:00Z"}, texts(s.RunDue(ctx, back))); d != "" {
		t.Fatalf("at the late start (-want +got):\n%s", d)
	}
	if got := rec.runs[0]; !got.Late || got.Missed != 2 || !got.Now.Equal(back) {
		t.Errorf("late run = %+v, want late with 2 missed", got)
	}
	if outs := s.RunDue(ctx, back.Add(time.Minute)); len(outs) != 0 {
		t.Errorf("the late run repeated: %v", texts(outs))
	}
	if !strings.Contains(logs.String(), "missed=2") {
		t.Errorf("the log does not count the missed runs:\n%s", logs.String())
	}
}

func TestSchedulerRetriesThenGivesUp(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "gpubot.db"))
	rec := &recorder{fail: 1}
	hourly := mustSchedule(t, "0 * * * *", time.UTC)
	s := digest.NewScheduler(db, digest.WithRetry(5*time.Minute, 3))
	if err := s.Add("hourly", hourly, rec.job); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 1, 7, 30, 0, 0, time.UTC)
	s.RunDue(ctx, start)
	eight := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	if outs := s.RunDue(ctx, eight); len(outs) != 0 {
		t.Fatalf("a failed run posted: %v", texts(outs))
	}
	if got := s.Next(); !got.Equal(eight.Add(5 * time.Minute)) {
		t.Fatalf("Next after a failure = %s, want the retry at 08:05", got)
	}
	if outs := s.RunDue(ctx, eight.Add(4*time.Minute)); len(outs) != 0 {
		t.Fatal("retried before the retry time")
	}
	if d := cmp.Diff([]string{"2026-12-01T08:00:00Z"}, texts(s.RunDue(ctx, eight.Add(5*time.Minute)))); d != "" {
		t.Fatalf("the retry (-want +got):\n%s", d)
	}

	// Three failures give the run up: recorded as failed, the next hour
	// runs as usual.
	rec.fail = 3
	nine := eight.Add(time.Hour)
	for i := range 3 {
		if outs := s.RunDue(ctx, nine.Add(time.Duration(i)*5*time.Minute)); len(outs) != 0 {
			t.Fatalf("attempt %d posted", i+1)
		}
	}
	run, err := db.LastRun(ctx, "hourly")
	if err != nil || !run.Failed || !run.Due.Equal(nine) {
		t.Errorf("after three failures the record is %+v, %v; want 09:00 failed", run, err)
	}
	if got := s.Next(); !got.Equal(nine.Add(time.Hour)) {
		t.Errorf("Next after giving up = %s, want 10:00", got)
	}
}

func TestSchedulerRecoversAPanickingJob(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "gpubot.db"))
	s := digest.NewScheduler(db, digest.WithRetry(time.Minute, 1))
	rec := &recorder{}
	if err := s.Add("boom", mustSchedule(t, "*/10 * * * *", time.UTC), func(context.Context, digest.Run) ([]commands.Output, error) {
		panic("nil map")
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("after", mustSchedule(t, "*/10 * * * *", time.UTC), rec.job); err != nil {
		t.Fatal(err)
	}
	s.RunDue(ctx, t0)
	outs := s.RunDue(ctx, t0.Add(10*time.Minute))
	if len(outs) != 1 || len(rec.runs) != 1 {
		t.Fatalf("the job after a panicking one did not run: %v", texts(outs))
	}
	if run, err := db.LastRun(ctx, "boom"); err != nil || !run.Failed {
		t.Errorf("the panicking job's record = %+v, %v; want failed", run, err)
	}
}

func TestFuncAndOutputsAdaptPlainBodies(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "gpubot.db"))
	s := digest.NewScheduler(db)
	var at []time.Time
	every := mustSchedule(t, "*/10 * * * *", time.UTC)
	if err := s.Add("plain", every, digest.Func(func(_ context.Context, now time.Time) error {
		at = append(at, now)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("sweep", every, digest.Outputs(func(_ context.Context, now time.Time) []commands.Output {
		return []commands.Output{{Reply: commands.Reply{Text: fmt.Sprint("swept at ", now.Format("15:04"))}}}
	})); err != nil {
		t.Fatal(err)
	}
	s.RunDue(ctx, t0)
	outs := s.RunDue(ctx, t0.Add(25*time.Minute))
	if d := cmp.Diff([]string{"swept at 07:25"}, texts(outs)); d != "" {
		t.Errorf("sweep outputs (-want +got):\n%s", d)
	}
	if len(at) != 1 || !at[0].Equal(t0.Add(25*time.Minute)) {
		t.Errorf("plain body ran at %v, want once at 07:25", at)
	}
	want := map[string]string{"plain": "*/10 * * * *", "sweep": "*/10 * * * *"}
	if d := cmp.Diff(want, s.Jobs()); d != "" {
		t.Errorf("Jobs (-want +got):\n%s", d)
	}
}

// failingCommitter fails while fail is set.
type failingCommitter struct {
	digest.Committer
	fail bool
}

func (f *failingCommitter) Commit(ctx context.Context, w records.Writes, at time.Time) ([]uint64, error) {
	if f.fail {
		return nil, errors.New("disk full")
	}
	return f.Committer.Commit(ctx, w, at)
}

// TestRunsAreCommittedWithTheirPosts: with a committer, a run's record and
// its posts are one transaction: the posts wait in the outbox (with their
// Seq), and a commit that fails records nothing, posts nothing, and runs
// the job again at the retry.
func TestRunsAreCommittedWithTheirPosts(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, filepath.Join(t.TempDir(), "gpubot.db"))
	rec := &recorder{}
	fc := &failingCommitter{Committer: db, fail: true}
	s := digest.NewScheduler(db, digest.WithCommitter(fc), digest.WithRetry(5*time.Minute, 3))
	if err := s.Add("digest", mustSchedule(t, "0 9 * * 1-5", berlin), rec.job); err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(ctx, t0); err != nil {
		t.Fatal(err)
	}
	nine := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	if outs := s.RunDue(ctx, nine); len(outs) != 0 {
		t.Fatalf("posts of a run that could not be recorded: %v", texts(outs))
	}
	if run, err := db.LastRun(ctx, "digest"); err != nil || !run.Baseline {
		t.Fatalf("after the failed commit the last run is %+v, %v; want the baseline", run, err)
	}
	if out, _ := db.Outbox(ctx); len(out) != 0 {
		t.Fatalf("outbox after the failed commit: %d messages", len(out))
	}
	fc.fail = false
	outs := s.RunDue(ctx, nine.Add(5*time.Minute))
	if len(outs) != 1 || outs[0].Seq == 0 {
		t.Fatalf("the retry posted %+v; want one post with its outbox Seq", outs)
	}
	out, err := db.Outbox(ctx)
	if err != nil || len(out) != 1 || out[0].Seq != outs[0].Seq {
		t.Fatalf("outbox = %+v, %v", out, err)
	}
	if o, err := commands.DecodeOutput(out[0].Message); err != nil || o.Reply.Text != outs[0].Reply.Text {
		t.Errorf("outbox message = %+v, %v", o, err)
	}
	if run, err := db.LastRun(ctx, "digest"); err != nil || !run.Due.Equal(nine) {
		t.Errorf("last run %+v, %v; want the 09:00 one", run, err)
	}
	if len(rec.runs) != 2 {
		t.Errorf("the job ran %d times, want twice (the failed commit, the retry)", len(rec.runs))
	}
}
