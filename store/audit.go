package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

// AppendAudit adds e to the end of the audit log and returns the sequence
// number it was given: 1 for the first entry, then 2, 3, … with no gaps.
// Any Seq already in e is ignored. Entries are never changed or removed.
func (db *DB) AppendAudit(ctx context.Context, e records.AuditEntry) (uint64, error) {
	if err := db.ready(ctx); err != nil {
		return 0, err
	}
	err := db.update(func(tx *bolt.Tx) error {
		var err error
		e.Seq, err = appendAudit(tx, e)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("appending audit entry %s by %s: %w", e.Action, e.Actor, err)
	}
	return e.Seq, nil
}

// appendAudit appends e in tx and returns its sequence number.
func appendAudit(tx *bolt.Tx, e records.AuditEntry) (uint64, error) {
	b := tx.Bucket(bucketAudit)
	seq, err := b.NextSequence()
	if err != nil {
		return 0, err
	}
	e.Seq = seq
	v, err := json.Marshal(e)
	if err != nil {
		return 0, fmt.Errorf("encoding: %w", err)
	}
	return seq, b.Put(auditKey(seq), v)
}

// AuditQuery selects audit entries. Zero fields do not filter.
type AuditQuery struct {
	// Since and Until bound the entry's At: Since <= At < Until.
	Since, Until time.Time
	// Target and Actor, when set, must equal the entry's.
	Target, Actor string
	// Limit, when positive, keeps only the newest Limit matching entries.
	Limit int
}

// match reports whether e passes every filter of q.
func (q AuditQuery) match(e records.AuditEntry) bool {
	return (q.Since.IsZero() || !e.At.Before(q.Since)) &&
		(q.Until.IsZero() || e.At.Before(q.Until)) &&
		(q.Target == "" || e.Target == q.Target) &&
		(q.Actor == "" || e.Actor == q.Actor)
}

// Audit returns the audit entries matching q in sequence order. With a
// positive q.Limit it returns the newest q.Limit of them, still oldest
// first. The time filters compare At, which the caller sets, so an
// out-of-order clock shows in the result as it was recorded.
func (db *DB) Audit(ctx context.Context, q AuditQuery) ([]records.AuditEntry, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	var out []records.AuditEntry
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		first, next := c.First, c.Next
		if q.Limit > 0 {
			// Walk backwards from the newest and stop at Limit.
			first, next = c.Last, c.Prev
		}
		for k, v := first(); k != nil; k, v = next() {
			e, err := decodeAudit(k, v)
			if err != nil {
				return err
			}
			if !q.match(e) {
				continue
			}
			out = append(out, e)
			if q.Limit > 0 && len(out) == q.Limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading audit log: %w", err)
	}
	if q.Limit > 0 {
		slices.Reverse(out)
	}
	return out, nil
}

// auditKey is the key of the entry with sequence number seq.
func auditKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

// decodeAudit decodes the audit entry stored at key.
func decodeAudit(k, v []byte) (records.AuditEntry, error) {
	if len(k) != 8 {
		return records.AuditEntry{}, corrupt(bucketAudit, fmt.Sprintf("%x", k), fmt.Errorf("key is %d bytes, want 8", len(k)))
	}
	seq := binary.BigEndian.Uint64(k)
	var e records.AuditEntry
	if err := json.Unmarshal(v, &e); err != nil {
		return records.AuditEntry{}, corrupt(bucketAudit, strconv.FormatUint(seq, 10), err)
	}
	if e.Seq != seq {
		return records.AuditEntry{}, corrupt(bucketAudit, strconv.FormatUint(seq, 10), fmt.Errorf("record has seq %d", e.Seq))
	}
	return e, nil
}
