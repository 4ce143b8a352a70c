package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

// AppendUsage records a finished stretch of GPU use. A record is
// identified by its Request and Start: appending the same (Request, Start)
// again replaces the earlier record instead of counting it twice, so a
// corrected End is taken as the truth.
//
// u must name its request, and its Start and End must lie between 1970
// and 2262 (what unix nanoseconds can hold), with End not before Start.
func (db *DB) AppendUsage(ctx context.Context, u records.UsageRecord) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	if _, _, _, err := usageKeys(u); err != nil {
		return fmt.Errorf("recording usage of %s: %w", u.Request, err)
	}
	if err := db.update(func(tx *bolt.Tx) error { return appendUsage(tx, u) }); err != nil {
		return fmt.Errorf("recording usage of %s: %w", u.Request, err)
	}
	return nil
}

// appendUsage records u in tx, replacing a record of the same (Request,
// Start).
func appendUsage(tx *bolt.Tx, u records.UsageRecord) error {
	key, idx, span, err := usageKeys(u)
	if err != nil {
		return err
	}
	v, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	{
		usage, index := tx.Bucket(bucketUsage), tx.Bucket(bucketUsageIndex)
		if old := index.Get(idx); old != nil {
			if err := usage.Delete(bytes.Clone(old)); err != nil {
				return err
			}
		}
		if err := usage.Put(key, v); err != nil {
			return err
		}
		if err := index.Put(idx, key); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		maxSpan, err := usageMaxSpan(meta)
		if err != nil {
			return err
		}
		if span > maxSpan {
			return meta.Put(keyUsageMaxSpan, binary.BigEndian.AppendUint64(nil, span))
		}
		return nil
	}
}

// Usage returns the usage records that overlap [from, to), that is those
// with Start < to and End > from, ordered by End, then Request. It returns
// nothing if to is not after from.
//
// The scan starts at the first record ending after from and stops once
// records end so late (to plus the longest record ever appended) that
// none can have started before to.
func (db *DB) Usage(ctx context.Context, from, to time.Time) ([]records.UsageRecord, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	if !to.After(from) {
		return nil, nil
	}
	fromN, toN := clampNanos(from), clampNanos(to)
	var out []records.UsageRecord
	err := db.view(func(tx *bolt.Tx) error {
		maxSpan, err := usageMaxSpan(tx.Bucket(bucketMeta))
		if err != nil {
			return err
		}
		stop := toN + maxSpan // both below 2^63: no overflow
		c := tx.Bucket(bucketUsage).Cursor()
		for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, fromN)); k != nil; k, v = c.Next() {
			u, end, err := decodeUsage(k, v)
			if err != nil {
				return err
			}
			if end > stop {
				break
			}
			if u.Start.Before(to) && u.End.After(from) {
				out = append(out, u)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading usage from %s to %s: %w",
			from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return out, nil
}

// usageKeys returns u's key in bucket usage (End, then Request), its key
// in bucket usage-index (Start, then Request) and its length in
// nanoseconds.
func usageKeys(u records.UsageRecord) (key, idx []byte, span uint64, err error) {
	if u.Request == "" {
		return nil, nil, 0, errors.New("usage record names no request")
	}
	start, err := unixNanos(u.Start)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("start: %w", err)
	}
	end, err := unixNanos(u.End)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("end: %w", err)
	}
	if end < start {
		return nil, nil, 0, fmt.Errorf("end %s is before start %s",
			u.End.Format(time.RFC3339), u.Start.Format(time.RFC3339))
	}
	key = append(binary.BigEndian.AppendUint64(nil, end), u.Request...)
	idx = append(binary.BigEndian.AppendUint64(nil, start), u.Request...)
	return key, idx, end - start, nil
}

// decodeUsage decodes the usage record stored at k and returns it with
// the end time from the key.
func decodeUsage(k, v []byte) (records.UsageRecord, uint64, error) {
	if len(k) <= 8 {
		return records.UsageRecord{}, 0, corrupt(bucketUsage, fmt.Sprintf("%x", k),
			fmt.Errorf("key is %d bytes, want more than 8", len(k)))
	}
	end := binary.BigEndian.Uint64(k[:8])
	name := fmt.Sprintf("%s/%s", time.Unix(0, int64(end)).UTC().Format(time.RFC3339Nano), k[8:])
	var u records.UsageRecord
	if err := json.Unmarshal(v, &u); err != nil {
		return records.UsageRecord{}, 0, corrupt(bucketUsage, name, err)
	}
	if want, _, _, err := usageKeys(u); err != nil || !bytes.Equal(want, k) {
		return records.UsageRecord{}, 0, corrupt(bucketUsage, name,
			fmt.Errorf("record for %s ending %s does not match its key", u.Request, u.End.Format(time.RFC3339Nano)))
	}
	return u, end, nil
}

// usageMaxSpan returns the longest End-Start ever appended, 0 if none.
func usageMaxSpan(meta *bolt.Bucket) (uint64, error) {
	v := meta.Get(keyUsageMaxSpan)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, corrupt(bucketMeta, string(keyUsageMaxSpan), fmt.Errorf("value is %d bytes, want 8", len(v)))
}

// Times stored in keys are unix nanoseconds, which order correctly as
// big-endian uint64 from the epoch until int64 overflows in 2262.
var (
	epoch   = time.Unix(0, 0)
	maxTime = time.Unix(0, math.MaxInt64)
)

// unixNanos returns t as nanoseconds since the epoch, or an error if t
// cannot be stored in a key.
func unixNanos(t time.Time) (uint64, error) {
	if t.Before(epoch) || t.After(maxTime) {
		return 0, fmt.Errorf("time %s is outside 1970–2262", t.Format(time.RFC3339))
	}
	return uint64(t.UnixNano()), nil
}

// clampNanos is unixNanos for query bounds: times outside the storable
// range are moved to its nearest end.
func clampNanos(t time.Time) uint64 {
	switch {
	case t.Before(epoch):
		return 0
	case t.After(maxTime):
		return math.MaxInt64
	}
	return uint64(t.UnixNano())
}
