package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

// t0 is the tests' "now".
var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// mustOpen opens a fresh store in t.TempDir and checks its invariants
// when the test ends.
func mustOpen(t testing.TB) *DB {
	t.Helper()
	return mustOpenPath(t, filepath.Join(t.TempDir(), "gpubot.db"))
}

// mustOpenPath opens the store at path and, when the test ends, checks
// its invariants and closes it (unless the test did).
func mustOpenPath(t testing.TB, path string, opts ...Option) *DB {
	t.Helper()
	db, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		mustCheck(t, db)
		if err := db.Close(); err != nil && err != ErrClosed {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// mustCheck walks every bucket of db and reports each broken invariant
// as a test error. If the test closed db, it opens the file again to
// check it.
func mustCheck(t testing.TB, db *DB) {
	t.Helper()
	b := db.bolt
	if db.closed.Load() {
		again, err := Open(db.path, WithLockTimeout(time.Second))
		if err != nil {
			t.Errorf("reopening %s to check it: %v", db.path, err)
			return
		}
		defer again.Close()
		b = again.bolt
	}
	err := b.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		checkBuckets(t, tx)
		return nil
	})
	if err != nil {
		t.Errorf("checking %s: %v", db.path, err)
	}
}

func checkBuckets(t testing.TB, tx *bolt.Tx) {
	t.Helper()
	want := map[string]bool{}
	for _, name := range allBuckets {
		want[string(name)] = true
		if tx.Bucket(name) == nil {
			t.Errorf("bucket %s is missing", name)
			return
		}
	}
	_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if !want[string(name)] {
			t.Errorf("unexpected bucket %s", name)
		}
		return nil
	})

	meta := tx.Bucket(bucketMeta)
	if got := string(meta.Get(keySchema)); got != strconv.Itoa(schemaVersion) {
		t.Errorf("schema version = %q, want %d", got, schemaVersion)
	}
	checkRequests(t, tx.Bucket(bucketRequests))
	checkAudit(t, tx.Bucket(bucketAudit))
	checkUsage(t, tx.Bucket(bucketUsage), tx.Bucket(bucketUsageIndex), meta)
	checkDedupe(t, tx.Bucket(bucketDedupe), tx.Bucket(bucketDedupeExpiry))
	checkZombies(t, tx.Bucket(bucketZombies))
	_ = tx.Bucket(bucketThreads).ForEach(func(k, v []byte) error {
		var th records.Thread
		if err := json.Unmarshal(v, &th); err != nil {
			t.Errorf("threads/%s: %v", k, err)
		}
		return nil
	})
}

// checkRequests: every value decodes to a request whose ID is its key,
// and the ID counter is at or past every r<N> stored.
func checkRequests(t testing.TB, b *bolt.Bucket) {
	t.Helper()
	_ = b.ForEach(func(k, v []byte) error {
		if _, err := decodeRequest(k, v); err != nil {
			t.Error(err)
		}
		if n, ok := requestNumber(string(k)); ok && n > b.Sequence() {
			t.Errorf("request %s is past the ID counter %d", k, b.Sequence())
		}
		return nil
	})
}

// checkAudit: keys run 1, 2, … n without gaps, each entry's Seq is its
// key, and the bucket sequence is n.
func checkAudit(t testing.TB, b *bolt.Bucket) {
	t.Helper()
	var n uint64
	_ = b.ForEach(func(k, v []byte) error {
		n++
		e, err := decodeAudit(k, v)
		if err != nil {
			t.Error(err)
			return nil
		}
		if e.Seq != n {
			t.Errorf("audit entry %d found where %d was expected", e.Seq, n)
		}
		return nil
	})
	if b.Sequence() != n {
		t.Errorf("audit sequence is %d with %d entries", b.Sequence(), n)
	}
}

// checkUsage: every record matches its key, usage and usage-index map
// one to one, and no record is longer than the recorded maximum.
func checkUsage(t testing.TB, usage, index, meta *bolt.Bucket) {
	t.Helper()
	maxSpan, err := usageMaxSpan(meta)
	if err != nil {
		t.Error(err)
	}
	var n int
	_ = usage.ForEach(func(k, v []byte) error {
		n++
		u, _, err := decodeUsage(k, v)
		if err != nil {
			t.Error(err)
			return nil
		}
		_, idx, span, _ := usageKeys(u)
		if got := index.Get(idx); !bytes.Equal(got, k) {
			t.Errorf("usage-index for %s from %s points at %x, want %x", u.Request, u.Start, got, k)
		}
		if span > maxSpan {
			t.Errorf("usage of %s lasts %s, longer than the recorded maximum %s",
				u.Request, time.Duration(span), time.Duration(maxSpan))
		}
		return nil
	})
	if got := index.Stats().KeyN; got != n {
		t.Errorf("usage-index has %d keys, usage has %d", got, n)
	}
}

// checkZombies: every value decodes to the zombie its key names, and the
// ID counter is at or past every key.
func checkZombies(t testing.TB, b *bolt.Bucket) {
	t.Helper()
	_ = b.ForEach(func(k, v []byte) error {
		if _, err := decodeZombie(k, v); err != nil {
			t.Error(err)
		} else if n := binary.BigEndian.Uint64(k); n > b.Sequence() {
			t.Errorf("zombie z%d is past the ID counter %d", n, b.Sequence())
		}
		return nil
	})
}

// checkDedupe: every key has an 8-byte expiry with a matching entry in
// dedupe-expiry, and the two buckets have the same number of keys.
func checkDedupe(t testing.TB, keys, byExpiry *bolt.Bucket) {
	t.Helper()
	var n int
	_ = keys.ForEach(func(k, v []byte) error {
		n++
		if len(v) != 8 {
			t.Errorf("dedupe/%q: value is %d bytes", k, len(v))
			return nil
		}
		if _, ok := lookup(byExpiry, expiryKey(binary.BigEndian.Uint64(v), k)); !ok {
			t.Errorf("dedupe/%q: no dedupe-expiry entry", k)
		}
		return nil
	})
	if got := byExpiry.Stats().KeyN; got != n {
		t.Errorf("dedupe-expiry has %d keys, dedupe has %d", got, n)
	}
}

// request returns a request with every field set, changed by mods.
func request(id string, mods ...func(*records.Request)) records.Request {
	est := &records.Estimate{
		At: t0, Earliest: t0.Add(40 * time.Minute), Latest: t0.Add(70 * time.Minute),
		Known: true, Position: 3, Reason: "capacity",
	}
	r := records.Request{
		ID: id, Requester: "ana", Team: "vision", GPUs: 8, Flavor: "h100",
		Priority: "high", Duration: 6 * time.Hour, Topology: "rack", Template: "train",
		Reason: "ablation", Channel: "C123", Origin: "chat",
		State: records.StateRunning, CreatedAt: t0, SubmittedAt: t0.Add(time.Minute),
		AdmittedAt: t0.Add(50 * time.Minute), AdmittedFlavor: "h100",
		Nodes: []string{"node-a", "node-b"}, ApprovedBy: "lee", Approval: []string{"over quota"},
		Preemptions: 1, Estimate: est, FirstEstimate: est, EndWarned: true,
	}
	for _, m := range mods {
		m(&r)
	}
	return r
}

// rawPut writes value at key in bucket, bypassing the store's encoding,
// to plant corrupt records.
func rawPut(t testing.TB, db *DB, bucket []byte, key, value []byte) {
	t.Helper()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put(key, value)
	})
	if err != nil {
		t.Fatalf("planting %s/%q: %v", bucket, key, err)
	}
}

// openUnchecked opens a fresh store whose invariants the test means to
// break; it is closed, not checked, when the test ends.
func openUnchecked(t testing.TB) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
