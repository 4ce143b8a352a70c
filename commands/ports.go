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
