package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sampleDir = "../../simulate/testdata"

// runSim runs "gpubot simulate" with args (the first, "simulate", is
// the subcommand's name, as typed).
func runSim(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if len(args) == 0 || args[0] != "simulate" {
		t.Fatalf("runSim %v: want simulate first", args)
	}
	var out, errb bytes.Buffer
	code = Simulate(args[1:], SimulateIO{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

// TestSimulateEndToEnd runs the invocation on the samples.
func TestSimulateEndToEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errs := runSim(t, "simulate", "--nodes", filepath.Join(sampleDir, "openb_nodes_sample.csv"),
		"--trace", filepath.Join(sampleDir, "openb_pods_sample.csv"), "--out", dir, "--load", "110%", "--add", "16xg2")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"Wait to start", "fcfs", "kueue", "gpubot +16xg2", "Why work waited", "Estimates", "What if +16xg2", "Wrote "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	var rep struct {
		Mode string
		Runs []struct{ Name string }
	}
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil || rep.Mode != "replay" || len(rep.Runs) != 6 {
		t.Errorf("results.json: %v, %+v", err, rep)
	}
	for _, f := range []string{"wait-cdf.png", "fragmentation.png"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: %v, not a PNG", f, err)
		}
	}
	for _, f := range []string{"summary.csv", "waits.csv", "jobs-gpubot.csv", "timeline-kueue.csv", "jobs-fcfs_+16xg2.csv"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestSimulatePacking(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runSim(t, "simulate", "--mode", "packing", "--seeds", "2", "--nodes", filepath.Join(sampleDir, "openb_nodes_sample.csv"),
		"--trace", filepath.Join(sampleDir, "openb_pods_sample.csv"), "--out", dir, "--placements", "best-fit,fgd")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "Unallocated GPUs, % of all GPUs") || !strings.Contains(out, "fgd leaves up to") {
		t.Errorf("stdout:\n%s", out)
	}
	for _, f := range []string{"results.json", "packing.csv", "packing-summary.csv", "packing.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestSimulateHelp(t *testing.T) {
	code, _, help := runSim(t, "simulate", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, flag := range []string{"-nodes", "-trace", "-out", "-mode", "-config", "-policies", "-placement", "-load", "-teams", "-team-mix",
		"-seed", "-fractional", "-calibrate", "-samples", "-seeds", "-placements", "-max-arrived", "-resources", "-skip-bad", "-no-plots",
		"-progress", "-stats", "-add", "-remove", "-history", "Usage: gpubot simulate"} {
		if !strings.Contains(help, flag) {
			t.Errorf("--help lacks %s", flag)
		}
	}
}

func TestSimulateErrors(t *testing.T) {
	nodes, pods := filepath.Join(sampleDir, "openb_nodes_sample.csv"), filepath.Join(sampleDir, "openb_pods_sample.csv")
	bad := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(bad, []byte("submit,duration,gpus\n0,1h,1\n60,1h,two\n120,1h,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args []string
		code int
		want string
	}{
		"no nodes":           {[]string{"--trace", pods}, 2, "--nodes and --trace are both required"},
		"unknown policy":     {[]string{"--nodes", nodes, "--trace", pods, "--policies", "fcfs,lottery"}, 2, `unknown policy "lottery"`},
		"bad load":           {[]string{"--nodes", nodes, "--trace", pods, "--load", "fast"}, 2, `--load "fast"`},
		"bad placement":      {[]string{"--nodes", nodes, "--trace", pods, "--placement", "tetris"}, 2, `--placement "tetris"`},
		"bad mode":           {[]string{"--nodes", nodes, "--trace", pods, "--mode", "chaos"}, 2, `--mode "chaos"`},
		"bad add":            {[]string{"--nodes", nodes, "--trace", pods, "--add", "lots"}, 2, "--add"},
		"unknown flavor":     {[]string{"--nodes", nodes, "--trace", pods, "--add", "8xh100"}, 1, `no flavor "h100"`},
		"missing file":       {[]string{"--nodes", "nowhere.csv", "--trace", pods}, 1, "reading the node list"},
		"bad row":            {[]string{"--nodes", nodes, "--trace", bad}, 1, "bad.csv:3: gpus: \"two\" is not a number"},
		"unreachable load":   {[]string{"--nodes", nodes, "--trace", pods, "--load", "900%"}, 1, "cannot be reached"},
		"stray argument":     {[]string{"--nodes", nodes, "--trace", pods, "extra"}, 2, `unexpected argument "extra"`},
		"bad progress":       {[]string{"--nodes", nodes, "--trace", pods, "--progress", "sometimes"}, 2, `--progress "sometimes"`},
		"add in packing":     {[]string{"--nodes", nodes, "--trace", pods, "--mode", "packing", "--add", "8xg2"}, 2, "not the packing mode"},
		"history in packing": {[]string{"--nodes", nodes, "--trace", pods, "--mode", "packing", "--history", pods}, 2, "--history applies to the replay"},
		"missing history":    {[]string{"--nodes", nodes, "--trace", pods, "--history", "nowhere.csv"}, 1, "--history: reading the trace"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, _, errs := runSim(t, append([]string{"simulate"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errs, tc.code, tc.want)
			}
		})
	}
	// --skip-bad reads on and says how many rows it skipped.
	code, out, errs := runSim(t, "simulate", "--nodes", nodes, "--trace", bad, "--skip-bad")
	if code != 0 || !strings.Contains(errs, "skipped 1 bad rows of") || !strings.Contains(errs, "bad.csv:3:") || !strings.Contains(out, "1 bad rows skipped") {
		t.Errorf("--skip-bad: exit %d\n%s%s", code, out, errs)
	}
}

// TestSimulateHistory: --history reads a trace (here the replayed one,
// as yesterday's runs) whose runs the estimates start from, and says so.
func TestSimulateHistory(t *testing.T) {
	pods := filepath.Join(sampleDir, "openb_pods_sample.csv")
	code, out, errs := runSim(t, "simulate", "--nodes", filepath.Join(sampleDir, "openb_nodes_sample.csv"), "--trace", pods,
		"--history", pods, "--load", "110%", "--policies", "gpubot")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "History: the estimates learned runtimes from ") || !strings.Contains(out, " runs of openb_pods_sample.csv before the replay.") {
		t.Errorf("stdout lacks the history line:\n%s", out)
	}
}

// TestSimulateOpenB runs the invocation of issue 5 as written, from the
// repository root, on the real traces (skipped when they are not there).
func TestSimulateOpenB(t *testing.T) {
	root := "../.."
	traces := filepath.Join(root, "../shared/traces/alibaba-gpu-v2023")
	if _, err := os.Stat(traces); err != nil {
		t.Skipf("the real traces are not here (%v); they live in ../shared/traces next to the repository", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	dir := t.TempDir()
	code, out, errs := runSim(t, "simulate", "--nodes", "../shared/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv",
		"--trace", "../shared/traces/alibaba-gpu-v2023/openb_pod_list_default.csv", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d (from %s)\n%s%s", code, wd, out, errs)
	}
	if !strings.Contains(out, "7064 GPU jobs of 8152 rows") || !strings.Contains(out, "1213 nodes, 6212 GPUs") {
		t.Errorf("stdout:\n%s", out)
	}
	for _, f := range []string{"results.json", "summary.csv", "wait-cdf.png", "fragmentation.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
