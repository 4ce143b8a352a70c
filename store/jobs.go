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

// LastRun returns the last completed run recorded for job, or an error
// wrapping ErrNotFound if the job has none.
func (db *DB) LastRun(ctx context.Context, job string) (records.JobRun, error) {
	if err := db.ready(ctx); err != nil {
		return records.JobRun{}, err
	}
	var run records.JobRun
	err := db.view(func(tx *bolt.Tx) error {
		v, ok := lookup(tx.Bucket(bucketJobs), []byte(job))
		if !ok {
			return ErrNotFound
		}
		var err error
		run, err = decodeJobRun([]byte(job), v)
		return err
	})
	if err != nil {
		return records.JobRun{}, fmt.Errorf("reading the last run of job %s: %w", job, err)
	}
	return run, nil
}

// decodeJobRun decodes the job run stored at key.
func decodeJobRun(key, v []byte) (records.JobRun, error) {
	var run records.JobRun
	if err := json.Unmarshal(v, &run); err != nil {
		return records.JobRun{}, corrupt(bucketJobs, strconv.Quote(string(key)), err)
	}
	if run.Job != string(key) {
		return records.JobRun{}, corrupt(bucketJobs, strconv.Quote(string(key)), fmt.Errorf("record is for job %q", run.Job))
	}
	return run, nil
}

// decodeSample decodes the sample stored at key.
func decodeSample(k, v []byte) (records.Sample, error) {
	if len(k) != 8 {
		return records.Sample{}, corrupt(bucketSamples, fmt.Sprintf("%x", k), fmt.Errorf("key is %d bytes, want 8", len(k)))
	}
	at := binary.BigEndian.Uint64(k)
	name := time.Unix(0, int64(at)).UTC().Format(time.RFC3339Nano)
	var s records.Sample
	if err := json.Unmarshal(v, &s); err != nil {
		return records.Sample{}, corrupt(bucketSamples, name, err)
	}
	if s.At.UnixNano() != int64(at) {
		return records.Sample{}, corrupt(bucketSamples, name, fmt.Errorf("record is of %s", s.At.UTC().Format(time.RFC3339Nano)))
	}
	return s, nil
}

// PutRun records run as its job's last completed run, replacing the one
// before. It refuses a run whose Due is before the recorded one's, so
// that two schedulers racing cannot move a job back in time.
func (db *DB) PutRun(ctx context.Context, run records.JobRun) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	if run.Job == "" {
		return errors.New("recording a job run: no job name")
	}
	if err := db.update(func(tx *bolt.Tx) error { return putRun(tx, run) }); err != nil {
		return fmt.Errorf("recording a run of job %s: %w", run.Job, err)
	}
	return nil
}

// putRun records run in tx, refusing one due before the recorded run.
func putRun(tx *bolt.Tx, run records.JobRun) error {
	if run.Job == "" {
		return errors.New("no job name")
	}
	v, err := json.Marshal(run)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	b := tx.Bucket(bucketJobs)
	if old, ok := lookup(b, []byte(run.Job)); ok {
		var prev records.JobRun
		if err := json.Unmarshal(old, &prev); err == nil && run.Due.Before(prev.Due) {
			return fmt.Errorf("it is due %s, before the recorded run due %s", run.Due.Format(time.RFC3339), prev.Due.Format(time.RFC3339))
		}
	}
	return b.Put([]byte(run.Job), v)
}

// AppendSample stores s under its time; a second sample at the same At
// replaces the first. s.At must lie between 1970 and 2262.
func (db *DB) AppendSample(ctx context.Context, s records.Sample) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	at, err := unixNanos(s.At)
	if err != nil {
		return fmt.Errorf("storing a sample: %w", err)
	}
	v, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("storing a sample: encoding: %w", err)
	}
	err = db.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSamples).Put(binary.BigEndian.AppendUint64(nil, at), v)
	})
	if err != nil {
		return fmt.Errorf("storing the sample of %s: %w", s.At.Format(time.RFC3339), err)
	}
	return nil
}

// Samples returns the samples taken in [from, to), oldest first.
func (db *DB) Samples(ctx context.Context, from, to time.Time) ([]records.Sample, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	if !to.After(from) {
		return nil, nil
	}
	fromN, toN := clampNanos(from), clampNanos(to)
	var out []records.Sample
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSamples).Cursor()
		for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, fromN)); k != nil; k, v = c.Next() {
			if len(k) == 8 && binary.BigEndian.Uint64(k) >= toN {
				break
			}
			s, err := decodeSample(k, v)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading samples from %s to %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return out, nil
}

// AuditRange returns the audit entries with from <= At < to, in sequence
// order.
func (db *DB) AuditRange(ctx context.Context, from, to time.Time) ([]records.AuditEntry, error) {
	if !to.After(from) {
		return nil, nil
	}
	return db.Audit(ctx, AuditQuery{Since: from, Until: to})
}

// FirstAudit returns the first entry of the audit log (what gpubot did
// first: when it started using this store), or an error wrapping
// ErrNotFound for an empty log.
func (db *DB) FirstAudit(ctx context.Context) (records.AuditEntry, error) {
	if err := db.ready(ctx); err != nil {
		return records.AuditEntry{}, err
	}
	var e records.AuditEntry
	err := db.view(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(bucketAudit).Cursor().First()
		if k == nil {
			return ErrNotFound
		}
		var err error
		e, err = decodeAudit(k, v)
		return err
	})
	if err != nil {
		return records.AuditEntry{}, fmt.Errorf("reading the first audit entry: %w", err)
	}
	return e, nil
}
