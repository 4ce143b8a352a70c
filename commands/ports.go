package commands

import (
	"context"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// The small interfaces the service needs. Package store satisfies the
// storage ones; a simulated or real cluster satisfies Cluster.

// Cluster is where workloads run.
type Cluster interface {
	// Snapshot returns a private copy of the cluster's current state.
	Snapshot(ctx context.Context) (*allocator.Snapshot, error)
	// Apply carries out op and returns what happened as a result,
	// including admissions of other workloads that op made possible.
	// Applying the same op twice must be harmless.
	Apply(ctx context.Context, op Op) ([]allocator.Event, error)
}

// OpKind enumerates cluster operations.
type OpKind string

// Cluster operations.
const (
	OpSubmit  OpKind = "submit"  // Workload: queue it
	OpRemove  OpKind = "remove"  // ID: cancel if pending, stop if running
	OpExtend  OpKind = "extend"  // ID, Duration: new total duration
	OpPreempt OpKind = "preempt" // ID, Victims: evict victims (requeued) and admit ID
)

// Op is one change to the cluster.
type Op struct {
	Kind     OpKind
	Workload allocator.Workload
	ID       string
	Duration time.Duration
	Victims  []string
}

// Refusal is returned by a Cluster when an operation is not possible
// there (as opposed to failing): the user is told Reason and that
// nothing changed, and is not asked to try again.
type Refusal struct {
	Reason string
}

func (e *Refusal) Error() string { return e.Reason }

// ErrNotFound is the error kind of a record that does not exist: a
// RequestStore's GetRequest, a ZombieStore's GetZombie wrap it for an ID
// they do not have. Any other error from them (a store that is closed or
// damaged) is a failure, never an absence. It is records.ErrNotFound, which
// package store wraps. Compare with errors.Is.
var ErrNotFound = records.ErrNotFound

// RequestStore keeps requests. GetRequest's error wraps ErrNotFound for an
// ID it does not have. While a Service runs it is the store's only writer
// of requests: it reads them all at start and keeps them in memory for
// its lists (cache.go).
type RequestStore interface {
	GetRequest(ctx context.Context, id string) (records.Request, error)
	PutRequest(ctx context.Context, r records.Request) error
	ListRequests(ctx context.Context, keep func(records.Request) bool) ([]records.Request, error)
}

// IDSource hands out new request IDs, never the same twice.
// NextRequestID's ID is durable with the first write that stores
// anything (the request's commit); an ID that names something outside
// gpubot before that (a tracked Job's annotation) comes from
// ReserveRequestID, durable when it returns.
type IDSource interface {
	NextRequestID(ctx context.Context) (string, error)
	ReserveRequestID(ctx context.Context) (string, error)
}

// AuditLog is the append-only record of decisions and actions.
type AuditLog interface {
	AppendAudit(ctx context.Context, e records.AuditEntry) (uint64, error)
}

// Digester builds the digest and the weekly report on demand (/gpu
// digest, /gpu report). Package digest satisfies it. It is called while
// the service handles a command, so it must not call the service.
type Digester interface {
	// Digest is yesterday's digest as of now: of team, or of the whole
	// cluster for "".
	Digest(ctx context.Context, team string, now time.Time) (Reply, error)
	// Report is the weekly success report as of now.
	Report(ctx context.Context, now time.Time) (Reply, error)
}

// UsageLog keeps finished GPU usage.
type UsageLog interface {
	AppendUsage(ctx context.Context, u records.UsageRecord) error
	Usage(ctx context.Context, from, to time.Time) ([]records.UsageRecord, error)
}

// KueueView is what a real cluster's own admission controller says, where
// gpubot only predicts. It is optional (WithKueueView): the simulated
// cluster admits by the allocator, whose word is then final. The data is
// plain; no Kubernetes type crosses it.
type KueueView interface {
	// KueueReport returns Kueue's word on the pending workloads it has
	// decided on, and what gpubot found comparing its model with the
	// cluster.
	KueueReport(ctx context.Context) (KueueReport, error)
}

// KueueReport is a KueueView's answer.
type KueueReport struct {
	// Pending holds Kueue's word on pending workloads, by workload ID.
	// A workload Kueue has not decided on yet is missing.
	Pending map[string]KueueWord
	// Unmatched describes GPU nodes that no ResourceFlavor selects, one
	// sentence per group of nodes with the same labels.
	Unmatched []string
	// Approximate lists what the cluster uses that the allocator does not
	// model; estimates that it affects are approximate.
	Approximate []Unmodelled
	// Flavors describes the real nodes behind each ResourceFlavor.
	Flavors []FlavorNodes
}

// KueueWord is what Kueue says about one pending workload.
type KueueWord struct {
	// Condition names where Kueue says it: a Workload condition
	// (QuotaReserved, Evicted, Admitted), "AdmissionCheck" or "Inactive".
	Condition string
	// Reason is the condition's reason, e.g. "Pending", "Preempted".
	Reason string
	// Message is Kueue's message, verbatim.
	Message string
	// Plain says in one sentence, without its final period, what Kueue
	// says: "Kueue waits for quota: 8 more nvidia.com/gpu needed on h100".
	Plain string
	// Never is set when Kueue cannot admit the workload as it is: no
	// flavor matches, no topology domain that exists can hold it, or it
	// exceeds the quota even with borrowing. Why says why.
	Never bool
	Why   string
	// At is when Kueue said it.
	At time.Time
}

// Raw is the word as Kueue wrote it: "QuotaReserved=False (Pending): …".
func (w KueueWord) Raw() string {
	head := w.Condition
	if w.Reason != "" {
		head += " (" + w.Reason + ")"
	}
	if w.Message == "" {
		return head
	}
	return head + ": " + w.Message
}

// Unmodelled is a Kueue feature the cluster uses and the allocator does
// not model.
type Unmodelled struct {
	// Feature names it as Kueue's documentation does: "StrictFIFO",
	// "Fair Sharing", "waitForPodsReady".
	Feature string
	// Detail says where it is used and what it changes, in a sentence
	// without its final period.
	Detail string
	// Queues are the teams (queues) whose estimates it affects; empty
	// for all of them.
	Queues []string
}

// FlavorNodes is what a ResourceFlavor has in the cluster.
type FlavorNodes struct {
	Flavor string
	// Nodes and GPUs count the ready GPU nodes the flavor selects.
	Nodes, GPUs int
	// Topology is the flavor's Kueue Topology ("" for none: Kueue then
	// admits by quota alone, without looking at nodes).
	Topology string
	// Selects describes the nodes it selects: "cloud.google.com/gke-accelerator=nvidia-h100-80gb".
	Selects string
	// Elastic marks a configured spot or provisioned flavor, whose nodes
	// come and go (none is a normal state).
	Elastic bool
}

// ZombieStore keeps zombie findings: admitted work found holding GPUs
// without using them. Package store satisfies it.
type ZombieStore interface {
	// PutZombie stores z; a zombie without an ID is new and comes back
	// with the ID it was given.
	PutZombie(ctx context.Context, z records.Zombie) (records.Zombie, error)
	GetZombie(ctx context.Context, id string) (records.Zombie, error)
	// Zombies returns those whose waste overlaps [from, to): open ones
	// that began before to, and those resolved after from.
	Zombies(ctx context.Context, from, to time.Time) ([]records.Zombie, error)
}

// Utilization says how busy the GPUs of admitted workloads were: DCGM's
// GPU utilization through Prometheus (package gpumetrics) or the
// simulated cluster's.
type Utilization interface {
	// GPUUtilization returns, for those of ids it has samples for, the
	// busiest of each workload's GPUs over [now-window, now]. ids are
	// request IDs and, for work gpubot does not follow, the IDs Others
	// gives.
	GPUUtilization(ctx context.Context, ids []string, window time.Duration, now time.Time) (map[string]Utilized, error)
}

// Utilized is how busy one workload's GPUs were over a window.
type Utilized struct {
	// Peak is the busiest GPU's utilization, in percent (0–100).
	Peak float64
	// Coverage is the share of the window with samples, 0–1: a workload
	// whose GPUs reported for only part of the window is not judged idle.
	Coverage float64
	// Source says where the figures come from, for people:
	// "DCGM via Prometheus", "simulated".
	Source string
}

// Others lists admitted Kueue workloads in the teams' namespaces that
// gpubot neither submitted nor tracks, for zombies.scope: all. The
// Kubernetes bridge implements it.
type Others interface {
	Others(ctx context.Context) ([]Other, error)
}

// Other is one admitted workload gpubot does not follow.
type Other struct {
	// ID names it in utilization queries ("k8s/<namespace>/<name>").
	ID string
	// Workload is its namespace/name, and Job its Job's name if it has one.
	Workload, Job string
	Team          string
	Owner         string // person name, when a label names one; usually ""
	Flavor        string
	GPUs          int
	AdmittedAt    time.Time
	// Duration is its maximum execution time (Kueue stops it then); 0: none.
	Duration time.Duration
	// PodsNotReadySince is set when Kueue's PodsReady condition says its
	// pods are not ready (zero when they are, or when Kueue does not say).
	PodsNotReadySince time.Time
	PodsDetail        string
}
