package records

import "time"

// Writes are changes that must land together: what one decision changes,
// with the messages it means to send. Package store makes them durable in
// one transaction (store.DB.Commit); package commands and the digest
// scheduler build them.
type Writes struct {
	Requests []Request
	Audit    []AuditEntry
	Usage    []UsageRecord
	// Zombies carry their IDs (store.DB.NextZombieID hands them out).
	Zombies []Zombie
	States  []NamedState
	Runs    []JobRun
	// Outbox holds messages to send, in order, each encoded by its
	// writer; the store gives each its sequence number.
	Outbox [][]byte
	// Handled lists inbox deliveries (their keys) this decision handled.
	Handled []string
}

// Empty reports whether w changes nothing.
func (w Writes) Empty() bool {
	return len(w.Requests) == 0 && len(w.Audit) == 0 && len(w.Usage) == 0 && len(w.Zombies) == 0 &&
		len(w.States) == 0 && len(w.Runs) == 0 && len(w.Outbox) == 0 && len(w.Handled) == 0
}

// NamedState is a named blob of state, such as the simulated cluster's.
type NamedState struct {
	Name string
	Data []byte
}

// Outbound is one message gpubot means to send, kept in the outbox from
// the transaction of the decision that caused it until the chat platform
// confirmed it.
type Outbound struct {
	// Seq orders the outbox: messages go out in this order, and a
	// message is removed by it once delivered.
	Seq uint64 `json:"seq"`
	// At is when it was queued.
	At time.Time `json:"at"`
	// Message is the message, encoded by its writer (package commands
	// encodes an Output).
	Message []byte `json:"message"`
}

// Inbound is one delivery from the chat platform (a command, a press),
// kept from just before it is acked until it is handled.
type Inbound struct {
	Seq  uint64    `json:"seq"` // the order received
	Key  string    `json:"key"` // its delivery key (deduplication)
	At   time.Time `json:"at"`
	Data []byte    `json:"data"` // the input, encoded by the receiver
}
