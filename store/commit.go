package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

// Commit makes w durable in one transaction: every request, audit entry,
// usage record, zombie, named state and job run in it, and its outbox
// messages, or, on error, none of them. It returns the sequence numbers
// the outbox messages were given, in order. at stamps them.
//
// Zombies must carry IDs (NextZombieID); audit entries are given their
// sequence numbers as AppendAudit gives them; usage records replace
// earlier ones of the same (Request, Start) as AppendUsage does; a job
// run before its job's recorded one is refused as PutRun refuses it. A
// named state with nil Data removes that state (an empty, non-nil Data
// stores an empty blob): a state kept under many names (the simulated
// cluster's, one per workload) changes only the names that changed.
func (db *DB) Commit(ctx context.Context, w records.Writes, at time.Time) ([]uint64, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	if w.Empty() {
		return nil, nil
	}
	var seqs []uint64
	err := db.update(func(tx *bolt.Tx) error {
		seqs = seqs[:0]
		rb := tx.Bucket(bucketRequests)
		for _, r := range w.Requests {
			if r.ID == "" {
				return errors.New("a request has no ID")
			}
			if err := putRequest(rb, r); err != nil {
				return fmt.Errorf("request %s: %w", r.ID, err)
			}
		}
		for _, e := range w.Audit {
			if _, err := appendAudit(tx, e); err != nil {
				return fmt.Errorf("audit entry %s by %s: %w", e.Action, e.Actor, err)
			}
		}
		for _, u := range w.Usage {
			if err := appendUsage(tx, u); err != nil {
				return fmt.Errorf("usage of %s: %w", u.Request, err)
			}
		}
		for _, z := range w.Zombies {
			if err := putZombie(tx, z); err != nil {
				return fmt.Errorf("zombie %s: %w", z.ID, err)
			}
		}
		for _, s := range w.States {
			if s.Name == "" {
				return errors.New("a state has no name")
			}
			if s.Data == nil {
				if err := tx.Bucket(bucketState).Delete([]byte(s.Name)); err != nil {
					return fmt.Errorf("removing state %s: %w", s.Name, err)
				}
				continue
			}
			if err := tx.Bucket(bucketState).Put([]byte(s.Name), append([]byte{}, s.Data...)); err != nil {
				return fmt.Errorf("state %s: %w", s.Name, err)
			}
		}
		for _, run := range w.Runs {
			if err := putRun(tx, run); err != nil {
				return fmt.Errorf("run of job %s: %w", run.Job, err)
			}
		}
		for _, key := range w.Handled {
			if err := tx.Bucket(bucketInbox).Delete([]byte(key)); err != nil {
				return err
			}
			// Marked handled, for an inbox kept in another file (Runtime
			// Recover asks WasHandled): it cannot be removed from there
			// in this transaction.
			nowN, err := unixNanos(at)
			if err != nil {
				return err
			}
			expN, err := unixNanos(at.Add(handledFor))
			if err != nil {
				return err
			}
			if _, err := seenTx(tx, handledKey(key), nowN, expN); err != nil {
				return err
			}
		}
		ob := tx.Bucket(bucketOutbox)
		for _, m := range w.Outbox {
			seq, err := ob.NextSequence()
			if err != nil {
				return err
			}
			v, err := json.Marshal(records.Outbound{Seq: seq, At: at, Message: m})
			if err != nil {
				return fmt.Errorf("encoding an outbox message: %w", err)
			}
			if err := ob.Put(seqKey(seq), v); err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("committing a decision: %w", err)
	}
	return seqs, nil
}

// Outbox returns the messages not yet confirmed delivered, oldest first.
func (db *DB) Outbox(ctx context.Context) ([]records.Outbound, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	var out []records.Outbound
	err := db.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).ForEach(func(k, v []byte) error {
			m, err := decodeOutbound(k, v)
			if err != nil {
				return err
			}
			out = append(out, m)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading the outbox: %w", err)
	}
	return out, nil
}

// NextZombieID returns a new zombie ID ("z1", "z2", …) for a zombie to be
// committed later. It never returns the same ID twice; an ID whose
// zombie is never committed is skipped.
func (db *DB) NextZombieID(ctx context.Context) (string, error) {
	if err := db.ready(ctx); err != nil {
		return "", err
	}
	var n uint64
	err := db.update(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.Bucket(bucketZombies).NextSequence()
		return err
	})
	if err != nil {
		return "", fmt.Errorf("allocating a zombie ID: %w", err)
	}
	return zombieID(n), nil
}

// decodeOutbound decodes the outbox message stored at key.
func decodeOutbound(k, v []byte) (records.Outbound, error) {
	if len(k) != 8 {
		return records.Outbound{}, corrupt(bucketOutbox, fmt.Sprintf("%x", k), fmt.Errorf("key is %d bytes, want 8", len(k)))
	}
	seq := binary.BigEndian.Uint64(k)
	var m records.Outbound
	if err := json.Unmarshal(v, &m); err != nil {
		return records.Outbound{}, corrupt(bucketOutbox, strconv.FormatUint(seq, 10), err)
	}
	if m.Seq != seq {
		return records.Outbound{}, corrupt(bucketOutbox, strconv.FormatUint(seq, 10), fmt.Errorf("record has sequence %d", m.Seq))
	}
	return m, nil
}
