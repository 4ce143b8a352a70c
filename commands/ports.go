package commands

import (
	"context"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// The small interfaces the service needs. Package store satisfies the
// storage ones; a simulated or real cluster satisfies Cluster.

// Clock tells the time. Tests pass a fake one.
type Clock interface {
	Now() time.Time
}

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

// RequestStore keeps requests.
type RequestStore interface {
	GetRequest(ctx context.Context, id string) (records.Request, error)
	PutRequest(ctx context.Context, r records.Request) error
	ListRequests(ctx context.Context, keep func(records.Request) bool) ([]records.Request, error)
}

// IDSource hands out new request IDs, never the same twice.
type IDSource interface {
	NextRequestID(ctx context.Context) (string, error)
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
