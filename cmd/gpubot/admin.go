package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpubot/gpubot/internal/app"
)

// newFlags is a flag set whose help prints usageText and then the flags
// with two dashes.
func newFlags(name, usageText string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		app.PrintFlags(fs)
	}
	return fs
}

// parse parses args and says which exit code to return now, if any:
// 0 for --help, 2 for a usage error.
func parse(fs *flag.FlagSet, args []string, maxArgs int) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > maxArgs {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(maxArgs))
		fs.Usage()
		return 2, true
	}
	return 0, false
}

const configUsage = `Usage: gpubot config check FILE

Check a configuration file the way gpubot reads it at start, and print
every problem as file:line:column: field: message. Exits 0 when the file
is good (with a one-line summary), 1 when it has problems, 2 on a usage
error.
`

func runConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, configUsage)
			return 0
		}
		fmt.Fprint(stderr, configUsage)
		return 2
	}
	fs := newFlags("gpubot config check", configUsage, stderr)
	if code, stop := parse(fs, args[1:], 1); stop {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "gpubot config check: name the configuration file")
		fs.Usage()
		return 2
	}
	n, err := app.ConfigCheck(fs.Arg(0), stdout)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "gpubot config check: %v\n", err)
		return 1
	case n > 0:
		fmt.Fprintf(stderr, "%s: %d problem(s)\n", fs.Arg(0), n)
		return 1
	}
	return 0
}

const auditUsage = `Usage: gpubot audit [flags]

Print the audit log of a stopped gpubot's data directory: every decision
and button press with who, what, when and the outcome, oldest first.
Refuses, changing nothing, while a running gpubot holds the directory.

Flags:
`

func runAudit(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("gpubot audit", auditUsage, stderr)
	dataDir := fs.String("data-dir", envOr("GPUBOT_DATA_DIR", app.DefaultDataDir()), "the stopped bot's data `directory`; or $GPUBOT_DATA_DIR")
	since := fs.String("since", "", "only entries since this `time`: a duration back from now (30d, 12h), a date (2026-11-01) or an RFC 3339 time; default: all")
	req := fs.String("request", "", "only the entries about this request `id` (r12)")
	asJSON := fs.Bool("json", false, "one JSON object per entry and line, for jq and log tools, instead of a table")
	if code, stop := parse(fs, args, 0); stop {
		return code
	}
	o := app.AuditOptions{DataDir: *dataDir, Request: *req, JSON: *asJSON}
	if *since != "" {
		t, err := app.ParseSince(*since, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "gpubot audit: --since %v\n", err)
			return 2
		}
		o.Since = t
	}
	if err := app.Audit(context.Background(), o, stdout); err != nil {
		fmt.Fprintf(stderr, "gpubot audit: %v\n", err)
		return 1
	}
	return 0
}

const usageExportUsage = `Usage: gpubot usage export [flags]

Export the GPU usage of a stopped gpubot's data directory: one row per
stretch of use (request, team, requester, flavor, GPUs, start, end,
GPU-hours within the period); work still running when the bot stopped has
an empty end and is counted to --until. CSV with a header line (the
default), or JSON lines. Refuses, changing nothing, while a running gpubot
holds the directory.

Flags:
`

func runUsage(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "export" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return runUsage([]string{"export", "--help"}, stdout, stderr)
		}
		fmt.Fprint(stderr, "Usage: gpubot usage export [flags]; see gpubot usage export --help\n")
		return 2
	}
	fs := newFlags("gpubot usage export", usageExportUsage, stderr)
	dataDir := fs.String("data-dir", envOr("GPUBOT_DATA_DIR", app.DefaultDataDir()), "the stopped bot's data `directory`; or $GPUBOT_DATA_DIR")
	since := fs.String("since", "30d", "start of the period: a duration back from now (30d), a date (2026-11-01) or an RFC 3339 `time`")
	until := fs.String("until", "", "end of the period, like --since; default: now, or the data directory's newest audit entry if later (a simulated cluster's time may be ahead)")
	asCSV := fs.Bool("csv", true, "write CSV (the default)")
	asJSON := fs.Bool("json", false, "write one JSON object per row and line instead of CSV")
	if code, stop := parse(fs, args[1:], 0); stop {
		return code
	}
	now := time.Now()
	o := app.UsageOptions{DataDir: *dataDir, Now: now, JSON: *asJSON}
	var err error
	if o.Since, err = app.ParseSince(*since, now); err != nil {
		fmt.Fprintf(stderr, "gpubot usage export: --since %v\n", err)
		return 2
	}
	if *until != "" {
		if o.Until, err = app.ParseSince(*until, now); err != nil {
			fmt.Fprintf(stderr, "gpubot usage export: --until %v\n", err)
			return 2
		}
	}
	if *asJSON && isSet(fs, "csv") && *asCSV {
		fmt.Fprintln(stderr, "gpubot usage export: give --csv or --json, not both")
		return 2
	}
	if err := app.UsageExport(context.Background(), o, stdout); err != nil {
		fmt.Fprintf(stderr, "gpubot usage export: %v\n", err)
		return 1
	}
	return 0
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

const rbacUsage = `Usage: gpubot rbac [flags]

Print the Kubernetes RBAC gpubot needs to drive a cluster with this
configuration: a ClusterRole that only reads what is cluster-scoped
(nodes, ResourceFlavors, Topologies, ClusterQueues, Cohorts,
WorkloadPriorityClasses, AdmissionChecks, the kube-system namespace for
the cluster's identity) and, in each team namespace, a Role and
RoleBinding for Jobs, Workloads, LocalQueues, Pods and ProvisioningRequests
there. Nothing is granted elsewhere.
  gpubot rbac --config gpubot.yaml | kubectl apply -f -

Flags:
`

func runRBAC(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("gpubot rbac", rbacUsage, stderr)
	cfg := fs.String("config", os.Getenv("GPUBOT_CONFIG"), "configuration `file`; default: the bundled example, or $GPUBOT_CONFIG")
	sa := fs.String("service-account", "gpubot", "gpubot's ServiceAccount `name`")
	ns := fs.String("namespace", "gpubot-system", "the `namespace` of gpubot's ServiceAccount")
	if code, stop := parse(fs, args, 0); stop {
		return code
	}
	if err := app.RBAC(app.RBACOptions{ConfigPath: *cfg, ServiceAccount: *sa, Namespace: *ns}, stdout); err != nil {
		fmt.Fprintf(stderr, "gpubot rbac: %v\n", err)
		return 1
	}
	return 0
}
