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
	// CPUPerGPU (millicores) and MemoryPerGPU (bytes) are what a request
	// asks for per GPU besides the GPUs (Kueue counts them against CPU
	// and memory quotas); 0: nothing.
	CPUPerGPU, MemoryPerGPU int64
	// DefaultChannel receives cards of teams with no channel of their own.
	DefaultChannel string
	// Location is used to show times; nil means UTC.
	Location *time.Location
	// Zombies is the policy of the zombie sweep (see Service.Sweep).
	Zombies ZombiePolicy
	// Elastic says when spot and provisioned capacity is offered and what
	// it may cost (see ElasticSettings).
	Elastic ElasticSettings
}

// ZombiePolicy says what counts as a zombie (admitted work holding GPUs
// without using them) and what gpubot does about one. Zero fields take
// the defaults given.
type ZombiePolicy struct {
	// PodsReadyTimeout: pods not all ready for this long make a zombie.
	// Default 10 minutes.
	PodsReadyTimeout time.Duration
	// IdleThreshold (percent GPU utilization) and IdleWindow: a workload
	// whose busiest GPU stayed below the threshold for the whole window is
	// idle. Defaults 5 and 30 minutes. Only with a Utilization source.
	IdleThreshold float64
	IdleWindow    time.Duration
	// LeadsGrace: how long after the owner is asked the team's leads are
	// told. Default 1 hour.
	LeadsGrace time.Duration
	// ReleaseGrace: with Release, how long after the leads are told gpubot
	// releases the work. Default 1 hour.
	ReleaseGrace time.Duration
	// KeepFor: after "Still using it", the same work is not asked about
	// the same kind of waste for this long. Default 24 hours.
	KeepFor time.Duration
	// Release (zombies.action: release) lets gpubot release a zombie
	// nobody answered for; otherwise it only tells people.
	Release bool
	// All (zombies.scope: all) sweeps every admitted Kueue workload in the
	// teams' namespaces, not only the work gpubot submitted or tracks.
	All bool
}

// withDefaults fills in the zero fields.
func (p ZombiePolicy) withDefaults() ZombiePolicy {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&p.PodsReadyTimeout, 10*time.Minute)
	def(&p.IdleWindow, 30*time.Minute)
	def(&p.LeadsGrace, time.Hour)
	def(&p.ReleaseGrace, time.Hour)
	def(&p.KeepFor, 24*time.Hour)
	if p.IdleThreshold <= 0 {
		p.IdleThreshold = 5
	}
	return p
}

// Seed is work already running when a simulated cluster first starts, so
// that a fresh install has a realistic queue to look at.
type Seed struct {
	Requester  string
	Spec       RequestSpec
	StartedAgo time.Duration
}
