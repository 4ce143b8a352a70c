package allocator

import (
	"fmt"
	"strings"
	"time"
)

// Level is a topology level a workload may require all its pods to share.
type Level int

const (
	// LevelNone places pods anywhere in the flavor.
	LevelNone Level = iota
	// LevelHost requires all pods on one node.
	LevelHost
	// LevelRack requires all pods in one rack.
	LevelRack
	// LevelBlock requires all pods in one block.
	LevelBlock
)

var levelNames = [...]string{"", "host", "rack", "block"}

// String returns "host", "rack", "block", or "" for LevelNone.
func (l Level) String() string {
	if l < 0 || int(l) >= len(levelNames) {
		return fmt.Sprintf("Level(%d)", int(l))
	}
	return levelNames[l]
}

// ParseLevel is the inverse of Level.String; "" and "none" give LevelNone.
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return LevelNone, nil
	case "host":
		return LevelHost, nil
	case "rack":
		return LevelRack, nil
	case "block":
		return LevelBlock, nil
	}
	return LevelNone, fmt.Errorf("unknown topology level %q (want host, rack or block)", s)
}

// Flavor is a kind of GPU node (a Kueue ResourceFlavor).
type Flavor struct {
	Name string
	// GPUsPerNode is the flavor's usual node size; it decides how a
	// request is split into pods (see PodShape).
	GPUsPerNode int
	// Elastic marks capacity bought on demand (spot or provisioned nodes):
	// only workloads pinned to the flavor (Workload.Flavor) may use it, so
	// that work asking for any flavor never spends money unasked.
	Elastic bool
}

// Node is one GPU node. Host is the node name itself. CPU and Memory
// are its allocatable millicores and bytes; 0 means not counted (the
// node never runs out of it).
type Node struct {
	Name   string
	Flavor string
	GPUs   int
	Block  string
	Rack   string
	CPU    int64
	Memory int64
}

// Quota is a ClusterQueue's (or a Cohort's) quota for one flavor, with
// Kueue's meaning: BorrowingLimit caps how much above Nominal the queue
// may use from its cohort (nil: no cap); LendingLimit caps how much of
// its unused Nominal the queue lends to the cohort (nil: all of it).
// Nominal and the limits count GPUs; CPU and Memory, when set, are the
// quotas of the same flavor for cpu (millicores) and memory (bytes), in
// Kueue's one resource group with nvidia.com/gpu. A queue whose quota
// has no CPU (Memory) does not cover that resource: as in Kueue, a
// workload that asks for it never fits there.
type Quota struct {
	Nominal        int
	BorrowingLimit *int
	LendingLimit   *int
	CPU, Memory    *ResourceQuota
}

// ResourceQuota is a quota on CPU (millicores) or memory (bytes), with
// the meaning of Quota's fields.
type ResourceQuota struct {
	Nominal        int64
	BorrowingLimit *int64
	LendingLimit   *int64
}

// Preemption policies, named as in Kueue's ClusterQueue spec.preemption.
const (
	PreemptNever                     = "Never"
	PreemptLowerPriority             = "LowerPriority"
	PreemptLowerOrNewerEqualPriority = "LowerOrNewerEqualPriority"
	PreemptAny                       = "Any"
)

// Preemption is a ClusterQueue's automatic preemption policy.
type Preemption struct {
	// WithinClusterQueue: Never, LowerPriority or LowerOrNewerEqualPriority.
	WithinClusterQueue string
	// ReclaimWithinCohort: Never, LowerPriority or Any.
	ReclaimWithinCohort string
	// BorrowWithinCohort: Never ("" too) or LowerPriority: the queue may
	// preempt lower-priority work of other queues in its cohort tree
	// while it borrows (Kueue's preemption.borrowWithinCohort), only
	// work of priority at most BorrowWithinCohortMaxPriority when that
	// is set.
	BorrowWithinCohort            string
	BorrowWithinCohortMaxPriority *int32
}

// Kueue's flavorFungibility values.
const (
	MayStopSearch           = "MayStopSearch"
	TryNextFlavor           = "TryNextFlavor"
	BorrowingOverPreemption = "BorrowingOverPreemption"
	PreemptionOverBorrowing = "PreemptionOverBorrowing"
)

// FlavorFungibility is a ClusterQueue's flavorFungibility: whether the
// flavor search goes on past a flavor where the workload fits only by
// borrowing (WhenCanBorrow, default MayStopSearch) or only by
// preempting (WhenCanPreempt, default TryNextFlavor), and, with both
// TryNextFlavor, which of the flavors tried wins (Preference:
// BorrowingOverPreemption, the default, or PreemptionOverBorrowing).
type FlavorFungibility struct {
	WhenCanBorrow  string
	WhenCanPreempt string
	Preference     string
}

// Queue is one team's ClusterQueue.
type Queue struct {
	Name string
	// Cohort is the queue's cohort: "" for none, else the name of a
	// Cluster.Cohorts entry or of a cohort without quota of its own.
	Cohort string
	// Flavors lists the flavors the queue may use, in the order Kueue's
	// flavor assignment tries them.
	Flavors []string
	Quotas  map[string]Quota
	// Weight is the fair-sharing weight, in both the Admission Fair
	// Sharing mode and Kueue's Fair Sharing; 0 means 1 (ZeroWeight is
	// Kueue's weight 0).
	Weight            float64
	Preemption        Preemption
	FlavorFungibility FlavorFungibility
}

// ZeroWeight is the Weight of a queue or cohort whose Kueue fair-sharing
// weight is 0: it borrows only what nobody else wants, and is preempted
// first (Kueue's CompareDRS puts a borrowing zero weight above every
// other share).
const ZeroWeight = 1e-9

// Cohort is a Kueue Cohort object: a node of the cohort tree with a
// parent, quota of its own (nominal quota adds to what its subtree
// shares; a borrowing limit caps what the subtree takes from the parent,
// a lending limit what it gives the parent), and a fair-sharing weight.
// Queues name their cohort in Queue.Cohort; a cohort named there or as a
// parent but not listed is a root without quota, as in Kueue.
type Cohort struct {
	Name   string
	Parent string // "" for a root
	Quotas map[string]Quota
	Weight float64 // 0 means 1; ZeroWeight is Kueue's weight 0
}

// Kueue's fair-sharing preemption strategies.
const (
	LessThanOrEqualToFinalShare = "LessThanOrEqualToFinalShare"
	LessThanInitialShare        = "LessThanInitialShare"
)

// KueueFairSharing is Kueue's Fair Sharing, the manager
// Configuration's fairSharing: heads are ordered by the dominant
// resource share of their queues and cohorts, and preemption evens the
// shares, with the strategies in order (nil: LessThanOrEqualToFinalShare
// then LessThanInitialShare, Kueue's default).
type KueueFairSharing struct {
	PreemptionStrategies []string
}

// Mode selects the admission ordering.
type Mode string

const (
	// BestEffortFIFO orders pending work by priority, then arrival; a
	// workload that does not fit does not block the ones behind it.
	BestEffortFIFO Mode = "BestEffortFIFO"
	// FairSharing (Admission Fair Sharing) orders by priority, then by the
	// queue's decayed usage divided by its weight, then arrival.
	FairSharing Mode = "AdmissionFairSharing"
	// FirstComeFirstServed orders by arrival only, ignoring priority, and
	// never preempts automatically: what first-come-first-served manual
	// allocation does. A workload that does not fit does not block the
	// ones behind it, as in BestEffortFIFO. It is not a Kueue mode; the
	// trace simulator uses it as a baseline.
	FirstComeFirstServed Mode = "FirstComeFirstServed"
)

// Placement selects how the pods of an admitted workload are put on
// nodes (see the package doc, "Placement").
type Placement string

const (
	// PlacementFragmentationAware puts each pod where measure (a) of
	// fragmentation grows least (DESIGN.md). It is the default.
	PlacementFragmentationAware Placement = "FragmentationAware"
	// PlacementBestFit puts each pod on the node with the fewest free GPUs
	// that still fit it (packing).
	PlacementBestFit Placement = "BestFit"
	// PlacementSpread puts each pod on the node with the most free GPUs
	// (worst fit, Kubernetes' LeastAllocated).
	PlacementSpread Placement = "Spread"
	// PlacementRandom puts each pod on a node drawn uniformly among those
	// that fit it, from a hash of Policy.Seed, the workload ID and the pod
	// index: deterministic for a given state, seed and workload.
	PlacementRandom Placement = "Random"
)

// Policy is the cluster-wide admission policy.
type Policy struct {
	Mode Mode // "" means BestEffortFIFO; also FairSharing, FirstComeFirstServed
	// HalfLife of the decayed usage (see DecayUsage); 0 means no decay.
	// Usage accrues in both modes; only FairSharing orders by it.
	HalfLife time.Duration
	// EntryPenalty is added to a queue's usage, as GPUs × EntryPenalty
	// GPU-hours, at each admission (FairSharing only), so that one queue
	// does not take a whole cycle's capacity before its usage catches up.
	EntryPenalty time.Duration
	// Placement chooses nodes for admitted pods; "" means
	// PlacementFragmentationAware.
	Placement Placement
	// Seed varies PlacementRandom's choices; other placements ignore it.
	Seed uint64
	// FairSharing is Kueue's Fair Sharing; nil is off (Kueue's default).
	// It needs Mode BestEffortFIFO.
	FairSharing *KueueFairSharing
}

// Cluster is the static part of the model: what exists and the rules.
// NewSnapshot keeps its own copy, which every clone of the snapshot
// shares and nobody may modify.
type Cluster struct {
	Flavors []Flavor
	Nodes   []Node
	Queues  []Queue
	Cohorts []Cohort
	Policy  Policy
}

// Workload is one request for GPUs, pending or admitted.
type Workload struct {
	ID       string
	Queue    string
	Priority int32
	GPUs     int
	// CPU (millicores) and Memory (bytes) are what all its pods ask for
	// together, split evenly over them; 0 is none.
	CPU, Memory int64
	// Flavor, if set, pins the workload to one flavor; otherwise the
	// queue's flavors are tried in order.
	Flavor   string
	Topology Level
	// Created orders workloads of equal priority (FIFO).
	Created time.Time
	// Duration is the requested run time (Kueue max execution time).
	// Zero means unknown.
	Duration time.Duration
	// Admission is nil while pending.
	Admission *Admission
}

// Admission records where and when a workload was admitted.
type Admission struct {
	Flavor string
	At     time.Time
	// Nodes has one entry per pod: the node it runs on.
	Nodes []string
}

// Reason is the category of what a pending workload waits for (see
// Snapshot.Diagnose for how it is chosen).
type Reason string

// Reasons, from the most to the least fundamental.
const (
	ReasonNone          Reason = ""              // not waiting (or nothing to say)
	ReasonQuota         Reason = "quota"         // the team's own quota or borrowing limit
	ReasonCohort        Reason = "cohort"        // the shared pool is used by other teams
	ReasonCapacity      Reason = "capacity"      // not enough free GPUs of the flavor
	ReasonFragmentation Reason = "fragmentation" // enough free GPUs, but scattered
	ReasonTopology      Reason = "topology"      // fits, but not within one host/rack/block
	ReasonPriority      Reason = "priority"      // higher-priority work goes first
	ReasonApproval      Reason = "approval"      // held until a lead approves (set by callers)
)

// Event is something that happened to a workload.
type Event struct {
	Kind EventKind
	ID   string
	At   time.Time
	// Admission is set for EventAdmitted.
	Admission *Admission
	// By names the workload whose admission caused a preemption.
	By string
	// Pods is the workload's pod count, for EventPodsReady and
	// EventPodsNotReady (0 when unknown).
	Pods int
	// Detail says briefly what is wrong, for EventPodsNotReady: for
	// example "2 of 4 pods ready; pod x: ImagePullBackOff". For
	// EventFinished it says how the workload ended when that was not by
	// running its duration (a real cluster's Job that completed or failed
	// on its own: "its Job completed", "its Job failed: …"); "" otherwise.
	Detail string
}

// EventKind enumerates Event kinds.
type EventKind string

// Event kinds.
const (
	EventAdmitted  EventKind = "admitted"
	EventPreempted EventKind = "preempted" // evicted and requeued
	EventFinished  EventKind = "finished"  // ran its duration (or was released)

	// The pods of an admitted workload all became ready (running), or
	// stopped being so, or were still not ready some time after admission.
	// Only a real cluster reports them; the allocator and the simulated
	// cluster never do, and nothing in the allocator depends on them.
	EventPodsReady    EventKind = "pods-ready"
	EventPodsNotReady EventKind = "pods-not-ready"
)
