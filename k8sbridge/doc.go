// Package k8sbridge connects gpubot to a Kubernetes cluster that runs
// Kueue (API kueue.x-k8s.io/v1beta2). It is the only package that imports
// client-go and Kueue's clientset, and it implements the same port as the
// simulated cluster (commands.Cluster), so the rest of gpubot does not
// know which one it talks to.
//
// # Basics
//
// Informers watch ResourceFlavors, Topologies, ClusterQueues, Cohorts,
// LocalQueues, WorkloadPriorityClasses, Workloads, Nodes, and the Jobs and
// Pods that carry gpubot's request label. Snapshot turns their caches
// into an allocator.Snapshot: flavors from ResourceFlavors, nodes from
// the ready GPU nodes each flavor's nodeLabels select (capacity comes only
// from the cluster: a flavor without nodes has none), with their rack and
// block from the flavor's Topology levels (or the configured labels), one
// queue per ClusterQueue (named after the team whose LocalQueue points at
// it), and one workload per Kueue Workload, admitted where Kueue admitted
// it. The allocator orders as Kueue does with one ClusterQueue per team:
// priority, then arrival (BestEffortFIFO), whatever the configured mode.
//
// KueueReport (commands.KueueView) says what Kueue says: per pending
// workload, Kueue's word from its Workload's QuotaReserved condition (the
// flavor assigner's reasons, word.go), Evicted, admission checks and
// spec.active, in a plain sentence with the raw message, and whether
// Kueue cannot admit it as it is (a reason that no wait can change, or, on
// topology-aware flavors, no node that exists can hold it even with the
// cluster empty); the GPU nodes no ResourceFlavor selects; the nodes of
// each flavor; and the Kueue features in use that the allocator does not
// model (features.go: from the ClusterQueues, the cohort tree and Kueue's
// manager Configuration, the ConfigMap kueue-manager-config, read at start
// and every few minutes). Findings are logged once each.
//
// Setup writes the Kueue objects that match gpubot's configuration
// (`gpubot kueue-setup`).
//
// Apply acts on the cluster:
//
//   - submit creates a suspended batch/v1 Job from the request's template,
//     named gpubot-<request id> in the team's namespace, labelled with the
//     team's LocalQueue, the WorkloadPriorityClass, the max-execution-time
//     and gpubot's request label; Kueue creates its Workload and admits it.
//     Creating the same request again finds the Job and does nothing.
//   - remove deletes the Job and its Workloads.
//   - extend raises the Workload's maximumExecutionTimeSeconds.
//   - preempt deactivates the victims' Workloads (spec.active=false), waits
//     until Kueue has evicted them, and reactivates them so that they queue
//     again; Kueue then admits the preemptor where the victims were.
//
// Kueue decides asynchronously. Submit waits a moment (Config.SubmitWait)
// for Kueue's first decision and returns the admission if it came; every
// other transition of the Workloads gpubot follows (admitted, evicted or
// preempted, finished) is turned into allocator.Events and handed to the
// sink given to Run, in order, one batch at a time. An event may be
// reported twice (once by submit, once by Run); the service ignores
// repeats.
//
// The pods of an admitted workload are followed too: EventPodsReady when
// all of them are ready (or have succeeded), EventPodsNotReady (with a
// short reason taken from a pod's status) when one that was ready stops
// being so, or when they are still not all ready Config.PodsReadyTimeout
// after admission. Kueue's PodsReady condition decides when the Workload
// has it (Kueue sets it only with waitForPodsReady, off by default);
// otherwise the bridge counts the Job's pods, or, for a tracked Job whose
// pods do not carry gpubot's label, the Job's ready and succeeded counts.
// Each change is reported once per admission: what was reported is kept
// in memory and recorded on the Job (AnnotationPods), so that informer
// resyncs and a restarted bridge do not repeat it.
//
// # Caveats
//
//   - Kueue admits by quota; the allocator also places pods on nodes.
//     For topology-aware flavors (a Kueue Topology) both do. For a flavor
//     without a Topology Kueue admits by quota alone: admitted workloads
//     whose nodes are not known are placed on the flavor's nodes greedily
//     (or on an overflow node when none has room) so that quota
//     accounting stays exact, and when such a flavor has fewer GPUs than
//     its quota the estimates are marked approximate.
//   - Fair-sharing usage is not read from the cluster: the allocator's
//     order among teams of equal priority is arrival order, as Kueue's
//     is across ClusterQueues.
//   - Kueue's cycle takes a ClusterQueue head that fits within nominal
//     quota before one that must borrow; the allocator goes by priority
//     and arrival only (README, "Known limits").
//   - A request whose Workload someone else deactivates stays in the
//     snapshot as pending (gpubot keeps following it; its KueueWord says
//     it will not start as it is); other deactivated Workloads are left
//     out.
//   - A request whose Job disappears while queued is created again (that is
//     also how a crash between persisting a request and creating its Job is
//     repaired); a running one is marked lost by the service.
package k8sbridge
