// Package allocator is gpubot's model of Kueue v0.17's admission for GPU
// workloads: quotas on GPUs, CPU and memory in cohort trees, priorities,
// Kueue's scheduling cycle and flavor assignment (flavorFungibility
// included), classical and Fair Sharing preemption (borrowWithinCohort
// included), Kueue's Fair Sharing and an Admission Fair Sharing of its
// own, manual preemption, topology-aware placement, fragmentation, and
// wait-time estimates. The bot uses it to explain and predict what Kueue
// will do; the simulated cluster admits by it. It does no I/O and never
// reads the clock: time is always an argument.
//
// # Basics
//
// A Cluster describes what exists and the rules: flavors, nodes, queues
// (Kueue ClusterQueues, one per team), cohorts and the Policy.
// NewSnapshot combines it with the workloads and the queues' decayed
// usage at one instant. A Snapshot answers questions (Fit, Order,
// Diagnose, Capacity, Standing, DominantShares, ProposeVictims,
// Estimates) and changes only through its methods: the small mutations
// (Add, Reserve, Release, Evict, Extend) return an undo function, so
// that what-if questions need no copy; Clone gives an independent copy
// for longer experiments. Schedule runs Kueue's admission cycles;
// Advance moves time forward, finishing workloads and scheduling. A
// Runner does the same for long simulations (the trace replay), keeping
// the admitted workloads' ends between calls.
//
// # Resources
//
// The resources are a small fixed vector (resources.go): whole GPUs
// (nvidia.com/gpu), CPU in millicores and memory in bytes. A request of
// G GPUs on a flavor becomes PodShape(G, GPUsPerNode) pods of equal
// size, each on one node; its CPU and memory (Workload.CPU, Memory) are
// split evenly over them. A workload is one pod set whose resources are
// in the flavor's one resource group with the GPUs, so every resource
// takes the same flavor, as in a ClusterQueue whose resource group
// covers nvidia.com/gpu, cpu and memory. Everything admitted is placed
// on nodes, as if every flavor used Kueue's Topology Aware Scheduling:
// no node ever holds more GPUs, or more CPU or memory where the node
// counts them (Node.CPU, Memory; 0 is not counted), than it has. A
// queue's quota covers CPU (memory) on a flavor when Quota.CPU (Memory)
// is set; a workload asking for a resource its queue does not cover on a
// flavor never fits there, as in Kueue. Clusters that use only GPU
// quotas, cohorts without parents or quota, classical preemption and the
// default flavorFungibility run on a GPU-only engine (schedule.go,
// quota.go, preempt.go, shadow.go, fast_assign.go) that the reference
// tests hold to the general engine (kueue_cycle.go and the kueue_*.go
// files) event by event; every other cluster runs on the general one.
//
// # Quota
//
// Quota follows Kueue's cohort tree (tree.go; pkg/cache/scheduler,
// resource_node.go): queues are the leaves, Cohorts (Cluster.Cohorts,
// with a parent, quota of their own and a weight) the inner nodes. For
// every node and flavor-resource, N is the nominal quota, L the
// lendingLimit (N when unset), B the borrowingLimit (unlimited when
// unset). A node keeps N−L for itself (its local quota); its
// SubtreeQuota is N plus what its children lend it; its usage is, for a
// queue, what it has admitted, and for a cohort what its children use
// beyond what they keep. A workload fits by quota if, in every resource
// it asks for, it is at most Kueue's available():
//
//	available(n) = max(0, local(n) − u(n)) + min(available(parent),
//	               SubtreeQuota(n) − local(n) − max(0, u(n) − local(n)) + B)
//
// (the min only with B set; for a root, SubtreeQuota − u). It borrows if
// it takes a node beyond its SubtreeQuota. With one cohort level and no
// cohort quota this is min(N+B−u, max(0, G−u) + (P−C)) with G = N−L,
// the cohort's pool P = Σ L and its use C = Σ max(0, u−G) (quota.go, the
// GPU-only engine's arithmetic); the tests check both against the
// examples of Kueue's ClusterQueue and Cohort documentation.
//
// # The admission cycle
//
// Schedule runs Kueue's scheduling cycles (pkg/scheduler/scheduler.go,
// schedule) until no queue offers a workload that could be admitted
// (kueue_cycle.go has the full definition):
//
//  1. Heads: each queue offers its first pending workload in its order
//     (priority, then Created) not yet found inadmissible since quota
//     was released (BestEffortFIFO: Kueue parks such workloads until
//     then).
//  2. Nominate: every head gets its flavor assignment and preemption
//     targets on the snapshot as the cycle found it.
//  3. Order: heads that fit without borrowing first, then by priority,
//     then arrival (Kueue's classicalIterator); under Kueue's Fair
//     Sharing, by a tournament of dominant resource shares at each pop.
//  4. Admit, in that order: a head that cannot fit waits; one that needs
//     preemption and found no targets waits and holds back, for the rest
//     of the cycle, the quota it would take (quotaResourcesToReserve),
//     unless its queue reclaims with Any; one whose targets another head
//     of this cycle already preempted, or that no longer fits after the
//     heads before it (so a cohort that admitted a borrowing workload
//     this cycle has that much less to lend), is tried again next cycle;
//     otherwise its targets are evicted (EventPreempted, By = the
//     preemptor), they are pending again, and it is admitted
//     (EventAdmitted).
//  5. A release (a preemption) makes every inadmissible workload that
//     could use the released flavor (under Kueue's Fair Sharing, every
//     one) a candidate again, as Kueue's QueueInadmissibleWorkloads does.
//
// # Flavor assignment
//
// Kueue's flavor assigner (kueue_assign.go; flavorassigner.go,
// findFlavorForPodSets): the queue's flavors are tried in order (or only
// the pinned Workload.Flavor), leaving out elastic flavors (Flavor.Elastic,
// spot or provisioned capacity) unless the workload is pinned to one: a
// gpubot rule, which the bridge makes Kueue's by pinning Jobs with node
// affinity. On each, every resource the workload asks
// for gets a mode: noFit when it is more than the queue could ever have
// there, or when it does not fit now and preemption may not be tried —
// Kueue preempts only for a request within the queue's nominal quota, or
// when reclaiming inside a subtree would make room, or when the queue
// may preempt while borrowing (borrowWithinCohort, or Fair Sharing with
// reclaimWithinCohort); fit when it fits the available quota, with how
// high in the tree it borrows; else the preemption oracle's answer
// (SimulatePreemption): reclaim when every target is in other queues,
// preempt when some is the queue's own, no candidates. The flavor's mode
// is its resources' worst. flavorFungibility decides where the search
// stops (shouldTryNextFlavor: by default at a fit without borrowing or,
// whenCanBorrow MayStopSearch, any fit; whenCanPreempt MayStopSearch at
// a flavor where preemption works) and which flavor tried wins
// (isPreferred: BorrowingOverPreemption, the default, prefers fit, then
// reclaim, then preempt, then the lower borrowing height, then the
// earlier flavor; PreemptionOverBorrowing the lower height first).
//
// # Preemption
//
// Classical preemption (kueue_preempt.go, preempt.go; preemption.go
// classicalPreemptions, hierarchical_preemption.go): candidates are the
// queue's own admitted workloads (WithinClusterQueue LowerPriority or
// LowerOrNewerEqualPriority) and, under ReclaimWithinCohort (Any or
// LowerPriority), those of queues in its cohort tree that are above
// their nominal quota on a flavor-resource that needs preemption: found
// walking up from the queue, with a hierarchical advantage over the
// workloads of a subtree once the request fits within it, and, with
// borrowWithinCohort, lower-priority ones (up to its threshold) while the
// preemptor borrows. Kueue's order (other queues first, lower priority,
// most recently admitted) is followed; they are removed until the
// workload fits, then every one it fits without is added back. A
// candidate of another queue is skipped once that queue is back within
// nominal quota.
//
// Under Kueue's Fair Sharing (Policy.FairSharing, kueue_fair.go;
// fair_sharing.go, fair_sharing_iterator.go, preemption/fairsharing)
// every tree node's dominant resource share is what it borrows of the
// resource where that is largest, over what its parent could lend it,
// ×1000, divided by its weight (ZeroWeight: Kueue's weight 0). Heads are
// ordered by a tournament at every cohort, lowest share with the head
// admitted first; preemption visits the target queues from the root
// down, the highest share first, and takes a candidate while the
// preemptor stays within nominal quota or the strategies
// (LessThanOrEqualToFinalShare, LessThanInitialShare, in the order
// given) hold between the shares of the two sides of their lowest common
// ancestor. DominantShares and Standing report the shares.
//
// Preempt is the administrator's version: it evicts the given victims
// whatever their queue and priority, and admits the workload or undoes
// everything. ProposeVictims suggests such a set among lower-priority
// workloads of any queue.
//
// # gpubot's own modes
//
// Policy.Mode FairSharing (Admission Fair Sharing, across queues) orders
// heads by priority, then the queue's decayed usage over its weight
// (weight 0 counts as 1), then Created; FirstComeFirstServed, a
// baseline that is not a Kueue mode, by Created alone, and never
// preempts automatically. Both take one head a cycle in that global
// order, so that work goes one at a time in it (its victims pending
// again only at the end of Schedule); in FairSharing every admission
// adds GPUs × EntryPenalty GPU-hours to the queue's usage, which can
// reorder the rest.
//
// # Placement
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
// it. Pods that ask for CPU or memory on nodes that count them are placed
// by the same rules among the nodes with room for a whole pod in every
// resource (placement_res.go).
//
// # Diagnose
//
// Diagnose tells why a pending workload waits. On each of its flavors it
// checks, in order: quota (its queue's own limit, in any resource),
// cohort (what the tree can lend it), capacity (free GPUs, CPU or memory
// of the flavor's nodes), fragmentation (no placement even ignoring
// topology) and topology (no placement within one host, rack or block).
// The flavor that gets furthest gives the Reason; a workload that would
// fit now, alone, is only behind others: ReasonPriority.
// DiagnoseResource and FitResource also name the resource that stops it
// (CPU or memory when it is theirs, else GPUs); ResourceUse and
// FreeResource give the figures the replies quote.
//
// # Usage and estimates
//
// Usage is decayed GPU-hours per queue: while R GPUs are admitted for dt,
// usage becomes usage·2^(−dt/H) + R·(H/ln 2)·(1 − 2^(−dt/H)), the exact
// integral with half-life H (DecayUsage). Advance accrues it in every
// mode, so that Standing is always meaningful.
//
// Estimates simulates the future twice on clones, with every workload's
// runtime at the low and at the high end of its Range (fraction of the
// requested Duration; its own from EstimateOptions.Workloads, else its
// queue's): at each end, the workload finishes and a cycle runs. Ends
// are rounded onto a grid, a Step (a second) apart near Now and about
// 1/32 of how far ahead beyond (roundEnd), so that ends close together
// take one cycle: down in the low run, up in the high one, so that the
// grid widens a range rather than moving it. A workload's estimate is its first admission in each
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
// What differs from Kueue v0.17, on purpose or for simplicity. Where
// Kueue needs more cycles than the model to reach the same state, the
// item says where they converge.
//
//   - A head found inadmissible passes over the workloads of its class
//     (same queue, resources, topology and pinned flavor, behind it and
//     of no higher priority): they could only fail the same way until
//     quota is released on a flavor they may use (then the class is
//     tried again from its first workload) or, for a queue that
//     reclaims, until a queue of its cohort tree admits while above its
//     nominal quota (under Fair Sharing: admits at all). Kueue gives
//     each of them a cycle of its own, in which they fail, and the
//     queue's next other workload is its head only after them; here it
//     is its head in the next cycle. Meanwhile the other queues' heads
//     go on: the two agree unless, in those cycles, the other queues
//     admit what the queue's next other workload would have competed
//     for (the same quota or nodes). Nothing else that Kueue does in
//     those cycles is left out: the passed-over workloads would hold
//     back the same capacity as the first (Kueue's reservation lasts one
//     cycle), which here is held in the cycle of the first only.
//   - When a head needs preemption, its search stopped before the last
//     flavor (whenCanPreempt or whenCanBorrow MayStopSearch) and the
//     targets for all its resources together are none, Kueue keeps the
//     flavor it stopped at (LastTriedFlavorIdx), requeues the workload
//     at once and goes on from the next flavor in the next cycle; here
//     the nomination goes on to the next flavor at once, and the capacity
//     Kueue holds back for it in that one cycle is not held.
//   - The preemptor is admitted in the same cycle as its victims are
//     evicted; Kueue admits it in a later cycle, once they have
//     terminated, and nominates it again then: the same result unless
//     something else changed meanwhile.
//   - The preemption oracle of the flavor search and the preemption
//     targets place the preemptor's pods on the nodes the victims would
//     free; Kueue's oracle counts quota alone.
//   - Admission Fair Sharing in Kueue orders the LocalQueues inside one
//     ClusterQueue (by usage before priority); the FairSharing mode here
//     orders the queues (teams) across the cluster, which Kueue does not
//     do, so it is a policy for simulations: on a real cluster
//     (k8sbridge) the mode is BestEffortFIFO, with Kueue's Fair Sharing
//     when its manager Configuration turns it on. Usage is the exact
//     integral rather than periodic samples, and the entry penalty is
//     added to usage directly. Its one-head-a-cycle order, and
//     FirstComeFirstServed's, are gpubot's definitions.
//   - Resources: one resource group per queue, holding GPUs and, when
//     set, CPU and memory; a queue's CPU or memory in a resource group of
//     its own, other resources and resource transformations are not
//     modelled (the bridge flags the first two). Workloads without GPUs
//     are not modelled, so on a real cluster the CPU and memory they
//     take of a queue's quota is not counted. A Workload of several pod
//     sets is one of their totals. GPUs are whole: a request for a share
//     of a GPU must be rounded up by the caller (the trace simulator
//     documents how it does that).
//   - Under Kueue's Fair Sharing, Kueue takes the heads of queues
//     without a cohort and of separate cohort trees in no defined order;
//     here queues without a cohort go first, then the tree whose winner
//     comes first by priority, then arrival. Its v0.17 defaults are
//     followed (the feature gates FairSharingPreemptWithinNominal and
//     FairSharingPrioritizeNonBorrowing on).
//   - StrictFIFO, admission checks, partial admission, elastic
//     workloads, stop policies and waitForPodsReady are not modelled.
//   - Placement is gpubot's fragmentation-aware rule (or one of the
//     comparison rules), not Kueue's TAS heuristics; victims are chosen by
//     Kueue's order and only checked for placement, not chosen for their
//     nodes.
//   - A node with no rack (block) label is a rack (block) of its own.
//   - BorrowingLimit and LendingLimit of a queue without a cohort are
//     ignored (Kueue rejects them); those of a cohort without a parent,
//     and cycles of cohorts, are rejected, as Kueue rejects them
//     (NewSnapshot's error). Admitted workloads
//     given to NewSnapshot or Add are checked against node capacity but
//     not against quota or their topology requirement, as a real cluster
//     may be over-admitted; available may then be negative.
//   - A request that cannot fit even on an empty cluster (more than the
//     queue could ever have by quota, or a topology no domain can meet)
//     never triggers preemption and is never admitted; Diagnose still
//     names the closest reason.
//   - Schedule stops after 4·n+64 cycles for n workloads: a guard
//     against a chain of preemptions that would not end.
//   - Estimates' simulations take no new work: arrivals only stretch
//     Latest afterwards, by 1/(1−ρ) with ρ the load of the work that
//     would go first over the workload's flavors' GPUs (at most
//     MaxArrivalShare) for no longer than that work has been arriving
//     (since its current burst began: ArrivalRate.Over, burstStart),
//     or by that time if work going first by order asks for more than
//     the GPUs (EstimateOptions.Arrivals), not by simulating them. The
//     load is in GPU-hours per hour: a burst of long runs counts as
//     more than the cluster even where most of it fits at once. Runtimes are the factor
//     times the requested Duration, ends rounded up onto the grid (so a
//     start can be late by up to a Step, or 1/32 of how far ahead it
//     is, per end it waits for); a workload with Duration 0 never ends
//     within the horizon, and nothing at or after the horizon happens.
//     A run that does not admit a workload counts as the horizon in its
//     range.
//   - Undo functions must be called in reverse order of the mutations,
//     before any other mutation; a late or repeated call does nothing.
//   - A Snapshot is not safe for concurrent use; clones are independent.
//     The exceptions are its reads that fill no cache: Now, Cluster,
//     Workload(s), Usage, Capacity, Standing and Clone may run at once
//     on a snapshot that nobody changes; Fit, Diagnose, the preemption
//     searches and the estimates fill caches in the snapshot they run
//     on, so they need a snapshot of their own.
//
// # Performance
//
// A cycle costs about the number of distinct pending requirements
// (queue, resources, topology, pinned flavor), not the number of pending
// workloads, because workloads with the same requirements fit or fail
// together. The GPU-only engine prunes preemption searches within a
// queue by shadows, kept up to date, of what would be free without each
// candidate set (shadow.go; a LowerOrNewerEqualPriority shadow moves to
// a head's Created only when its set as it stands does not decide), runs
// reclaim searches on scratch counts (greedyFits) without a shadow, and
// skips a flavor's preemption search that could not
// beat the best flavor found so far; the general engine scans only nodes
// with free GPUs (placement_res.go). One head a cycle, a class's failed
// nomination is remembered until something that could undo the failure
// happens on one of its flavors (failmemo.go): where the head has no
// preemption candidates, a release undoes it only if the GPUs now fit
// the quota and, the pods having not fitted, a node's free count reached
// a new multiple of the pod's GPUs (setFree tabulates those steps), and
// the pods now fit on the free nodes. A cycle whose head hits its memo
// is only its class's drop, and a failed head holds back no quota (no
// other head of its cycle could see it). One
// head a cycle, the dropped classes are listed, the queues' tops are
// compared by the keys their heaps record, and a resumed class's next
// head is searched from its cursor up. The admission order, the
// admitted lists and the end heap compare Created and admission times as
// wall-clock integers kept beside the slots (the victim order's negated,
// so both lists compare alike), and the admitted lists sit in two-sided
// windows (window.go): a change moves the shorter side. Tests hold the cycle to its plain
// definition (reference_test.go). An estimate simulation costs its
// Schedule calls (a few hundred on the grid; under Admission Fair
// Sharing about 100 000 one-head cycles in all) plus its admissions and
// preemption searches, which dominate. The two simulations run one a
// goroutine; the low one's, once it is over, prepares what the estimates
// take from the snapshot itself (the pending order, the counts ahead,
// the reasons, the map), while the high one, the longer, still runs.
// The simulations' lean clones share their parent's ID map and take
// their admissions from blocks, and while a snapshot's slots are in ID
// order (as NewSnapshot makes them) ties on IDs are broken by slot. The
// Estimator's fingerprint costs a pass
// over the workloads; a change of any kind, the time included, means a
// full recomputation, but for the state the last simulations reached
// after their first step (Kueue admitted what they predicted at the same
// Now): that is rebuilt from their kept starts, order, counts and
// estimates (estimator_reuse.go). A new pending workload always means a
// full one: it changes the pending mix every fragmentation-aware score
// reads, and the one-head cycles. Its own estimate need not wait for it:
// an Estimator that keeps checkpoints (KeepCheckpoints, checkpoint.go)
// answers ForNew by resuming its last simulations, with the new workload
// added, from the last checkpoint before it could start. See
// BENCHMARKS.md for figures.
package allocator
