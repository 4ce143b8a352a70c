package main

import (
	"os"
	"strings"
	"testing"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errw strings.Builder
	code := run(args, strings.NewReader(stdin), &out, &errw)
	return code, out.String(), errw.String()
}

func TestHelpAndVersion(t *testing.T) {
	cases := map[string]struct {
		args     []string
		code     int
		stdout   []string
		stderr   []string
		noStdout bool
	}{
		"--help":             {args: []string{"--help"}, stdout: []string{"Usage:", "console", "run", "version", "help"}},
		"-h":                 {args: []string{"-h"}, stdout: []string{"Commands:"}},
		"help":               {args: []string{"help"}, stdout: []string{"Commands:"}},
		"help console":       {args: []string{"help", "console"}, stderr: []string{"Usage: gpubot console", ":advance", "-data-dir", "-as", "-config", "-start"}},
		"console --help":     {args: []string{"console", "--help"}, stderr: []string{"Usage: gpubot console", "-log-file", "-log-level"}},
		"run --help":         {args: []string{"run", "--help"}, stderr: []string{"Usage: gpubot [run]", "Socket Mode", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN_FILE", "SLACK_API_URL", "-http-addr"}},
		"version":            {args: []string{"version"}, stdout: []string{"gpubot "}},
		"simulate":           {args: []string{"--help"}, stdout: []string{"simulate  replay a GPU-cluster trace"}},
		"simulate --help":    {args: []string{"simulate", "--help"}, stderr: []string{"Usage: gpubot simulate", "-nodes", "-progress"}},
		"simulate bad":       {args: []string{"simulate", "--trace", "x.csv"}, code: 2, stderr: []string{"--nodes and --trace are both required"}},
		"help store":         {args: []string{"help", "store"}, stderr: []string{"gpubot store check", "gpubot store backup", "Restore:", "-data-dir"}},
		"--help lists store": {args: []string{"--help"}, stdout: []string{"store     check a store"}},
		"unknown":            {args: []string{"frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`, "Commands:"}},
		"bad flag":           {args: []string{"console", "--nope"}, code: 2, stderr: []string{"flag provided but not defined: -nope"}},
		"bad level":          {args: []string{"console", "--log-level", "loud"}, code: 2, stderr: []string{"--log-level"}},
		"bad start":          {args: []string{"console", "--start", "tuesday"}, code: 2, stderr: []string{"--start"}},
		"stray argument":     {args: []string{"console", "extra"}, code: 2, stderr: []string{`unexpected argument "extra"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errw := runCLI(t, "", tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errw)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errw, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errw)
				}
			}
		})
	}
}

func TestConsoleFromAPipeExitsZeroAtEndOfInput(t *testing.T) {
	dir := t.TempDir()
	code, out, errw := runCLI(t, "/gpu capacity\n:as bob\n/gpu queue\n", "console", "--data-dir", dir, "--start", "2026-12-01T08:00:00Z")
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, errw)
	}
	for _, s := range []string{"alice> /gpu capacity", "h100", "bob> /gpu queue"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	// --as picks who types first; an unknown person is a clear error.
	code, out, _ = runCLI(t, "/gpu status\n", "console", "--data-dir", dir, "--as", "carol")
	if code != 0 || !strings.Contains(out, "carol> /gpu status") {
		t.Errorf("--as carol: exit %d, output:\n%s", code, out)
	}
	code, _, errw = runCLI(t, "", "console", "--data-dir", dir, "--as", "mallory")
	if code != 1 || !strings.Contains(errw, "no such person") {
		t.Errorf("--as mallory: exit %d, stderr:\n%s", code, errw)
	}
}

func TestBadConfigIsReportedWithFileAndLine(t *testing.T) {
	dir := t.TempDir()
	cfg := dir + "/bad.yaml"
	if err := writeFile(cfg, "teams:\n  - name: nlp\n    quota: {h100: {nominal: -1}}\n"); err != nil {
		t.Fatal(err)
	}
	code, _, errw := runCLI(t, "", "console", "--data-dir", dir, "--config", cfg)
	if code != 1 || !strings.Contains(errw, "bad.yaml:") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and an error naming bad.yaml with a line", code, errw)
	}
}

func writeFile(path, text string) error { return os.WriteFile(path, []byte(text), 0o600) }

// gpubot kueue-setup prints deploy/kueue/setup.yaml for the bundled
// example; a configuration it cannot read is an error, and its help
// says what it writes.
func TestKueueSetupCommand(t *testing.T) {
	code, out, errs := runCLI(t, "", "kueue-setup")
	want, err := os.ReadFile("../../deploy/kueue/setup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || out != string(want) {
		t.Errorf("kueue-setup: exit %d, stderr %q; output differs from deploy/kueue/setup.yaml (%d vs %d bytes)", code, errs, len(out), len(want))
	}
	if code, _, errs := runCLI(t, "", "kueue-setup", "--config", "/nonexistent/gpubot.yaml"); code != 1 || !strings.Contains(errs, "/nonexistent/gpubot.yaml") {
		t.Errorf("a missing config: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "help", "kueue-setup"); code != 0 || !strings.Contains(errs, "Usage: gpubot kueue-setup") || !strings.Contains(errs, "kubectl apply --server-side") {
		t.Errorf("help kueue-setup: exit %d, stderr %q", code, errs)
	}
	if code, out, _ := runCLI(t, "", "--help"); code != 0 || !strings.Contains(out, "kueue-setup") {
		t.Errorf("--help does not list kueue-setup:\n%s", out)
	}
}
