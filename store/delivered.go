package store

import (
	"context"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// deliveredQueue is the group commit of the outbox's removals: the
// removals asked for while one write of them is under way wait for it to
// end and then go in one transaction together (one fsync), written by
// whichever of them came first. A burst of deliveries (a refresh that
// posts thousands of moved estimates on as many lanes as there are
// channels and people) then costs a few writes, not one each, and holds
// the store's single writer for the commands' commits correspondingly
// less.
type deliveredQueue struct {
	mu      sync.Mutex
	seqs    []uint64
	waiting []chan error
	writing bool // a writer has taken the queue and writes it, or will
	// Tests: told after each removal is queued, and of each write's
	// removals once a writer has taken them.
	queued func()
	took   func(n int)
}

// Delivered removes outbox message seq: the chat platform confirmed it
// (or it was given up). Removing one that is gone is harmless. It returns
// once the removal is durable, as before; removals that arrive together
// share one transaction (deliveredQueue). On an error none of the
// removals of that transaction are made, and each of their callers gets
// the error.
func (db *DB) Delivered(ctx context.Context, seq uint64) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	q := &db.delivered
	done := make(chan error, 1)
	q.mu.Lock()
	q.seqs = append(q.seqs, seq)
	q.waiting = append(q.waiting, done)
	lead := !q.writing
	q.writing = true
	queued := q.queued
	q.mu.Unlock()
	if queued != nil {
		queued()
	}
	if lead {
		db.writeDelivered()
	}
	return <-done
}

// writeDelivered writes the queued removals in one transaction and tells
// their callers; if more were queued meanwhile, a new writer takes them,
// so that the caller who wrote goes on at once.
func (db *DB) writeDelivered() {
	q := &db.delivered
	q.mu.Lock()
	seqs, waiting := q.seqs, q.waiting
	q.seqs, q.waiting = nil, nil
	took := q.took
	q.mu.Unlock()
	if took != nil {
		took(len(seqs))
	}
	err := db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOutbox)
		for _, seq := range seqs {
			if err := b.Delete(seqKey(seq)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if len(seqs) == 1 {
			err = fmt.Errorf("removing outbox message %d: %w", seqs[0], err)
		} else {
			err = fmt.Errorf("removing outbox message %d and %d others with it: %w", seqs[0], len(seqs)-1, err)
		}
	}
	for _, w := range waiting {
		w <- err
	}
	q.mu.Lock()
	more := len(q.seqs) > 0
	q.writing = more
	q.mu.Unlock()
	if more {
		go db.writeDelivered()
	}
}
