// Command gpubot is a ChatOps bot for GPU requests on Kubernetes clusters
// that run Kueue. Run "gpubot --help" for its subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/gpubot/gpubot/internal/app"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "help":
		if len(args) > 0 && args[0] != "help" {
			return run([]string{args[0], "--help"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	case "version":
		fmt.Fprintf(stdout, "gpubot %s\n", versionString())
		return 0
	case "run", "console", "slack":
		return runBot(cmd, args, stdin, stdout, stderr)
	case "simulate":
		return app.Simulate(args, app.SimulateIO{Stdout: stdout, Stderr: stderr, Terminal: app.IsTerminal(stderr)})
	case "config":
		return runConfig(args, stdout, stderr)
	case "audit":
		return runAudit(args, stdout, stderr)
	case "usage":
		return runUsage(args, stdout, stderr)
	case "rbac":
		return runRBAC(args, stdout, stderr)
	case "kueue-setup":
		return runKueueSetup(args, stdout, stderr)
	case "store":
		return runStore(args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "gpubot: unknown command %q\n\n%s", cmd, usage)
	return 2
}

func runBot(cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gpubot "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfgPath   = fs.String("config", os.Getenv("GPUBOT_CONFIG"), "configuration `file` (YAML); default: the bundled example, or $GPUBOT_CONFIG")
		dataDir   = fs.String("data-dir", envOr("GPUBOT_DATA_DIR", app.DefaultDataDir()), "`directory` for gpubot.db, the console's history and the log; or $GPUBOT_DATA_DIR")
		as        = fs.String("as", "", "console: who types first (a person's name from the config); default: the first person")
		start     = fs.String("start", "", "console on the simulated cluster: simulated start `time` (RFC 3339) of a new data directory (default: now); on an existing one, a later time moves its simulated time forward, as if gpubot had been stopped until then")
		logFile   = fs.String("log-file", "", "operator log `file`; \"-\" for standard error; default: <data-dir>/gpubot.log in the console, standard error on Slack")
		logLevel  = fs.String("log-level", "info", "log `level`: debug (adds what people typed), info, warn or error")
		logFormat = fs.String("log-format", "text", "log `format`: text (key=value) or json (one object per line)")
		kubecfg   = fs.String("kubeconfig", "", "drive the Kubernetes cluster (with Kueue) of this kubeconfig `file`; $KUBECONFIG alone is not used; default: the simulated cluster")
		inClust   = fs.Bool("in-cluster", false, "drive the cluster gpubot runs in, with its pod's ServiceAccount")
		httpAddr  = fs.String("http-addr", "", "serve /healthz, /readyz and /metrics on this `address` (e.g. :8080); on Slack or with a real cluster only; default: off")
	)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), botUsage[cmd])
		app.PrintFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gpubot %s: unexpected argument %q\n", cmd, fs.Arg(0))
		fs.Usage()
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "gpubot: --log-level %q: want debug, info, warn or error\n", *logLevel)
		return 2
	}
	if *logFormat != "text" && *logFormat != "json" {
		fmt.Fprintf(stderr, "gpubot: --log-format %q: want text or json\n", *logFormat)
		return 2
	}
	var startAt time.Time
	if *start != "" {
		t, err := time.Parse(time.RFC3339, *start)
		if err != nil {
			fmt.Fprintf(stderr, "gpubot: --start %q: want a time like 2026-12-01T09:00:00Z\n", *start)
			return 2
		}
		startAt = t
	}
	var sl app.SlackOptions
	if cmd != "console" {
		var err error
		if sl, err = slackOptions(); err != nil {
			fmt.Fprintf(stderr, "gpubot: %v\n", err)
			return 1
		}
	}
	interactive := app.IsTerminal(stdin) && app.IsTerminal(stdout)
	chat, err := app.ChooseChat(cmd, sl.BotToken != "" || sl.AppToken != "", interactive)
	if err != nil {
		fmt.Fprintf(stderr, "gpubot %s: %v\n", cmd, err)
		return 1
	}
	onCluster := *kubecfg != "" || *inClust
	var set []string
	fs.Visit(func(f *flag.Flag) { set = append(set, f.Name) })
	if err := app.CheckFlags(chat, onCluster, set); err != nil {
		fmt.Fprintf(stderr, "gpubot %s: %v\n", cmd, err)
		return 2
	}
	if kc := os.Getenv("KUBECONFIG"); kc != "" && !onCluster {
		// Visible, not only in the log: the embedded default never
		// drives a cluster just because the shell has one configured.
		fmt.Fprintf(stderr, "gpubot: $KUBECONFIG is set (%s) but not used: gpubot runs on its simulated cluster. To drive that cluster, pass --kubeconfig \"$KUBECONFIG\".\n", kc)
	}
	if chat == app.ChatSlack && *logFile == "" {
		*logFile = "-"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = app.Run(ctx, app.Options{
		ConfigPath:  *cfgPath,
		DataDir:     *dataDir,
		As:          *as,
		Stdin:       stdin,
		Stdout:      stdout,
		Stderr:      stderr,
		Interactive: interactive,
		Start:       startAt,
		LogFile:     *logFile,
		LogLevel:    lvl,
		LogFormat:   *logFormat,
		Chat:        chat,
		Cluster:     app.ClusterOptions{Kubeconfig: *kubecfg, InCluster: *inClust, HTTPAddr: *httpAddr},
		Slack:       sl,
	})
	if err != nil {
		fmt.Fprintf(stderr, "gpubot: %v\n", err)
		return 1
	}
	return 0
}

// slackOptions reads the Slack tokens from the environment or the files
// it names, and SLACK_API_URL.
func slackOptions() (app.SlackOptions, error) {
	bot, err := secret("SLACK_BOT_TOKEN")
	if err != nil {
		return app.SlackOptions{}, err
	}
	tok, err := secret("SLACK_APP_TOKEN")
	if err != nil {
		return app.SlackOptions{}, err
	}
	return app.SlackOptions{BotToken: bot, AppToken: tok, APIURL: os.Getenv("SLACK_API_URL")}, nil
}

// secret is $name, or else the content of the file $name_FILE, trimmed.
func secret(name string) (string, error) {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v, nil
	}
	path := os.Getenv(name + "_FILE")
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		// The error names the file, never its content.
		return "", fmt.Errorf("reading %s_FILE: %w", name, err)
	}
	v := strings.TrimSpace(string(data))
	if v == "" {
		return "", fmt.Errorf("%s_FILE (%s) is empty", name, path)
	}
	return v, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if dirty {
				rev += "-dirty"
			}
			return "devel-" + rev
		}
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
	}
	return "devel"
}
