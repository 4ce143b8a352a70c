package store

import (
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// schemaVersion is the layout this build reads and writes. Raise it when
// a key or value changes in a way older builds would misread, and teach
// prepare to migrate the previous version forward.
const schemaVersion = 1

// Top-level buckets. doc.go says what each holds.
var (
	bucketMeta         = []byte("meta")
	bucketRequests     = []byte("requests")
	bucketAudit        = []byte("audit")
	bucketUsage        = []byte("usage")
	bucketUsageIndex   = []byte("usage-index")
	bucketThreads      = []byte("threads")
	bucketDedupe       = []byte("dedupe")
	bucketDedupeExpiry = []byte("dedupe-expiry")
	bucketState        = []byte("state")
	bucketZombies      = []byte("zombies")
	bucketJobs         = []byte("jobs")
	bucketSamples      = []byte("samples")
	bucketOutbox       = []byte("outbox")
	bucketInbox        = []byte("inbox")

	allBuckets = [][]byte{
		bucketMeta, bucketRequests, bucketAudit, bucketUsage, bucketUsageIndex,
		bucketThreads, bucketDedupe, bucketDedupeExpiry, bucketState, bucketZombies,
		bucketJobs, bucketSamples, bucketOutbox, bucketInbox,
	}
)

// Keys in bucket meta.
var (
	// keySchema holds the schema version in decimal ASCII.
	keySchema = []byte("schema")
	// keyUsageMaxSpan holds the longest End-Start of any usage record
	// ever appended, in nanoseconds (8 bytes, big-endian).
	keyUsageMaxSpan = []byte("usage-max-span")
)

// prepare checks (or, on a new file, writes) the schema version and
// creates missing buckets. It returns the file's schema version.
func prepare(tx *bolt.Tx) (int, error) {
	v, err := readSchema(tx)
	if err != nil {
		return 0, err
	}
	if v == 0 {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return 0, fmt.Errorf("creating bucket %s: %w", bucketMeta, err)
		}
		if err := meta.Put(keySchema, []byte(strconv.Itoa(schemaVersion))); err != nil {
			return 0, fmt.Errorf("writing schema version: %w", err)
		}
		v = schemaVersion
	}
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return 0, fmt.Errorf("creating bucket %s: %w", name, err)
		}
	}
	return v, nil
}

// readSchema returns the file's schema version, or 0 for a file with no
// buckets at all (new). It refuses, with ErrSchema, a file with data but
// no version (not gpubot's), an unreadable version, a newer one and an
// older one it cannot migrate.
func readSchema(tx *bolt.Tx) (int, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		if tx.ForEach(func([]byte, *bolt.Bucket) error { return errStop }) != nil {
			return 0, fmt.Errorf("file holds data but no schema version, so gpubot did not write it; this gpubot writes version %d: %w",
				schemaVersion, ErrSchema)
		}
		return 0, nil
	}
	raw := meta.Get(keySchema)
	v, err := strconv.Atoi(string(raw))
	switch {
	case raw == nil || err != nil || v < 1:
		return 0, fmt.Errorf("file has unknown schema version %q, this gpubot reads version %d: %w",
			raw, schemaVersion, ErrSchema)
	case v > schemaVersion:
		return 0, fmt.Errorf("file has schema version %d, newer than version %d that this gpubot reads; run a newer gpubot: %w",
			v, schemaVersion, ErrSchema)
	case v < schemaVersion:
		// No migrations exist yet: version 1 is the first.
		return 0, fmt.Errorf("file has schema version %d and this gpubot cannot migrate it to version %d: %w",
			v, schemaVersion, ErrSchema)
	}
	return v, nil
}

// errStop ends a ForEach early.
var errStop = errors.New("stop")
