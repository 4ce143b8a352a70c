// Package allocator is gpubot's model of Kueue's admission policy for
// GPUs: quotas and cohorts, priorities, admission fair sharing, automatic
// and manual preemption, topology-aware placement, fragmentation, and
// wait-time estimates. The bot uses it to explain and predict what Kueue
// will do; the simulated cluster admits by it. It does no I/O and never
// reads the clock: time is always an argument.
//
// # Basics
//
// A Cluster describes what exists and the rules: flavors, nodes, queues
// (Kueue ClusterQueues, one per team) and the Policy. NewSnapshot combines
// it with the workloads and the queues' decayed usage at one instant. A
// Snapshot answers questions (Fit, Order, Diagnose, Capacity, Standing,
// ProposeVictims, Estimates) and changes only through its methods: the
// small mutations (Add, Reserve, Release, Evict, Extend) return an undo
// function, so that what-if questions need no copy; Clone gives an
// independent copy for longer experiments. Schedule runs one admission
// cycle; Advance moves time forward, finishing workloads and scheduling.
// A Runner does the same for long simulations (the trace replay), keeping
// the admitted workloads' ends between calls.
//
// The only resource is whole GPUs (nvidia.com/gpu). A request of G GPUs
// on a flavor becomes PodShape(G, GPUsPerNode) pods of equal size, each
// on one node. Everything admitted is placed on nodes, as if every flavor
// used Kueue's Topology Aware Scheduling: no node ever holds more GPUs
// than it has.
//
// Quota follows Kueue with one cohort level. For queue q and flavor f
// let N be the nominal quota, L the lendingLimit (N when unset), B the
// borrowingLimit (unlimited when unset) and u what q has admitted on f.
// G = N−L is guaranteed to q. The cohort's pool is P = Σ L over its
// queues and its use C = Σ max(0, u−G). A workload fits by quota if its
// GPUs are at most
//
//	Available(q) = min(N+B−u, max(0, G−u) + (P−C))
//
// (N−u for a queue without a cohort). It borrows if u + GPUs > N. This is
// Kueue's available() for a ClusterQueue under a root cohort; the tests
// check it against the examples of Kueue's ClusterQueue documentation.
//
// Flavor assignment uses Kueue's default flavorFungibility: the queue's
// flavors are tried in order (or only the pinned Workload.Flavor) and the
// first where the workload fits, by quota (borrowing allowed) and by
// placement, is taken; if none fits, the first where preemption can make
// room.
//
// Placement is fragmentation-aware by default (DESIGN.md
// "Fragmentation"); Policy.Placement selects another rule (below). Measure
// (a) of a set of nodes is Σ_k p_k · Σ_n free_n·[free_n < k]: the free
// GPUs that cannot host a pod of size k, averaged over the pod sizes k of
// requests. Inside a snapshot p_k is the share of pending and admitted
// workloads with pods of k GPUs on the flavor (uniform over 1, 2, 4, 8 if
// there are none). Pods are placed one by one, each on the node where
// measure (a) grows least (the change depends only on the node's free
// count), ties going to the node left with the fewest free GPUs, then to
// the node name. A host requirement puts every pod on one such node; a
// rack or block requirement first picks the rack or block whose greedy
// placement grows the measure least (ties by name), then places inside it.
// Capacity reports measure (a), as GPUs and as percentages, and the
// largest request that fits now at each topology level.
//
// The other placements, for comparison (the trace simulator measures
// them), place pods one by one on the same buckets: PlacementBestFit on
// the node with the fewest free GPUs that fit the pod, PlacementSpread on
// the node with the most, PlacementRandom on a node drawn uniformly among
// those that fit, from a hash of Policy.Seed, the workload ID and the pod
// index (so Fit and Schedule agree, clones agree, and a run is
// reproducible). Ties go to the node name. A host requirement applies the
// rule to nodes that fit every pod; a rack or block requirement picks the
// domain by the same rule on the domains' free GPUs, then places inside
// it.
//
// The admission order is: priority descending; in FairSharing mode, then
// the queue's Usage/Weight ascending (weight 0 counts as 1); then Created;
// then ID. FirstComeFirstServed mode, a baseline that is not a Kueue
// mode, orders by Created and ID only and never preempts automatically.
// A Schedule cycle takes the pending workloads in that order
// (see schedule.go for its phases): each is admitted if it fits, else its
// queue's automatic preemption policy may evict victims for it, else it
// waits without blocking those behind it (BestEffortFIFO, in both
// modes). In FairSharing mode every admission adds GPUs × EntryPenalty
// GPU-hours to the queue's usage, which can reorder the rest of the cycle.
//
// Automatic preemption follows Kueue's classical preemptor (preempt.go):
// WithinClusterQueue LowerPriority or LowerOrNewerEqualPriority within the
// queue; ReclaimWithinCohort Any or LowerPriority from other queues of the
// cohort while they borrow on the flavor, only when the preemptor's queue
// is below its nominal quota there and the preemptor would not borrow;
// the minimal set is found as Kueue does (candidates ordered other queues
// first, lower priority, most recently admitted; removed until the
// workload fits; then every one it fits without is added back). Victims
// become pending again (EventPreempted, By = the preemptor) and the
// preemptor is admitted at once. Preempt is the administrator's version:
// it evicts the given victims whatever their queue and priority, and
// admits the workload or undoes everything. ProposeVictims suggests such a
// set among lower-priority workloads of any queue.
//
// Diagnose tells why a pending workload waits. On each of its flavors it
// checks, in order: quota (its queue's own limit: N+B−u, or N−u without a
// cohort), cohort (the pool P−C), capacity (free GPUs of the flavor),
// fragmentation (no placement even ignoring topology) and topology (no
// placement within one host, rack or block). The flavor that gets
// furthest gives the Reason; a workload that would fit now, alone, is
// only behind others: ReasonPriority.
//
// Usage is decayed GPU-hours per queue: while R GPUs are admitted for dt,
// usage becomes usage·2^(−dt/H) + R·(H/ln 2)·(1 − 2^(−dt/H)), the exact
// integral with half-life H (DecayUsage). Advance accrues it in both
// modes, so that Standing is always meaningful.
//
// Estimates simulates the future twice on clones, with every workload's
// runtime at the low and at the high end of its Range (fraction of the
// requested Duration; its own from EstimateOptions.Workloads, else its
// queue's): at each end, the workload finishes and a cycle runs. Ends
// are rounded up onto a grid, a Step (a second) apart near Now and about
// 1/32 of how far ahead beyond (roundEnd), so that ends close together
// take one cycle. A workload's estimate is its first admission in each
// run; its Latest is then stretched for the arrivals that would go first
// (EstimateOptions.Arrivals). Both runs stop once every pending workload
// has been admitted, at the horizon, or when nothing is left to end.
// EstimateFor stops at its target. An Estimator keeps the last result and
// recomputes only when the state or the options changed.
//
// The ranges are learned by pure functions of the caller's records:
// LearnRuntimes (actual/requested per team and template, with broader
// levels as priors; RangeAfter for a run already under way) and
// LearnArrivals (the load of recent arrivals per queue and priority);
// ScoreEstimates scores posted ranges against starts (coverage, width,
// error, interval score).
//
// # Caveats
//
// What differs from Kueue, on purpose or for simplicity:
//
//   - A cycle considers every pending workload, in the global order, not
//     one head per ClusterQueue; Kueue's restrictions on several borrowing
//     admissions in one cohort per cycle are not modelled.
//   - The preemptor is admitted in the same cycle as its victims are
//     evicted (Kueue waits for them to terminate). Victims are not
//     considered again until the next cycle.
//   - Admission Fair Sharing in Kueue orders the LocalQueues inside one
//     ClusterQueue (by usage before priority); here it orders the queues
//     (teams) across the cluster, which Kueue does not do, so FairSharing
//     mode is a policy for simulations: on a real cluster (k8sbridge) the
//     mode is BestEffortFIFO, Kueue's order across ClusterQueues. Usage is
//     the exact integral rather than periodic samples, and the entry
//     penalty is added to usage directly.
//   - Kueue's cycle takes one head per ClusterQueue and admits those that
//     fit within nominal quota before those that must borrow; here a cycle
//     goes by the admission order alone.
//   - Fair Sharing preemption strategies, borrowWithinCohort,
//     non-default flavorFungibility, hierarchical cohorts and cohort-level
//     quotas, resources other than GPUs, admission checks, partial
//     admission, StrictFIFO and stop policies are not modelled.
//   - ReclaimWithinCohort takes another queue's workload only while that
//     queue still borrows at that point of the search, as Kueue does: the
//     last victim may leave it below nominal, but reclaim never continues
//     once a queue is back at its nominal quota.
//   - Placement is gpubot's fragmentation-aware rule (or one of the
//     comparison rules), not Kueue's TAS heuristics; victims are chosen by
//     Kueue's order and only checked for placement, not chosen for their
//     nodes.
//   - GPUs are whole: a request for a share of a GPU must be rounded up
//     by the caller (the trace simulator documents how it does that).
//   - A node with no rack (block) label is a rack (block) of its own.
//   - BorrowingLimit and LendingLimit of a queue without a cohort are
//     ignored (Kueue rejects them). Admitted workloads given to
//     NewSnapshot or Add are checked against node capacity but not against
//     quota or their topology requirement, as a real cluster may be
//     over-admitted; Available may then be negative.
//   - A request that cannot fit even on an empty cluster (more than the
//     queue could ever have by quota, or a topology no domain can meet)
//     never triggers preemption and is never admitted; Diagnose still
//     names the closest reason.
//   - Estimates' simulations take no new work: arrivals only stretch
//     Latest afterwards, by 1/(1−ρ) with ρ the load of the work that
//     would go first over the workload's flavors' GPUs (at most
//     MaxArrivalShare), not by simulating them. Runtimes are the factor
//     times the requested Duration, ends rounded up onto the grid (so a
//     start can be late by up to a Step, or 1/32 of how far ahead it
//     is, per end it waits for); a workload with Duration 0 never ends
//     within the horizon, and nothing at or after the horizon happens.
//     A run that does not admit a workload counts as the horizon in its
//     range.
//   - Undo functions must be called in reverse order of the mutations,
//     before any other mutation; a late or repeated call does nothing.
//   - A Snapshot is not safe for concurrent use; clones are independent.
//
// Performance: a cycle costs about the number of distinct pending
// requirements (queue, GPUs, topology, pinned flavor), not the number of
// pending workloads, because workloads with the same requirements fit or
// fail together; preemption searches are pruned by shadows, kept up to
// date, of what would be free without each candidate set (shadow.go).
// Tests hold the cycle to its plain definition (reference_test.go). An
// estimate simulation costs its cycles (a few hundred on the grid) plus
// its admissions and preemptions, which dominate. The Estimator's
// fingerprint costs a pass over the workloads; a change of any kind,
// the time included, means a full recomputation (there is no partial
// one). See BENCHMARKS.txt for figures.
package allocator
