package app

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

func TestDataDirBelongsToOneCluster(t *testing.T) {
	ctx := context.Background()
	prod := dataOwner{Kind: "kubernetes", UID: "9f1c", Server: "https://prod:6443"}
	staging := dataOwner{Kind: "kubernetes", UID: "77ab", Server: "https://staging:6443"}
	type claim struct {
		owner dataOwner
		ok    bool
	}
	cases := map[string]struct {
		legacySim bool // a data directory from before the record, with the simulated cluster's state
		claims    []claim
	}{
		"simulated, then a real cluster": {claims: []claim{{simulated, true}, {simulated, true}, {prod, false}}},
		"a real cluster, then another":   {claims: []claim{{prod, true}, {prod, true}, {staging, false}, {simulated, false}}},
		"legacy simulated directory":     {legacySim: true, claims: []claim{{prod, false}, {simulated, true}, {prod, false}}},
		"legacy directory of a cluster":  {claims: []claim{{staging, true}, {prod, false}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := store.Open(filepath.Join(dir, "gpubot.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if tc.legacySim {
				if err := db.PutState(ctx, simcluster.StateName, []byte("{}")); err != nil {
					t.Fatal(err)
				}
			}
			for i, c := range tc.claims {
				err := claimDataDir(ctx, db, dir, c.owner)
				if c.ok != (err == nil) {
					t.Fatalf("claim %d (%s): err = %v, want ok=%v", i, c.owner, err, c.ok)
				}
				if err != nil {
					if !errors.Is(err, ErrOtherCluster) {
						t.Errorf("claim %d: %v is not ErrOtherCluster", i, err)
					}
					if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), c.owner.String()) || !strings.Contains(err.Error(), "--data-dir") {
						t.Errorf("claim %d: message does not name the directory, both clusters and the way out: %v", i, err)
					}
				}
			}
		})
	}
}

// TestConsoleRecordsTheSimulatedCluster: the embedded default claims its
// data directory, so that a later run on a real cluster is refused before
// it touches anything.
func TestConsoleRecordsTheSimulatedCluster(t *testing.T) {
	dir := t.TempDir()
	if err := Run(context.Background(), Options{DataDir: dir, Stdin: strings.NewReader("/gpu capacity\n"), Stdout: io.Discard, LogFile: "-", Stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = claimDataDir(context.Background(), db, dir, dataOwner{Kind: "kubernetes", UID: "x", Server: "https://k:6443"})
	if !errors.Is(err, ErrOtherCluster) {
		t.Fatalf("claiming the console's directory for a cluster: %v, want ErrOtherCluster", err)
	}
}

// TestJSONLogs: --log-format json writes one JSON object per line, with a
// line for each command.
func TestJSONLogs(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "gpubot.log")
	err := Run(context.Background(), Options{DataDir: dir, Stdin: strings.NewReader("/gpu capacity\n/gpu status\n"), Stdout: io.Discard,
		LogFile: logPath, LogFormat: "json"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct{ Msg, Verb string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		if e.Msg == "command handled" {
			verbs = append(verbs, e.Verb)
		}
	}
	if strings.Join(verbs, ",") != "capacity,status" {
		t.Errorf("command lines for %v, want capacity and status", verbs)
	}
	if err := Run(context.Background(), Options{DataDir: dir, Stdin: strings.NewReader(""), Stdout: io.Discard, LogFile: "-", LogFormat: "xml"}); err == nil {
		t.Error("log format xml was accepted")
	}
}

// TestUsageExportUntilDefault: without --until the period ends now, or at
// the newest audit entry when the simulated cluster's time is ahead.
func TestUsageExportUntilDefault(t *testing.T) {
	dir := t.TempDir()
	if err := Run(context.Background(), Options{DataDir: dir, Stdin: strings.NewReader("/gpu request 8xa100 for 2h\n:advance 5h\n"), Stdout: io.Discard,
		LogFile: "-", Stderr: io.Discard, Start: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	for now, want := range map[time.Time]string{
		// The wall clock behind the simulated one: the newest entry, 12:00
		// (r6 ends then), bounds the period; r2 has run 48 × 12h.
		time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC): "r2,nlp,bob,h100,48,2026-11-30T02:00:00Z,,576.00",
		// The wall clock ahead: now bounds it.
		time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC): "r2,nlp,bob,h100,48,2026-11-30T02:00:00Z,,672.00",
	} {
		var out strings.Builder
		err := UsageExport(context.Background(), UsageOptions{DataDir: dir, Since: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Now: now}, &out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("now %s: export lacks %q:\n%s", now.Format(time.Kitchen), want, out.String())
		}
	}
}
