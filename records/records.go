// Package records defines what gpubot keeps durably: requests and their
// life, the audit log, usage history and chat thread references. It holds
// plain data types and their small invariants only; package store persists
// them and package commands changes them.
package records

import (
	"errors"
	"time"
)

// ErrNotFound is the error kind of a record that does not exist. Package
// store wraps it when a getter finds nothing; the ports that read records
// (commands.RequestStore, simcluster.StateStore, digest.RunLog) promise it,
// and their users tell it from other failures (a closed or damaged store)
// with errors.Is.
var ErrNotFound = errors.New("not found")

// State is where a request is in its life.
type State string

// Request states. A request moves
//
//	awaiting-approval → queued → running → finished
//	                 ↘ denied   ↘ cancelled
//
// and from running back to queued when preempted. finished covers
// completion, release and the end of the requested time.
const (
	StateAwaitingApproval State = "awaiting-approval"
	StateQueued           State = "queued"
	StateRunning          State = "running"
	StateFinished         State = "finished"
	StateCancelled        State = "cancelled"
	StateDenied           State = "denied"
	// StateLost marks a request whose workload disappeared from the
	// cluster without gpubot seeing it finish.
	StateLost State = "lost"
)

// Final reports whether no further change can happen to a request in s.
func (s State) Final() bool {
	switch s {
	case StateFinished, StateCancelled, StateDenied, StateLost:
		return true
	}
	return false
}

// Request is one /gpu request and everything gpubot knows about it.
type Request struct {
	ID        string        `json:"id"`
	Requester string        `json:"requester"` // person name
	Team      string        `json:"team"`
	GPUs      int           `json:"gpus"`
	Flavor    string        `json:"flavor,omitempty"` // as asked; "" = any of the team's
	Priority  string        `json:"priority"`
	Duration  time.Duration `json:"duration"` // requested, including extensions
	Topology  string        `json:"topology,omitempty"`
	Template  string        `json:"template,omitempty"`
	Reason    string        `json:"reason,omitempty"`
	Channel   string        `json:"channel,omitempty"` // where the card lives
	Origin    string        `json:"origin,omitempty"`  // "chat" or "seed"

	State     State     `json:"state"`
	CreatedAt time.Time `json:"createdAt"`
	// SubmittedAt is when the workload went to the cluster (after approval).
	SubmittedAt time.Time `json:"submittedAt,omitempty"`
	// QueuedAt is when it last entered the queue: at submission, or when
	// it was preempted and requeued.
	QueuedAt   time.Time `json:"queuedAt,omitempty"`
	AdmittedAt time.Time `json:"admittedAt,omitempty"`
	EndedAt    time.Time `json:"endedAt,omitempty"`
	// Placement: flavor and nodes of the current (or last) admission.
	AdmittedFlavor string   `json:"admittedFlavor,omitempty"`
	Nodes          []string `json:"nodes,omitempty"`
	EndReason      string   `json:"endReason,omitempty"` // completed, released, time limit, cancelled…

	ApprovedBy string `json:"approvedBy,omitempty"`
	DeniedBy   string `json:"deniedBy,omitempty"`
	DenyReason string `json:"denyReason,omitempty"`
	// Approval lists why approval was needed.
	Approval []string `json:"approval,omitempty"`

	Preemptions int `json:"preemptions,omitempty"`
	// Estimate is the last start estimate posted; First is the first one,
	// kept to score estimates against what happened.
	Estimate      *Estimate `json:"estimate,omitempty"`
	FirstEstimate *Estimate `json:"firstEstimate,omitempty"`
	EndWarned     bool      `json:"endWarned,omitempty"`
	// KueueSaid is what Kueue said about the queued request when it was
	// last shown ("never: <why>" when Kueue cannot admit it as it is), so
	// that a change is posted once.
	KueueSaid string `json:"kueueSaid,omitempty"`

	// What the cluster last said about the pods of the current admission
	// (cleared at each admission). PodsReadyAt is when they were last all
	// ready. PodsNotReadySince is set while they are not: the admission if
	// they never were ready, else when they stopped being; PodsDetail says
	// what is wrong.
	PodsReadyAt       time.Time `json:"podsReadyAt,omitempty"`
	PodsNotReadySince time.Time `json:"podsNotReadySince,omitempty"`
	PodsDetail        string    `json:"podsDetail,omitempty"`
	// Waits lists the request's finished waits for GPUs: from its creation
	// to its first admission, then from each requeue to the admission
	// after it. A wait still open is not listed.
	Waits []Wait `json:"waits,omitempty"`
	// Elastic is set once the request is switched to (or asks for) a spot
	// or provisioned flavor.
	Elastic *Elastic `json:"elastic,omitempty"`
}

// Estimate is a start-time estimate as it was posted.
type Estimate struct {
	At       time.Time `json:"at"` // when it was made
	Earliest time.Time `json:"earliest"`
	Latest   time.Time `json:"latest"`
	Known    bool      `json:"known"`
	Position int       `json:"position"`
	Reason   string    `json:"reason"`
}

// AuditEntry is one line of the append-only audit log.
type AuditEntry struct {
	Seq     uint64    `json:"seq"` // assigned by the store
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`  // person name, chat ID if unknown, or "gpubot"
	Action  string    `json:"action"` // verb or button, e.g. "request", "approve"
	Target  string    `json:"target,omitempty"`
	Outcome string    `json:"outcome"` // "ok", "refused", "invalid", "error"
	Detail  string    `json:"detail,omitempty"`
	// Via is "button" when the action came from a button press; "" for a
	// typed command or gpubot's own doing.
	Via string `json:"via,omitempty"`
}

// UsageRecord is a finished stretch of GPU use by one request.
type UsageRecord struct {
	Request   string    `json:"request"`
	Team      string    `json:"team"`
	Requester string    `json:"requester"`
	Flavor    string    `json:"flavor"`
	GPUs      int       `json:"gpus"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
}

// GPUHours is the record's GPU-hours within [from, to).
func (u UsageRecord) GPUHours(from, to time.Time) float64 {
	s, e := u.Start, u.End
	if s.Before(from) {
		s = from
	}
	if e.After(to) {
		e = to
	}
	if !e.After(s) {
		return 0
	}
	return float64(u.GPUs) * e.Sub(s).Hours()
}

// Thread is where a request's card and thread live in a chat.
type Thread struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// ZombieKind says how admitted work was found holding GPUs without using
// them.
type ZombieKind string

// Zombie kinds.
const (
	// ZombiePodsNotReady: its pods were not all ready past the pods-ready
	// timeout after admission.
	ZombiePodsNotReady ZombieKind = "pods-not-ready"
	// ZombiePastEnd: still admitted after its requested end.
	ZombiePastEnd ZombieKind = "past-end"
	// ZombieIdle: its GPUs' utilization stayed below the threshold for
	// the configured window (DCGM metrics through Prometheus, or the
	// simulated cluster's).
	ZombieIdle ZombieKind = "idle"
)

// ZombieOutcome is what became of a zombie.
type ZombieOutcome string

// Zombie outcomes. The empty outcome means it is still open.
const (
	ZombieOpen ZombieOutcome = ""
	// ZombieKept: the owner said they are still using it.
	ZombieKept ZombieOutcome = "kept"
	// ZombieRecovered: it started using its GPUs again (pods ready, GPUs
	// busy) before anyone acted.
	ZombieRecovered ZombieOutcome = "recovered"
	// ZombieReleasedByOwner: the owner released it after the prompt.
	ZombieReleasedByOwner ZombieOutcome = "released-by-owner"
	// ZombieReleasedManually: a lead or admin released it: a manual
	// intervention in the success report.
	ZombieReleasedManually ZombieOutcome = "released-manually"
	// ZombieAutoReleased: gpubot released it (zombies.action: release).
	ZombieAutoReleased ZombieOutcome = "auto-released"
	// ZombieEvicted: Kueue ended it (maximum execution time, eviction).
	ZombieEvicted ZombieOutcome = "evicted"
	// ZombieFinished: it finished on its own.
	ZombieFinished ZombieOutcome = "finished"
)

// Zombie is one finding of admitted work that held GPUs without using
// them, and what became of it. The digest counts them and the success
// report sums their GPU-hours.
type Zombie struct {
	ID string `json:"id"` // assigned by the store: z1, z2, …
	// Request is gpubot's request ID; "" for work gpubot did not submit.
	Request string `json:"request,omitempty"`
	// Workload is namespace/name of the Kueue workload (or the simulated
	// workload's ID).
	Workload string     `json:"workload,omitempty"`
	Team     string     `json:"team"`
	Owner    string     `json:"owner,omitempty"` // person name; "" when nobody is known
	Flavor   string     `json:"flavor,omitempty"`
	GPUs     int        `json:"gpus"`
	Kind     ZombieKind `json:"kind"`
	Detail   string     `json:"detail,omitempty"`
	// Since is when the waste began (admission for pods never ready, the
	// requested end, the start of the idle window); FoundAt when gpubot
	// noticed.
	Since   time.Time `json:"since"`
	FoundAt time.Time `json:"foundAt"`
	// OwnerToldAt and LeadsToldAt are when the owner was prompted and the
	// team's leads were told (zero: not yet).
	OwnerToldAt time.Time `json:"ownerToldAt,omitempty"`
	LeadsToldAt time.Time `json:"leadsToldAt,omitempty"`
	// Outcome, ResolvedAt and ResolvedBy (person name or "gpubot") say
	// what became of it.
	Outcome    ZombieOutcome `json:"outcome,omitempty"`
	ResolvedAt time.Time     `json:"resolvedAt,omitempty"`
	ResolvedBy string        `json:"resolvedBy,omitempty"`
}

// GPUHours is the zombie's wasted GPU-hours within [from, to): from Since
// to ResolvedAt (or to, while it is open).
func (z Zombie) GPUHours(from, to time.Time) float64 {
	end := z.ResolvedAt
	if z.Outcome == ZombieOpen || end.IsZero() {
		end = to
	}
	return UsageRecord{GPUs: z.GPUs, Start: z.Since, End: end}.GPUHours(from, to)
}
