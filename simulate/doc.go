// Package simulate replays GPU-cluster traces through gpubot's allocator
// to compare admission policies and placements, and to answer "do we need
// more GPUs?": is the queue capacity-bound, fragmentation-bound or
// priority-bound, and what would N more GPUs change. It is also the
// project's benchmark for decision quality and estimate accuracy.
//
// # Basics
//
// ReadNodes and ReadTrace read a node list and a trace (openb's formats,
// from the FGD paper's Alibaba trace, or a generic CSV; see read.go).
// Replay runs the trace through allocator snapshots, once per policy, and
// returns a Report; Packing runs the FGD paper's packing experiment.
// WriteText prints a report's tables and WriteFiles writes results.json,
// CSV files and PNG plots. Nothing reads the clock or global state: the
// same inputs and seeds give byte-identical outputs, whatever the number
// of CPUs the runs are spread over.
//
// # The replay
//
// Jobs arrive at their (scaled) submission times. As the simulated
// cluster does, the replay catches the snapshot up to the arrival time
// (ends and the cycles they trigger), adds what arrives and runs a
// scheduling cycle: the allocator's Schedule, the one the bot and the
// simulated cluster use, through an allocator.Runner, which keeps the
// running jobs' ends between steps. A job runs for its recorded runtime
// whatever it asked for; a preempted job is requeued and restarts from
// the beginning (no checkpoints), and the GPU time it loses is counted.
//
// The cluster: one flavor per GPU model, named in lower case, whose
// GPUsPerNode is its largest node; one queue per team in one cohort; each
// flavor's GPUs split evenly as the teams' nominal quotas, every team
// lending all of it and borrowing without limit. The cohort's pool is
// then the cluster itself, so a job the allocator finds short of pool is
// short of free GPUs: the report says capacity, not cohort. Flavors are
// tried in the order of their GPUs, most first. With Setup.CPU and
// Setup.Memory (gpubot simulate --resources, on by default) the CPU and
// memory the pods ask for count too, as in a ClusterQueue whose resource
// group covers cpu and memory beside nvidia.com/gpu: a pod needs room for
// them on its node, and each flavor's CPU and memory are split as the
// GPUs are, as nominal quotas. On GPU nodes the CPU can run out first:
// openb's most common node has 8 GPUs and 96 CPUs, 12 a GPU, and 835 of
// its 7 064 GPU pods ask for more than 12 CPUs a GPU. A node list that does not give a node's CPU (memory)
// leaves it out (Report.Resources says what counted).
//
// The policies compared (StandardPolicies):
//
//   - fcfs: first come, first served; priority ignored, no preemption
//     (allocator.FirstComeFirstServed): what negotiating by hand does.
//   - kueue: Kueue's defaults: priority, then arrival (BestEffortFIFO), no
//     preemption.
//   - gpubot: gpubot's configuration: its admission mode (Admission Fair
//     Sharing with its half-life and entry penalty, or Kueue's Fair
//     Sharing, Policy.FairSharing, with every team's weight 1) and its
//     teams' preemption and flavorFungibility (the first team's apply to
//     every trace team); by default the bundled example's (Admission Fair
//     Sharing, 7 days, 1 hour, LowerPriority within a team, reclaim Any).
//
// Every policy uses the same placement (fragmentation-aware unless
// Setup.Placement says otherwise).
//
// # The openb mapping
//
// The openb pod list has no teams, priorities or requested durations:
//
//   - QoS LS (latency-sensitive) is priority high; BE (best effort) low;
//     Burstable, Guaranteed and none normal.
//   - Teams: a hash of the seed and the pod name is drawn against the
//     teams' weights: ReadOptions.Teams teams (default 4) weighing 1/i
//     (TeamsZipf, the default: a few teams submit most work) or the same
//     (TeamsUniform). Deterministic for a seed; another seed, other teams.
//   - GPU models become flavors; a gpu_spec pins the job to the first of
//     its models the cluster has (the packing mode allows every listed
//     model). A pod is one pod: all its GPUs on one node (topology host).
//   - Runtime is deletion_time minus scheduled_time (creation_time for
//     pods never scheduled, which then run for as long as they waited in
//     the trace). The requested duration, which the bot's estimates use,
//     is what a person would have typed: the runtime rounded up to 15m,
//     30m, 1h, 2h, 4h, 8h, 12h, 1d, 2d, 3d or 7d, or whole days beyond
//     (RequestedFor). Generic traces may give their own.
//   - CPU-only pods are left out of the replay (and counted: cpuOnly in
//     results.json), as gpubot's allocator models GPU workloads only; the
//     packing mode places them, as they take CPU and memory from GPU
//     nodes.
//   - A pod asking for a share of a GPU (gpu_milli < 1000) gets a whole
//     GPU in the replay (FractionalRoundUp, the default; FractionalSkip
//     leaves it out): the allocator counts whole GPUs, as Kueue's
//     nvidia.com/gpu quota does. The report gives the GPU-hours this adds.
//     The packing mode packs shares onto GPUs (FractionalShare, default)
//     as the FGD paper does; all figures say which they use.
//
// # Load
//
// Load.Factor speeds arrivals up (50x: fifty times the recorded arrival
// rate); runtimes are kept. Load.Target aims at the busiest moment: the
// arrivals are sped up until, had nothing waited, the jobs would ask for
// Target times the cluster's GPUs at the peak. The usual average offered
// load is no use for a trace like openb, a snapshot of pods in which 36
// of 7 064 GPU pods, running for more than ten days, hold 83 % of the
// GPU-hours, and most pods arrive in the last days: no speed-up gets its
// average demand over the arrival window above about 12 % of the cluster,
// while the peak reaches 120 % when everything arrives at once. The report gives both, as recorded and as replayed.
//
// # What is reported
//
// Per run (a policy on a cluster):
//
//   - Waits from submission to first start, per priority and overall:
//     mean, and nearest-rank p50, p95 and max. A job still waiting when the
//     replay ends (it can never fit) counts its wait to the last event and
//     is counted as never started.
//   - Starvation: the share of jobs of priority high or above that waited
//     more than an hour.
//   - GPU use: the mean share of GPUs in use over the arrival window (first
//     to last submission), the same to the last job's end, and the peak.
//   - Fragmentation: DESIGN.md's measure (a), Σ_k p_k·Σ_n free_n·[free_n<k]
//     with p_k the trace's share of pods of k GPUs, as % of all GPUs and of
//     the free ones, sampled Setup.Samples times over the arrival window
//     (and after it while jobs run): its mean over the window, its value
//     at the busiest sample, and the timeline (CSV, plot).
//   - Fairness: Jain's index over the teams of their jobs' mean bounded
//     slowdown, (wait + max(run, 1m)) / max(run, 1m).
//   - Preemptions and the GPU-hours they threw away.
//   - Why work waited: for each job that had to wait, the reason the bot
//     would have given when it was submitted (allocator Diagnose: quota,
//     cohort, capacity, fragmentation, topology), weighted by how long it
//     then waited; but priority if a job of higher priority, submitted
//     later and asking for at least as many GPUs of the same flavor (or
//     both unpinned), started before it: had priority not ordered them,
//     it could have had those GPUs (not under fcfs, which ignores
//     priority).
//   - Estimate calibration: when a sampled job has to wait at submission
//     (the bot posts an estimate only then), allocator.EstimateFor gives
//     the range the bot would have posted, with what the bot would have
//     learned so far: runtime ranges from the jobs finished unpreempted
//     (allocator.LearnRuntimes per team and template, the requested
//     duration standing for the template, which traces lack; a running
//     job's among the runs at least as long), after those of
//     Setup.History if given, and the last day's arrival
//     load per team, priority, flavor and size, each with how long it has
//     been arriving since its current burst began (allocator.LearnArrivals).
//     At the job's start (allocator.ScoreEstimates): was it inside the
//     range, give or take a minute (the card shows minutes; also
//     counted exactly, without the minute), the range's median width,
//     how far the start was from its middle (median, p90), and the mean
//     interval score (width + 10 × how far outside). Estimating is a
//     simulation of its own, so only every k-th job in arrival order is
//     sampled, k = ceil(jobs / Setup.Calibrate) (Calibrate < 0: every
//     job).
//
// A replay starts cold: until jobs finish, the estimates have only the
// prior (half to all of the requested time), and the first runs to
// finish are the shortest. The bot never starts so: its store keeps the
// finished requests it learns from. Setup.History (gpubot simulate
// --history) gives the replay that steady state: the runs of another
// trace, read with the same options so that its jobs map to teams,
// templates and flavors as the replay's do, are the runtime history
// before the first arrival; the trace itself serves as yesterday's runs.
// Each of its jobs the replay could run counts as one finished run of
// its recorded runtime. A job's own runtime is then among what its range
// is learned from, but only as one of the runs of its team and template:
// the levels are coarse (on openb, 4 teams × 11 durations, most cells of
// hundreds of runs; see BENCHMARKS.md).
//
// With Setup.Changes (more or fewer GPUs of a flavor), every policy runs
// on the changed cluster too and the report compares the two.
//
// # The packing mode
//
// See packing.go: the FGD paper's experiment and measure, on a model with
// shares of GPUs, CPU and memory; the figures are comparable point by
// point with the paper's Fig. 9(a), which the report shows beside them
// for the openb default trace (and the artifact's figures for
// gpushare100). fgd-scored follows the artifact's scheduler where it
// differs from the paper's text: its typical task types
// (packing_typical.go: CPU-only pods included, the most frequent up to
// 95 % of pods) and its node order for equal scores (a random
// permutation drawn once per seed, see newPacker).
//
// # Caveats
//
//   - The openb pod list is a packing benchmark more than a workload over
//     time: compressed enough to contend, it arrives within minutes and
//     its waits are seconds. Generic traces of jobs over time (exported
//     from a cluster, or the synthetic sample in testdata) are what the
//     replay is for.
//   - The teams, quotas and priorities of a replay are the mapping's, not
//     a configuration's: gpubot's policy brings its fair sharing and
//     preemption rules, not its teams or quotas.
//   - Jobs never fail, finish early or are cancelled other than as the
//     trace says; nobody extends, releases or approves anything.
package simulate
