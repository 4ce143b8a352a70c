package records

import "time"

// Elastic is what happened to a request on elastic capacity (a spot or
// provisioned flavor): the switch that put it there and, for a
// provisioned flavor, Kueue's provisioning admission check.
type Elastic struct {
	// From is the flavor it asked for before the switch ("" for any).
	From string `json:"from,omitempty"`
	// At and By: when and by whom it was switched; "" By for a request
	// that asked for the elastic flavor itself.
	At time.Time `json:"at,omitempty"`
	By string    `json:"by,omitempty"`
	// Reserved is the start estimate on reserved capacity when it was
	// switched, to tell how much waiting the switch saved.
	Reserved *Estimate `json:"reserved,omitempty"`
	// PendingSwitch is the elastic flavor a switch waits for a lead's
	// approval to go to; the request stays queued on reserved capacity
	// meanwhile.
	PendingSwitch string `json:"pendingSwitch,omitempty"`
	// Check is the provisioning admission check's state as last told:
	// Pending, Ready, Retry or Rejected; "" before any.
	Check string `json:"check,omitempty"`
	// CheckMessage is what the check said with it.
	CheckMessage string `json:"checkMessage,omitempty"`
	// Attempt is the provisioning attempt (1 for the first), and
	// FailedTold the last failed attempt told in the thread.
	Attempt    int `json:"attempt,omitempty"`
	FailedTold int `json:"failedTold,omitempty"`
	// CheckSince is when the check entered its current state; Asked is
	// when the current provisioning attempt was asked for (the check
	// pending), and Provisioned when it last became Ready.
	CheckSince  time.Time `json:"checkSince,omitempty"`
	Asked       time.Time `json:"asked,omitempty"`
	Provisioned time.Time `json:"provisioned,omitempty"`
	// Reclaims counts the times spot nodes were taken from under it.
	Reclaims int `json:"reclaims,omitempty"`
}

// ProvisioningTime is how long the last provisioning took, from asking to
// ready; false if it has not been provisioned.
func (e *Elastic) ProvisioningTime() (time.Duration, bool) {
	if e == nil || e.Asked.IsZero() || e.Provisioned.Before(e.Asked) {
		return 0, false
	}
	return e.Provisioned.Sub(e.Asked), true
}
