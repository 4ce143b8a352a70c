package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/store"
)

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := writeFile(bad, "timezone: Mars/Olympus\nteams:\n  - name: nlp\n    quota: {h100: {nominal: -1}}\n"); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "", "config", "check", filepath.Join("..", "..", "deploy", "gpubot.example.yaml"))
	if code != 0 || !strings.Contains(out, "ok: 3 teams, 7 people, 4 flavors (288 simulated GPUs)") {
		t.Errorf("the example: exit %d, stdout:\n%s", code, out)
	}
	code, out, errw := runCLI(t, "", "config", "check", bad)
	if code != 1 {
		t.Errorf("a bad file: exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], bad+":1:") || !strings.Contains(out, bad+":4:") || !strings.Contains(errw, "problem(s)") {
		t.Errorf("want every problem with file:line, the time zone on line 1 and the quota on line 4; stdout:\n%s\nstderr:\n%s", out, errw)
	}
	for name, args := range map[string][]string{"no file": {"config", "check"}, "no verb": {"config"}} {
		if code, _, _ := runCLI(t, "", args...); code != 2 {
			t.Errorf("%s: exit %d, want 2", name, code)
		}
	}
}

// demoDir is a data directory after alice's 8 A100s ran 2 hours (r10),
// in simulated time from 09:00 to 12:00.
func demoDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	script := "/gpu request 8xa100 for 2h\n:as bob\n/gpu request 8xh100 for 1d priority low\n:advance 3h\n"
	if code, _, errw := runCLI(t, script, "console", "--data-dir", dir, "--start", "2026-12-01T08:00:00Z"); code != 0 {
		t.Fatalf("console: exit %d\n%s", code, errw)
	}
	return dir
}

func TestAuditReadsTheLog(t *testing.T) {
	dir := demoDir(t)
	code, out, errw := runCLI(t, "", "audit", "--data-dir", dir, "--request", "R10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw)
	}
	var actions []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(l)
		if f[6] != "r10" {
			t.Errorf("--request r10 printed another request's entry: %s", l)
		}
		actions = append(actions, f[5])
	}
	if d := cmp.Diff([]string{"request", "admitted", "finished"}, actions); d != "" {
		t.Errorf("r10's audit trail (-want +got):\n%s\n%s", d, out)
	}
	code, out, _ = runCLI(t, "", "audit", "--data-dir", dir, "--json", "--since", "2026-12-01T09:30:00Z")
	if code != 0 {
		t.Fatalf("--json: exit %d", code)
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct{ At, Action, Outcome string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		if e.At < "2026-12-01T09:30:00Z" {
			t.Errorf("--since 09:30 printed an entry of %s", e.At)
		}
		n++
	}
	if n == 0 {
		t.Error("--since 09:30 printed nothing; the run went on until 11:00")
	}
	if code, _, errw := runCLI(t, "", "audit", "--data-dir", dir, "--since", "yesterday"); code != 2 || !strings.Contains(errw, "neither a duration") {
		t.Errorf("--since yesterday: exit %d, %s", code, errw)
	}
}

func TestUsageExportCSV(t *testing.T) {
	dir := demoDir(t)
	code, out, errw := runCLI(t, "", "usage", "export", "--data-dir", dir, "--since", "2026-12-01", "--until", "2026-12-01T11:00:00Z", "--csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errw)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%s", err, out)
	}
	if d := cmp.Diff([]string{"request", "team", "requester", "flavor", "gpus", "start", "end", "gpu_hours"}, rows[0]); d != "" {
		t.Errorf("header (-want +got):\n%s", d)
	}
	byID := map[string][]string{}
	for _, r := range rows[1:] {
		byID[r[0]] = r
	}
	if d := cmp.Diff([]string{"r10", "nlp", "alice", "a100", "8", "2026-12-01T08:00:00Z", "2026-12-01T10:00:00Z", "16.00"}, byID["r10"]); d != "" {
		t.Errorf("r10 (-want +got):\n%s", d)
	}
	// bob's r2 (48 H100s started 30h before the start) still runs: no
	// end, counted from the start of the period to --until.
	if r := byID["r2"]; len(r) != 8 || r[6] != "" || r[7] != "528.00" {
		t.Errorf("running r2 = %v, want an empty end and 48 × 11h = 528.00 GPU-hours", r)
	}
}

func TestAdminCommandsNeedADataDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{{"audit"}, {"usage", "export"}} {
		code, _, errw := runCLI(t, "", append(args, "--data-dir", dir)...)
		if code != 1 || !strings.Contains(errw, "holds no gpubot data") {
			t.Errorf("%v on a missing directory: exit %d, stderr:\n%s", args, code, errw)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s was created", dir)
	}
}

func TestAdminCommandsRefuseARunningBotsData(t *testing.T) {
	dir := demoDir(t)
	db, err := store.Open(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, args := range [][]string{{"audit"}, {"usage", "export"}} {
		code, out, errw := runCLI(t, "", append(args, "--data-dir", dir)...)
		if code != 1 || out != "" || !strings.Contains(errw, "the data directory is in use: a running gpubot holds") {
			t.Errorf("%v while the store is open: exit %d, stdout %q, stderr:\n%s", args, code, out, errw)
		}
	}
}
