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
		"help console":       {args: []string{"help", "console"}, stderr: []string{"Usage: gpubot console", ":advance", "\n  --data-dir directory\n", "\n  --as string\n", "\n  --config file\n", "\n  --start time\n"}},
		"console --help":     {args: []string{"console", "--help"}, stderr: []string{"Usage: gpubot console", "--log-file", "--log-level", "--log-format", "Ctrl-D"}},
		"run --help":         {args: []string{"run", "--help"}, stderr: []string{"Usage: gpubot [run]", "Socket Mode", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN_FILE", "SLACK_API_URL", "\n  --http-addr address\n"}},
		"slack --help":       {args: []string{"slack", "--help"}, stderr: []string{"Usage: gpubot slack", "are required", "\n  --in-cluster\n"}},
		"version":            {args: []string{"version"}, stdout: []string{"gpubot "}},
		"simulate":           {args: []string{"--help"}, stdout: []string{"simulate       replay a GPU-cluster trace"}},
		"simulate --help":    {args: []string{"simulate", "--help"}, stderr: []string{"Usage: gpubot simulate", "-nodes", "-progress"}},
		"simulate bad":       {args: []string{"simulate", "--trace", "x.csv"}, code: 2, stderr: []string{"--nodes and --trace are both required"}},
		"help config":        {args: []string{"help", "config"}, stdout: []string{"Usage: gpubot config check FILE", "file:line"}},
		"help audit":         {args: []string{"help", "audit"}, stderr: []string{"Usage: gpubot audit", "\n  --since time\n", "\n  --request id\n", "\n  --json\n"}},
		"help usage":         {args: []string{"help", "usage"}, stderr: []string{"Usage: gpubot usage export", "\n  --since time\n", "\n  --csv\n"}},
		"help rbac":          {args: []string{"help", "rbac"}, stderr: []string{"Usage: gpubot rbac", "\n  --config file\n", "\n  --namespace namespace\n"}},
		"help store":         {args: []string{"help", "store"}, stderr: []string{"gpubot store check", "gpubot store backup", "Restore:", "--data-dir"}},
		"--help lists store": {args: []string{"--help"}, stdout: []string{"store          check a store"}},
		"unknown":            {args: []string{"frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`, "Commands:"}},
		"bad flag":           {args: []string{"console", "--nope"}, code: 2, stderr: []string{"flag provided but not defined: -nope"}},
		"bad level":          {args: []string{"console", "--log-level", "loud"}, code: 2, stderr: []string{"--log-level"}},
		"bad format":         {args: []string{"console", "--log-format", "xml"}, code: 2, stderr: []string{`--log-format "xml": want text or json`}},
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

// TestNoSingleDashFlagsInHelp: every flag in every command's help is
// shown as it is typed, with two dashes.
func TestNoSingleDashFlagsInHelp(t *testing.T) {
	for _, cmd := range [][]string{{"console"}, {"run"}, {"slack"}, {"simulate"}, {"audit"}, {"rbac"}, {"usage", "export"}, {"store", "check"}, {"kueue-setup"}} {
		_, _, errw := runCLI(t, "", append(cmd, "--help")...)
		for _, line := range strings.Split(errw, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "-") && !strings.HasPrefix(strings.TrimSpace(line), "--") {
				t.Errorf("%s --help shows a single-dash flag: %q", cmd, line)
			}
		}
	}
}

// TestModesAreExplicit: no chat without tokens or a terminal, flags that
// would do nothing are refused, and $KUBECONFIG alone drives no cluster.
func TestModesAreExplicit(t *testing.T) {
	for _, k := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_BOT_TOKEN_FILE", "SLACK_APP_TOKEN_FILE", "KUBECONFIG"} {
		t.Setenv(k, "")
	}
	cases := map[string]struct {
		args   []string
		code   int
		stderr string
	}{
		"run without tokens or terminal": {args: []string{"run"}, code: 1, stderr: "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set"},
		"default command likewise":       {args: nil, code: 1, stderr: "gpubot console"},
		"slack without tokens":           {args: []string{"slack"}, code: 1, stderr: "SLACK_BOT_TOKEN is not set"},
		"http-addr in the console":       {args: []string{"console", "--http-addr", ":0"}, code: 2, stderr: "--http-addr serves health and metrics on Slack or with a real cluster"},
		"start on a real cluster":        {args: []string{"console", "--kubeconfig", "k", "--start", "2026-12-01T08:00:00Z"}, code: 2, stderr: "--start sets the simulated cluster's time"},
		"as on slack":                    {args: []string{"slack", "--as", "bob"}, code: 2, stderr: "--as is for the console"},
		"two clusters":                   {args: []string{"console", "--kubeconfig", "k", "--in-cluster"}, code: 2, stderr: "give one"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, _, errw := runCLI(t, "/gpu capacity\n", append(tc.args, "--data-dir", t.TempDir())...)
			if code != tc.code || !strings.Contains(errw, tc.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errw, tc.code, tc.stderr)
			}
		})
	}
	t.Run("KUBECONFIG alone", func(t *testing.T) {
		// An unreachable cluster: were it used, the run would fail.
		t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
		code, out, errw := runCLI(t, "/gpu capacity\n", "console", "--data-dir", t.TempDir(), "--start", "2026-12-01T08:00:00Z")
		if code != 0 || !strings.Contains(out, "h100") {
			t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errw)
		}
		if !strings.Contains(errw, "$KUBECONFIG is set (/nonexistent/kubeconfig) but not used") {
			t.Errorf("no visible notice that $KUBECONFIG is ignored; stderr:\n%s", errw)
		}
	})
}

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
