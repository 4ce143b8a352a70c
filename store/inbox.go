package store

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

// Receive keeps a delivery from the chat platform until it is handled, so
// that one acked and then lost in a crash is handled after the restart.
// Unless key was seen within ttl (a redelivery: fresh is false, nothing is
// stored), it stores data under key in the inbox and records key as Seen
// does, in one transaction.
func (db *DB) Receive(ctx context.Context, key string, data []byte, now time.Time, ttl time.Duration) (fresh bool, err error) {
	if err := db.ready(ctx); err != nil {
		return false, err
	}
	if key == "" || ttl <= 0 {
		return false, fmt.Errorf("receiving a delivery: key %q, ttl %s", key, ttl)
	}
	nowN, err := unixNanos(now)
	if err != nil {
		return false, fmt.Errorf("receiving delivery %q: now: %w", key, err)
	}
	expN, err := unixNanos(now.Add(ttl))
	if err != nil {
		return false, fmt.Errorf("receiving delivery %q: expiry: %w", key, err)
	}
	err = db.update(func(tx *bolt.Tx) error {
		seen, err := seenTx(tx, key, nowN, expN)
		if err != nil || seen {
			return err
		}
		b := tx.Bucket(bucketInbox)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		v, err := json.Marshal(records.Inbound{Seq: seq, Key: key, At: now, Data: data})
		if err != nil {
			return fmt.Errorf("encoding: %w", err)
		}
		fresh = true
		return b.Put([]byte(key), v)
	})
	if err != nil {
		return false, fmt.Errorf("receiving delivery %q: %w", key, err)
	}
	return fresh, nil
}

// ReceiveAll is Receive for several deliveries (each's Key and Data) in
// one transaction, one fsync: what arrives while another write is under
// way is kept together (group commit). fresh[i] says whether ds[i] was
// stored; a key seen earlier in ds is a redelivery too. The same
// transaction removes the handled deliveries, as Handled does, so that
// one writer can keep the inbox and its removals never hold up a
// delivery's write. On error nothing is stored or removed.
func (db *DB) ReceiveAll(ctx context.Context, ds []records.Inbound, now time.Time, ttl time.Duration, handled ...string) (fresh []bool, err error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("receiving %d deliveries: ttl %s", len(ds), ttl)
	}
	for _, d := range ds {
		if d.Key == "" {
			return nil, fmt.Errorf("receiving %d deliveries: one has no key", len(ds))
		}
	}
	nowN, err := unixNanos(now)
	if err != nil {
		return nil, fmt.Errorf("receiving %d deliveries: now: %w", len(ds), err)
	}
	expN, err := unixNanos(now.Add(ttl))
	if err != nil {
		return nil, fmt.Errorf("receiving %d deliveries: expiry: %w", len(ds), err)
	}
	fresh = make([]bool, len(ds))
	err = db.update(func(tx *bolt.Tx) error {
		clear(fresh)
		b := tx.Bucket(bucketInbox)
		for _, key := range handled {
			if err := b.Delete([]byte(key)); err != nil {
				return err
			}
		}
		for i, d := range ds {
			seen, err := seenTx(tx, d.Key, nowN, expN)
			if err != nil {
				return err
			}
			if seen {
				continue
			}
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			v, err := json.Marshal(records.Inbound{Seq: seq, Key: d.Key, At: now, Data: d.Data})
			if err != nil {
				return fmt.Errorf("encoding %q: %w", d.Key, err)
			}
			if err := b.Put([]byte(d.Key), v); err != nil {
				return err
			}
			fresh[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("receiving %d deliveries and removing %d handled: %w", len(ds), len(handled), err)
	}
	return fresh, nil
}

// Inbox returns the deliveries received and not yet handled, in the order
// received.
func (db *DB) Inbox(ctx context.Context) ([]records.Inbound, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	var out []records.Inbound
	err := db.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketInbox).ForEach(func(k, v []byte) error {
			in, err := decodeInbound(k, v)
			out = append(out, in)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading the inbox: %w", err)
	}
	slices.SortFunc(out, func(a, b records.Inbound) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Handled removes deliveries from the inbox, in one transaction. Commit
// does it too, for the keys in Writes.Handled, with the decision the
// delivery led to.
func (db *DB) Handled(ctx context.Context, keys ...string) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	err := db.update(func(tx *bolt.Tx) error {
		for _, key := range keys {
			if err := tx.Bucket(bucketInbox).Delete([]byte(key)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("removing %d deliveries from the inbox: %w", len(keys), err)
	}
	return nil
}

func decodeInbound(k, v []byte) (records.Inbound, error) {
	var in records.Inbound
	if err := json.Unmarshal(v, &in); err != nil {
		return in, corrupt(bucketInbox, strconv.Quote(string(k)), err)
	}
	if in.Key != string(k) {
		return in, corrupt(bucketInbox, strconv.Quote(string(k)), errors.New("record has another key"))
	}
	return in, nil
}

// handledFor is how long a delivery stays marked handled.
const handledFor = 24 * time.Hour

func handledKey(key string) string { return "handled:" + key }

// WasHandled reports whether a commit said it handled delivery key (in
// the last day): a delivery an inbox in another file still holds after
// a crash that came between the two.
func (db *DB) WasHandled(ctx context.Context, key string, now time.Time) (bool, error) {
	if err := db.ready(ctx); err != nil {
		return false, err
	}
	nowN, err := unixNanos(now)
	if err != nil {
		return false, err
	}
	handled := false
	err = db.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketDedupe).Get([]byte(handledKey(key))); len(v) == 8 {
			handled = binary.BigEndian.Uint64(v) > nowN
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("looking up delivery %q: %w", key, err)
	}
	return handled, nil
}
