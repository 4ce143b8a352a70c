package commands

import "time"

// Verb is the first word of a /gpu command.
type Verb string

// The verbs of DESIGN.md's grammar.
const (
	VerbRequest  Verb = "request"
	VerbTrack    Verb = "track"
	VerbStatus   Verb = "status"
	VerbQueue    Verb = "queue"
	VerbCapacity Verb = "capacity"
	VerbUsage    Verb = "usage"
	VerbWhatIf   Verb = "whatif"
	VerbCancel   Verb = "cancel"
	VerbRelease  Verb = "release"
	VerbExtend   Verb = "extend"
	VerbApprove  Verb = "approve"
	VerbDeny     Verb = "deny"
	VerbPreempt  Verb = "preempt"
	VerbKeep     Verb = "keep"
	VerbSwitch   Verb = "switch"
	VerbDigest   Verb = "digest"
	VerbReport   Verb = "report"
	VerbHelp     Verb = "help"
)

// Verbs lists every verb in the order help shows them.
var Verbs = []Verb{
	VerbRequest, VerbStatus, VerbQueue, VerbCapacity, VerbUsage, VerbWhatIf,
	VerbCancel, VerbRelease, VerbExtend, VerbApprove, VerbDeny, VerbPreempt,
	VerbSwitch, VerbKeep, VerbTrack, VerbDigest, VerbReport, VerbHelp,
}

// Command is one parsed /gpu command. Which fields are set depends on Verb:
//
//	request, whatif <spec>      Spec
//	whatif +N/-N x flavor       Delta
//	status [id]                 ID (optional)
//	cancel, release, approve,
//	preempt <id>                ID
//	keep <id>                   ID (a request's, or a zombie check's: z3)
//	extend <id> <duration>      ID, Duration
//	switch <id> <flavor>        ID, Flavor
//	deny <id> [reason]          ID, Reason (optional)
//	queue [team|flavor]         Team or Flavor (at most one)
//	usage [team] [N d]          Team (optional), Days (0 = default)
//	digest [team]               Team (optional: "" is the cluster-wide digest)
//	report                      nothing
//	track <namespace>/<job>     Namespace, Job
//	help [verb]                 Topic (optional)
type Command struct {
	Verb      Verb
	Spec      *RequestSpec
	Delta     *CapacityDelta
	ID        string
	Duration  time.Duration
	Reason    string
	Team      string
	Flavor    string
	Days      int
	Namespace string
	Job       string
	Topic     Verb
}

// RequestSpec is what a request (or a what-if about one) asks for.
// Empty strings mean "not given": callers fill in defaults.
type RequestSpec struct {
	GPUs     int
	Flavor   string
	Duration time.Duration
	Team     string
	Priority string
	Topology string // "", "host", "rack" or "block"
	Template string
	Reason   string
}

// CapacityDelta is an admin's what-if about adding (GPUs > 0) or removing
// (GPUs < 0) capacity of one flavor.
type CapacityDelta struct {
	GPUs   int
	Flavor string
}

// Vocabulary is the set of words the parser accepts for the open-ended
// fields, so that it can reject unknown ones and suggest the closest.
// Words are compared case-insensitively. An empty list accepts anything.
type Vocabulary struct {
	Flavors    []string
	Teams      []string
	Priorities []string
	Templates  []string
}
