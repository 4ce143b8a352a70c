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

	"golang.org/x/term"

	"github.com/gpubot/gpubot/internal/app"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

const usage = `gpubot — GPU requests by chat, on Kubernetes clusters that run Kueue.

People ask for GPUs with /gpu commands; gpubot answers at once with where
the request stands and when it will start, asks the right lead to approve
what needs approval, and follows the work until the GPUs are released.
On the schedules in the configuration it posts daily digests (usage,
waits, fragmentation, the capacity verdict, a chart) and a weekly success
report.
Every 10 minutes (zombies.schedule) it sweeps for zombies (work holding
GPUs without using them) and asks their owners.

Usage:
  gpubot [command] [flags]

Commands:
  console   chat with gpubot in this terminal, on a simulated cluster
            (or a real one with --kubeconfig)
  run       run the bot: on Slack (Socket Mode) when SLACK_BOT_TOKEN and
            SLACK_APP_TOKEN are set, otherwise the console (the default command)
  simulate  replay a GPU-cluster trace to compare policies and capacity
  kueue-setup
            print the Kueue objects (flavors, queues, priorities…) that
            match the configuration, to apply to the cluster
  store     check a store, or back it up (also while gpubot runs):
            gpubot store check, gpubot store backup FILE
  version   print the version
  help      show this help, or a command's: gpubot help console

With no configuration gpubot uses its bundled example (deploy/gpubot.example.yaml):
two GPU flavors, three teams in a shared cohort, and some work already running,
two of it zombies.

Run "gpubot <command> --help" for a command's flags.
`

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
	case "run", "console":
		return runBot(cmd, args, stdin, stdout, stderr)
	case "simulate":
		return app.Simulate(args, app.SimulateIO{Stdout: stdout, Stderr: stderr, Terminal: isTerminal(stderr)})
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
		cfgPath  = fs.String("config", os.Getenv("GPUBOT_CONFIG"), "configuration `file` (YAML); default: the bundled example, or $GPUBOT_CONFIG")
		dataDir  = fs.String("data-dir", envOr("GPUBOT_DATA_DIR", app.DefaultDataDir()), "`directory` for gpubot.db and the log; or $GPUBOT_DATA_DIR")
		as       = fs.String("as", "", "console: who types first (a person's name from the config); default: the first person")
		start    = fs.String("start", "", "console: simulated start `time` (RFC 3339) of a new data directory (default: now); on an existing one, a later time moves its simulated time forward, as if gpubot had been stopped until then")
		logFile  = fs.String("log-file", "", "operator log `file`; \"-\" for standard error; default: <data-dir>/gpubot.log, or standard error on Slack")
		logLevel = fs.String("log-level", "info", "log `level`: debug, info, warn or error")
		kubecfg  = fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "Kubernetes cluster with Kueue to drive, as a kubeconfig `file`; or $KUBECONFIG; default: the simulated cluster")
		inClust  = fs.Bool("in-cluster", false, "drive the cluster gpubot runs in, with its pod's ServiceAccount")
		httpAddr = fs.String("http-addr", "", "serve /healthz, /readyz and /metrics on this `address` (e.g. :8080) on Slack or when driving a cluster; default: off")
	)
	fs.Usage = func() {
		switch cmd {
		case "console":
			fmt.Fprint(fs.Output(), `Usage: gpubot console [flags]

Chat with gpubot in this terminal, on a simulated cluster built from the
configuration. Type /gpu commands as you would in Slack (/gpu help lists
them) and console directives:
  :as <person>  :advance <duration>  :click <n> | :click <label> [id]
  :now  :people  :help  :quit
When standard input is not a terminal, lines are read one at a time and
replies printed as plain text; gpubot exits 0 at the end of the input.
State is kept in <data-dir>/gpubot.db: start again with the same
--data-dir and everything is where you left it (--start with a later time
resumes as if gpubot had been stopped until then). Scheduled digests are
posted when :advance passes their time; their charts are written to
<data-dir>/files and the path printed.

Flags:
`)
		default:
			fmt.Fprint(fs.Output(), `Usage: gpubot [run] [flags]

Run the bot. With SLACK_BOT_TOKEN and SLACK_APP_TOKEN set it connects to
Slack over Socket Mode (no public URL needed) and serves /gpu until it is
stopped; without them it starts the console chat (see gpubot console --help).
With --kubeconfig, $KUBECONFIG or --in-cluster it drives that cluster's
Kueue; otherwise it runs the simulated cluster from the configuration, in
real time.

Environment:
  SLACK_BOT_TOKEN       the app's Bot User OAuth Token (xoxb-…)
  SLACK_APP_TOKEN       an app-level token with connections:write (xapp-…)
  SLACK_BOT_TOKEN_FILE, SLACK_APP_TOKEN_FILE
                        files holding the tokens (e.g. mounted secrets),
                        read when the variables above are not set
  SLACK_API_URL         the Web API base URL (default https://slack.com/api/,
                        or the config's slack.apiURL)
  GPUBOT_CONFIG, GPUBOT_DATA_DIR, KUBECONFIG: see the flags

Flags:
`)
		}
		fs.PrintDefaults()
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
	if cmd == "run" {
		var err error
		if sl, err = slackOptions(); err != nil {
			fmt.Fprintf(stderr, "gpubot: %v\n", err)
			return 1
		}
		if sl.BotToken != "" || sl.AppToken != "" {
			if *logFile == "" {
				*logFile = "-"
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := app.Run(ctx, app.Options{
		ConfigPath:  *cfgPath,
		DataDir:     *dataDir,
		As:          *as,
		Stdin:       stdin,
		Stdout:      stdout,
		Stderr:      stderr,
		Interactive: isTerminal(stdin) && isTerminal(stdout),
		Start:       startAt,
		LogFile:     *logFile,
		LogLevel:    lvl,
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

func isTerminal(x any) bool {
	f, ok := x.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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
