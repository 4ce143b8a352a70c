package commands

import "time"

// Person is someone who may talk to gpubot.
type Person struct {
	Name   string
	ChatID string // Slack user ID (U…); the console uses Name
	Email  string
	Admin  bool
}

// Team is a group of people sharing one queue (a Kueue ClusterQueue).
type Team struct {
	Name    string
	Members []string // person names (leads need not be listed again)
	Leads   []string
	Channel string // where the team's request cards are posted
}

// Priority is a named priority class (a Kueue WorkloadPriorityClass).
type Priority struct {
	Name  string
	Value int32
}

// ApprovalRules say which requests need a lead's approval before they are
// submitted. A zero value needs no approval for anything.
type ApprovalRules struct {
	// AboveGPUs: requests for more GPUs than this need approval (0: off).
	AboveGPUs int
	// Priorities that need approval (e.g. high, urgent).
	Priorities []string
	// Borrowing: requests that would take the team above its nominal
	// quota need approval.
	Borrowing bool
}

// Settings is the policy and organisation gpubot works with, from config.
type Settings struct {
	People     []Person
	Teams      []Team
	Priorities []Priority // ascending by Value
	// DefaultPriority is used when a request names none.
	DefaultPriority string
	Approval        ApprovalRules
	// MaxDuration caps a request's (extended) duration; 0: no cap.
	MaxDuration time.Duration
	// EndWarning: how long before a request's end its owner is asked to
	// extend or release. 0 means 15 minutes.
	EndWarning time.Duration
	// Templates are the workload templates a request may name; the first
	// is the default.
	Templates []string
	// DefaultChannel receives cards of teams with no channel of their own.
	DefaultChannel string
	// Location is used to show times; nil means UTC.
	Location *time.Location
}

// Seed is work already running when a simulated cluster first starts, so
// that a fresh install has a realistic queue to look at.
type Seed struct {
	Requester  string
	Spec       RequestSpec
	StartedAgo time.Duration
}
