package commands

import "time"

// CapacityKind is how a flavor's GPUs are bought: reserved (the default,
// paid for whether used or not), spot (cheap, may be reclaimed at any
// time) or provisioned on demand (a Kueue ProvisioningRequest admission
// check, e.g. GKE's Dynamic Workload Scheduler: nodes are created for the
// request, after a provisioning delay, for at most a maximum run time).
type CapacityKind string

// Capacity kinds.
const (
	CapacityReserved    CapacityKind = "reserved"
	CapacitySpot        CapacityKind = "spot"
	CapacityProvisioned CapacityKind = "provisioned"
)

// FlavorTerms are what using one flavor costs and allows. Reserved
// flavors may have a price too (shown, never budgeted).
type FlavorTerms struct {
	Flavor   string
	Capacity CapacityKind
	// PricePerGPUHour is the money one GPU-hour costs; 0: not known (the
	// cost is then shown in GPU-hours only).
	PricePerGPUHour float64
	// MaxRunTime caps a run on the flavor (DWS caps provisioned runs at
	// 7 days); 0: no cap.
	MaxRunTime time.Duration
	// AdmissionCheck is, for a provisioned flavor, the Kueue
	// AdmissionCheck that provisions its nodes, and
	// ProvisioningRequestConfig the ProvisioningRequestConfig it uses.
	AdmissionCheck            string
	ProvisioningRequestConfig string
	// ProvisioningPrior is what a provisioned flavor's provisioning is
	// assumed to take before gpubot has seen the cluster do it.
	ProvisioningPrior time.Duration
	// Retry is a provisioned flavor's ProvisioningRequestConfig retry
	// strategy (kueue-setup writes it; the simulated cluster follows it).
	Retry ProvisioningRetry
}

// ProvisioningRetry is Kueue's retryStrategy of a
// ProvisioningRequestConfig: a failed attempt is retried at most Limit
// times, after Backoff, doubling each time, at most MaxBackoff.
type ProvisioningRetry struct {
	Limit               int
	Backoff, MaxBackoff time.Duration
}

// DefaultProvisioningRetry is Kueue's default retry strategy
// (backoffLimitCount 3, backoffBaseSeconds 60, backoffMaxSeconds 1800).
var DefaultProvisioningRetry = ProvisioningRetry{Limit: 3, Backoff: time.Minute, MaxBackoff: 30 * time.Minute}

// After is how long Kueue waits after failed attempt n (from 1) before
// it tries again.
func (r ProvisioningRetry) After(n int) time.Duration {
	d := r.Backoff
	for i := 1; i < n && d < r.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.MaxBackoff)
}

// Elastic reports whether the flavor is bought on demand.
func (t FlavorTerms) Elastic() bool {
	return t.Capacity == CapacitySpot || t.Capacity == CapacityProvisioned
}

// Budget is a team's weekly allowance of elastic capacity: GPU-hours or
// money (one of them; both zero: no budget, unlimited).
type Budget struct {
	GPUHours float64
	Money    float64
}

// ElasticSettings say when gpubot offers elastic capacity and what it may
// spend. The zero value offers nothing (no elastic flavor).
type ElasticSettings struct {
	// Flavors are the terms of every flavor that has any (elastic ones
	// always), in configuration order.
	Flavors []FlavorTerms
	// OfferAfter: a request whose reserved-capacity estimate starts later
	// than this is offered the elastic flavors. 0 means 1 hour.
	OfferAfter time.Duration
	// ApprovalAboveGPUs: switching a request of more GPUs than this to an
	// elastic flavor needs a lead's approval (0: never).
	ApprovalAboveGPUs int
	// Currency is put before money amounts ("$").
	Currency string
	// Budgets are the teams' weekly budgets, by team; a team without one
	// is not limited.
	Budgets map[string]Budget
	// WeekStart is the day budgets' weeks start on (default Monday), in
	// the settings' Location.
	WeekStart time.Weekday
}

// DefaultOfferAfter is ElasticSettings.OfferAfter's default.
const DefaultOfferAfter = time.Hour

// DefaultProvisioningPrior is a provisioned flavor's ProvisioningPrior
// when the configuration gives none.
const DefaultProvisioningPrior = 20 * time.Minute

// terms returns the terms of flavor f (reserved without a price if the
// configuration says nothing about it).
func (e ElasticSettings) terms(f string) FlavorTerms {
	for _, t := range e.Flavors {
		if t.Flavor == f {
			return t
		}
	}
	return FlavorTerms{Flavor: f, Capacity: CapacityReserved}
}
