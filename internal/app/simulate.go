package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/simulate"
)

const simulateUsage = `Usage: gpubot simulate --nodes FILE --trace FILE [--out DIR] [flags]

Replay a GPU-cluster trace through gpubot's allocator (the model of Kueue
the bot and its simulated cluster use) to compare admission policies and
answer "do we need more GPUs?". It prints tables on standard output and,
with --out, writes results.json, CSV files and PNG plots there.

Modes:
  replay   (default) jobs arrive at their (scaled) submission times, run
           for their recorded runtimes and leave; each policy is replayed:
             fcfs    first come, first served: priority ignored, no
                     preemption (what negotiating by hand approximates)
             kueue   Kueue's defaults: priority then arrival, no preemption
             gpubot  priority, the admission mode (Admission Fair
                     Sharing, or Kueue's Fair Sharing), preemption and
                     flavorFungibility as configured (--config; default:
                     the bundled example's priorities and preemption with
                     Admission Fair Sharing, 7d half-life, 1h entry penalty)
           Reported per policy: waits per priority (p50/p95/max), the share
           of high-priority jobs that waited over an hour, GPU
           utilisation, fragmentation over time, Jain's fairness index
           over teams, preemptions, why work waited, and how often the
           start fell inside the estimate the bot would have posted
           (learning runtimes from the jobs finished so far, and with
           --history from another trace's runs first, as the bot does
           from its store).
  packing  the FGD paper's experiment (ATC'23): pods arrive in a seeded
           random order and never leave; unallocated GPUs and
           fragmentation as the arrived demand grows to 130% of the GPUs,
           per placement (random, best-fit, spread, fgd: where the
           fragmentation grows least, fgd-scored: the same scored as the
           paper's Kubernetes plugin does), over several seeds (mean,
           min-max), beside the paper's figures for the openb default trace.

Inputs (CSV with a header; see the simulate package documentation):
  node lists: openb (sn,cpu_milli,memory_mib,gpu,model) or
              generic (name,flavor,gpus[,block,rack,cpu_milli,memory_mib])
  traces:     openb pod lists, or generic
              (submit,duration,gpus[,id,flavor,team,priority,requested,topology,
              cpu_milli,memory_mib])
openb pods become jobs as follows: QoS LS is priority high, BE low, the
rest normal; teams are drawn from a seeded hash of the pod name (--teams,
--team-mix, --seed); GPU models become flavors (lower case); a pod is one
pod, so all its GPUs are on one node; shares of a GPU (gpu_milli < 1000)
are rounded up to a whole GPU in the replay and packed as shares in the
packing mode (--fractional). CPU and memory count too (--resources): a
pod needs room for them on its node, and in the replay each team has a
share of every flavor's CPU and memory as quota, beside its GPUs.

The openb pod list is a snapshot of pods rather than a workload over time:
as recorded nothing waits, and to contend it must be compressed until it
arrives within minutes (--load 110% to 119%). Traces of jobs over time
(generic CSV) are what the replay is for.

Elastic capacity: --add 16xh100:spot (or :provisioned) replays once more
with an elastic pool of 16 H100 GPUs that only jobs switched to it use: a
job that has waited the configuration's elastic.offerAfter (default 1h) and
would start at once there switches, as a requester taking gpubot's offer; on
a provisioned pool it starts the flavor's provisioning prior later. The
what-if table shows the waits with the pool, and a line per run how many
jobs switched, their GPU-hours there and their cost at the price of the
configuration's first spot (or provisioned) flavor. Spot nodes are not
reclaimed in the replay.

Example:
  gpubot simulate --nodes ../shared/traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv \
    --trace ../shared/traces/alibaba-gpu-v2023/openb_pod_list_default.csv --load 110% --out out/

Flags:
`

// multiFlag collects a repeatable flag's values.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// SimulateIO is where gpubot simulate writes and how it tells time.
type SimulateIO struct {
	Stdout, Stderr io.Writer
	// Terminal says whether Stderr is a terminal: --progress auto draws
	// the progress bar only then.
	Terminal bool
	// Clock times the run (--stats) and the progress bar's estimate of
	// the time left; nil is the wall clock.
	Clock clock.PassiveClock
}

// Simulate is the "gpubot simulate" command: args are its flags; it
// returns the exit code (0 done, 1 failed, 2 bad usage).
func Simulate(args []string, sio SimulateIO) int {
	stdout, stderr := sio.Stdout, sio.Stderr
	clk := sio.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	fs := flag.NewFlagSet("gpubot simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		nodesPath  = fs.String("nodes", "", "node list `file` (required)")
		tracePath  = fs.String("trace", "", "trace `file` (required)")
		histPath   = fs.String("history", "", "replay: a trace `file` whose runs the estimates learn runtimes from before the replay, as the bot learns from the finished requests in its store (read as --trace is: the same teams; --trace's own file serves as yesterday's runs); default none, a cold start")
		outDir     = fs.String("out", "", "`directory` for results.json, CSV files and PNG plots (created); none: tables only")
		mode       = fs.String("mode", "replay", "`mode`: replay or packing")
		cfgPath    = fs.String("config", "", "gpubot configuration `file` whose priorities, admission mode (Admission Fair Sharing or Kueue's Fair Sharing) and (first team's) preemption and flavorFungibility the gpubot policy uses; default: the bundled example's, with Admission Fair Sharing (7d, 1h)")
		policies   = fs.String("policies", "fcfs,kueue,gpubot", "replay: the `policies` to compare, comma-separated")
		placement  = fs.String("placement", "fragmentation", "replay: node `placement` of every policy: fragmentation, best-fit, spread or random")
		load       = fs.String("load", "", "replay: `load`: 110% (or 1.1) speeds arrivals up until, had nothing waited, the busiest moment would ask for 110% of the GPUs; 50x is 50 times the recorded arrival rate; default as recorded")
		teams      = fs.Int("teams", 4, "openb: the number of `teams` pods are spread over")
		teamMix    = fs.String("team-mix", "zipf", "openb: how pods are spread over teams: zipf (team i weighs 1/i) or uniform")
		seed       = fs.Uint64("seed", 1, "`seed` for teams, random placement and the packing order (packing: the first of --seeds)")
		fractional = fs.String("fractional", "", "what becomes of shares of a GPU: round-up (replay default) or skip; share (packing default) or round-up")
		calibrate  = fs.Int("calibrate", 500, "replay: estimate the start of at most `N` submissions, every k-th job in arrival order (0: none, -1: every one)")
		samples    = fs.Int("samples", 400, "replay: `N` samples of the cluster over the arrival window (fragmentation over time)")
		seeds      = fs.Int("seeds", 10, "packing: the number of arrival orders")
		placements = fs.String("placements", strings.Join(simulate.PackingPlacements, ","), "packing: the `placements` to compare")
		maxArrived = fs.Int("max-arrived", 130, "packing: stop when the arrived demand is this `percent` of the GPUs")
		resources  = fs.String("resources", "gpu,cpu,memory", "the `resources` that count: gpu, and cpu and memory if listed (replay: on the nodes and in the teams' quotas, shares of the flavor's; packing: on the nodes)")
		skipBad    = fs.Bool("skip-bad", false, "skip rows that cannot be read (and count them) instead of stopping at the first")
		noPlots    = fs.Bool("no-plots", false, "do not draw PNG plots")
		progress   = fs.String("progress", "auto", "progress bar on standard error: auto (when it is a terminal), always or never")
		stats      = fs.Bool("stats", false, "print the elapsed time and the memory obtained from the system on standard error")
		adds       multiFlag
		removes    multiFlag
	)
	fs.Var(&adds, "add", "replay: also replay with `N`x<flavor> more GPUs (16xg2), as new nodes of the flavor's usual size; repeatable. N`x<flavor>:spot or :provisioned adds an elastic pool instead (at most one), which jobs switch to after waiting the configuration's elastic.offerAfter, priced as its first spot or provisioned flavor")
	fs.Var(&removes, "remove", "replay: also replay with `N`x<flavor> fewer GPUs (whole nodes, last by name); repeatable")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), simulateUsage)
		PrintFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "gpubot simulate: "+format+"\n", a...)
		fmt.Fprintln(stderr, `Run "gpubot simulate --help" for the flags.`)
		return 2
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *nodesPath == "" || *tracePath == "" {
		return usageErr("--nodes and --trace are both required")
	}
	if *mode != "replay" && *mode != "packing" {
		return usageErr("--mode %q: want replay or packing", *mode)
	}
	if *teamMix != string(simulate.TeamsZipf) && *teamMix != string(simulate.TeamsUniform) {
		return usageErr("--team-mix %q: want zipf or uniform", *teamMix)
	}
	if *progress != "auto" && *progress != "always" && *progress != "never" {
		return usageErr("--progress %q: want auto, always or never", *progress)
	}
	if *teams < 1 || *teams > 1000 {
		return usageErr("--teams %d: want 1 to 1000", *teams)
	}
	started := clk.Now()

	gpubot, classes, err := gpubotPolicy(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "gpubot simulate: %v\n", err)
		return 1
	}
	opts := simulate.ReadOptions{SkipBad: *skipBad, Teams: *teams, TeamMix: simulate.TeamMix(*teamMix), Seed: *seed, Priorities: classes}
	nodes, err := readNodes(*nodesPath, opts)
	if err != nil {
		fmt.Fprintf(stderr, "gpubot simulate: %v\n", err)
		return 1
	}
	trace, err := readTrace(*tracePath, opts)
	if err != nil {
		fmt.Fprintf(stderr, "gpubot simulate: %v\n", err)
		return 1
	}
	var history *simulate.Trace
	if *histPath != "" {
		if *mode != "replay" {
			return usageErr("--history applies to the replay, not the packing mode")
		}
		if history, err = readTrace(*histPath, opts); err != nil {
			fmt.Fprintf(stderr, "gpubot simulate: --history: %v\n", err)
			return 1
		}
	}
	type readNote struct {
		what     string
		skipped  int
		problems []error
	}
	read := []readNote{{*nodesPath, nodes.Skipped, nodes.Problems}, {*tracePath, trace.Skipped, trace.Problems}}
	if history != nil {
		read = append(read, readNote{*histPath, history.Skipped, history.Problems})
	}
	for _, x := range read {
		if x.skipped > 0 {
			fmt.Fprintf(stderr, "gpubot simulate: skipped %d bad rows of %s, for example:\n", x.skipped, x.what)
			for _, p := range x.problems[:min(3, len(x.problems))] {
				fmt.Fprintf(stderr, "  %v\n", p)
			}
		}
	}
	bar := newProgressBar(stderr, *progress == "always" || (*progress == "auto" && sio.Terminal), clk)
	var rep *simulate.Report
	useCPU, useMemory := false, false
	for _, r := range splitList(*resources) {
		switch r {
		case "gpu":
		case "cpu":
			useCPU = true
		case "memory":
			useMemory = true
		default:
			return usageErr("--resources: unknown resource %q (want gpu, cpu, memory)", r)
		}
	}
	if *mode == "packing" {
		if len(adds)+len(removes) > 0 {
			return usageErr("--add and --remove apply to the replay, not the packing mode")
		}
		ps := simulate.PackingSetup{Nodes: nodes.Nodes, Trace: trace, Seeds: *seeds, Seed: *seed, MaxArrived: *maxArrived,
			Fractional: simulate.Fractional(*fractional), Placements: splitList(*placements), Progress: bar.update,
			IgnoreCPU: !useCPU, IgnoreMemory: !useMemory}
		rep, err = simulate.Packing(ps)
	} else {
		setup := simulate.Setup{Nodes: nodes.Nodes, Trace: trace, History: history, Priorities: classes, Seed: *seed,
			Fractional: simulate.Fractional(*fractional), Calibrate: *calibrate, Samples: *samples, Progress: bar.update,
			CPU: useCPU && trace.HasCPU(), Memory: useMemory && trace.HasMemory()}
		if setup.Placement, err = parsePlacement(*placement); err != nil {
			return usageErr("%v", err)
		}
		if setup.Load, err = simulate.ParseLoad(*load); err != nil {
			return usageErr("%v", err)
		}
		std := simulate.StandardPolicies(gpubot)
		for _, name := range splitList(*policies) {
			i := slices.IndexFunc(std, func(p simulate.Policy) bool { return p.Name == name })
			if i < 0 {
				return usageErr("--policies: unknown policy %q (want fcfs, kueue or gpubot)", name)
			}
			setup.Policies = append(setup.Policies, std[i])
		}
		for _, a := range adds {
			c, err := simulate.ParseChange(a)
			if err != nil {
				return usageErr("--add %v", err)
			}
			setup.Changes = append(setup.Changes, simulate.Change{Flavor: c.Flavor, GPUs: abs(c.GPUs), Capacity: c.Capacity})
		}
		if n := len(slices.DeleteFunc(slices.Clone(setup.Changes), func(c simulate.Change) bool { return c.Capacity == "" })); n > 1 {
			return usageErr("--add: at most one elastic pool (:spot or :provisioned), not %d", n)
		}
		if err := elasticSetup(*cfgPath, &setup); err != nil {
			fmt.Fprintf(stderr, "gpubot simulate: %v\n", err)
			return 1
		}
		for _, r := range removes {
			c, err := simulate.ParseChange(r)
			if err != nil {
				return usageErr("--remove %v", err)
			}
			setup.Changes = append(setup.Changes, simulate.Change{Flavor: c.Flavor, GPUs: -abs(c.GPUs)})
		}
		rep, err = simulate.Replay(setup)
	}
	bar.done()
	if err != nil {
		fmt.Fprintf(stderr, "gpubot simulate: %v\n", err)
		return 1
	}
	if err := simulate.WriteText(stdout, rep); err != nil {
		fmt.Fprintf(stderr, "gpubot simulate: %v\n", err)
		return 1
	}
	if *outDir != "" {
		files, err := simulate.WriteFiles(*outDir, rep, !*noPlots)
		if err != nil {
			fmt.Fprintf(stderr, "gpubot simulate: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nWrote %s to %s.\n", strings.Join(files, ", "), *outDir)
	}
	if *stats {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(stderr, "gpubot simulate: %.2fs elapsed, %.0f MiB obtained from the system, %.0f MiB allocated in total\n",
			clk.Since(started).Seconds(), float64(ms.Sys)/(1<<20), float64(ms.TotalAlloc)/(1<<20))
	}
	return 0
}

// gpubotPolicy returns the gpubot policy and the priority classes from
// the configuration at path, or from the bundled example.
func gpubotPolicy(path string) (simulate.Policy, []simulate.PriorityClass, error) {
	var cfg *config.Config
	var err error
	if path == "" {
		cfg, err = config.Default()
	} else {
		cfg, err = config.Load(path)
	}
	if err != nil {
		return simulate.Policy{}, nil, err
	}
	cl := cfg.Cluster()
	pol := simulate.Policy{Name: "gpubot", Mode: cl.Policy.Mode, HalfLife: cl.Policy.HalfLife, EntryPenalty: cl.Policy.EntryPenalty}
	if path == "" {
		// The bundled example orders as Kueue does on a cluster
		// (BestEffortFIFO); the replay's own gpubot policy compares
		// Admission Fair Sharing with it.
		d := simulate.GpubotDefaults
		pol.Mode, pol.HalfLife, pol.EntryPenalty = d.Mode, d.HalfLife, d.EntryPenalty
	}
	if pol.Mode == "" {
		pol.Mode = allocator.BestEffortFIFO
	}
	if len(cl.Queues) > 0 {
		pol.Preemption = cl.Queues[0].Preemption
		pol.FlavorFungibility = cl.Queues[0].FlavorFungibility
	}
	pol.FairSharing = cl.Policy.FairSharing
	var classes []simulate.PriorityClass
	for _, p := range cfg.Settings().Priorities {
		classes = append(classes, simulate.PriorityClass{Name: p.Name, Value: p.Value})
	}
	return pol, classes, nil
}

func readNodes(path string, opts simulate.ReadOptions) (*simulate.NodeList, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the node list: %w", err)
	}
	defer f.Close()
	return simulate.ReadNodes(f, path, opts)
}

func readTrace(path string, opts simulate.ReadOptions) (*simulate.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	defer f.Close()
	return simulate.ReadTrace(f, path, opts)
}

func parsePlacement(s string) (allocator.Placement, error) {
	switch strings.ToLower(strings.ReplaceAll(s, "_", "-")) {
	case "fragmentation", "fragmentation-aware", "fragmentationaware", "fgd":
		return allocator.PlacementFragmentationAware, nil
	case "best-fit", "bestfit":
		return allocator.PlacementBestFit, nil
	case "spread":
		return allocator.PlacementSpread, nil
	case "random":
		return allocator.PlacementRandom, nil
	}
	return "", fmt.Errorf("--placement %q: want fragmentation, best-fit, spread or random", s)
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, strings.ToLower(x))
		}
	}
	return out
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// elasticSetup fills in the replay's elastic pool from the configuration
// at path (the bundled example for ""): when jobs switch, how long
// provisioning takes, and the price of a GPU-hour of the pool's kind.
func elasticSetup(path string, s *simulate.Setup) error {
	var kind string
	for _, c := range s.Changes {
		if c.Capacity != "" {
			kind = c.Capacity
		}
	}
	if kind == "" {
		return nil
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	el := cfg.Settings().Elastic
	s.OfferAfter, s.Currency = el.OfferAfter, el.Currency
	for _, t := range el.Flavors {
		if string(t.Capacity) != kind || s.ElasticPrice > 0 {
			continue
		}
		s.ElasticPrice = t.PricePerGPUHour
		if t.Capacity == commands.CapacityProvisioned {
			s.ProvisioningTime = t.ProvisioningPrior
		}
	}
	return nil
}
