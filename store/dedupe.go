package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// pruneBatch is how many expired dedupe keys one call to Seen removes at
// most. Each call adds at most one key, so the bucket shrinks back to the
// live keys as long as calls keep coming.
const pruneBatch = 64

// Seen records key as seen until now+ttl and reports whether it was
// already recorded and unexpired at now (a key expires at its expiry
// time). The check and the record happen in one transaction, so of two
// concurrent calls with the same key exactly one reports false.
//
// A repeated key gets its expiry moved to now+ttl. Each call also removes
// up to 64 keys that expired at or before now, oldest first.
func (db *DB) Seen(ctx context.Context, key string, now time.Time, ttl time.Duration) (bool, error) {
	if err := db.ready(ctx); err != nil {
		return false, err
	}
	if key == "" {
		return false, errors.New("recording dedupe key: empty key")
	}
	if ttl <= 0 {
		return false, fmt.Errorf("recording dedupe key %q: ttl %s is not positive", key, ttl)
	}
	nowN, err := unixNanos(now)
	if err != nil {
		return false, fmt.Errorf("recording dedupe key %q: now: %w", key, err)
	}
	expN, err := unixNanos(now.Add(ttl))
	if err != nil {
		return false, fmt.Errorf("recording dedupe key %q: expiry: %w", key, err)
	}

	var seen bool
	err = db.update(func(tx *bolt.Tx) error {
		var err error
		seen, err = seenTx(tx, key, nowN, expN)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("recording dedupe key %q: %w", key, err)
	}
	return seen, nil
}

// seenTx is Seen inside tx, with now and the expiry in unix nanoseconds.
func seenTx(tx *bolt.Tx, key string, nowN, expN uint64) (bool, error) {
	keys, byExpiry := tx.Bucket(bucketDedupe), tx.Bucket(bucketDedupeExpiry)
	if err := pruneDedupe(keys, byExpiry, nowN, pruneBatch); err != nil {
		return false, err
	}
	seen := false
	k := []byte(key)
	if old := keys.Get(k); old != nil {
		if len(old) != 8 {
			return false, corrupt(bucketDedupe, strconv.Quote(key), fmt.Errorf("value is %d bytes, want 8", len(old)))
		}
		oldN := binary.BigEndian.Uint64(old)
		seen = oldN > nowN
		if err := byExpiry.Delete(expiryKey(oldN, k)); err != nil {
			return false, err
		}
	}
	if err := keys.Put(k, binary.BigEndian.AppendUint64(nil, expN)); err != nil {
		return false, err
	}
	return seen, byExpiry.Put(expiryKey(expN, k), nil)
}

// pruneDedupe removes up to limit keys that expired at or before nowN.
func pruneDedupe(keys, byExpiry *bolt.Bucket, nowN uint64, limit int) error {
	var expired [][]byte
	c := byExpiry.Cursor()
	for k, _ := c.First(); k != nil && len(expired) < limit; k, _ = c.Next() {
		if len(k) <= 8 {
			return corrupt(bucketDedupeExpiry, fmt.Sprintf("%x", k), fmt.Errorf("key is %d bytes, want more than 8", len(k)))
		}
		if binary.BigEndian.Uint64(k[:8]) > nowN {
			break
		}
		expired = append(expired, bytes.Clone(k))
	}
	// Delete after the walk: deleting under a bbolt cursor can skip keys.
	for _, k := range expired {
		if err := byExpiry.Delete(k); err != nil {
			return err
		}
		if err := keys.Delete(k[8:]); err != nil {
			return err
		}
	}
	return nil
}

// expiryKey is the key in bucket dedupe-expiry of key expiring at expN.
func expiryKey(expN uint64, key []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, expN), key...)
}
