package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

func TestOpenCreatesFileAndDirectories(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "gpubot")
	path := filepath.Join(dir, "gpubot.db")
	db := mustOpenPath(t, path)

	if db.Path() != path {
		t.Errorf("Path() = %q, want %q", db.Path(), path)
	}
	if db.SchemaVersion() != schemaVersion {
		t.Errorf("SchemaVersion() = %d, want %d", db.SchemaVersion(), schemaVersion)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700, filepath.Dir(dir): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("mode of %s = %o, want %o", p, got, want)
		}
	}
}

// TestRestart writes one of everything, closes the store, opens it again
// and reads everything back.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gpubot.db")
	db := mustOpenPath(t, path)

	id, err := db.NextRequestID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := request(id)
	thread := records.Thread{Channel: "C123", TS: "1700000000.000100"}
	entry := records.AuditEntry{At: t0, Actor: "ana", Action: "request", Target: id, Outcome: "ok"}
	use := records.UsageRecord{Request: id, Team: "vision", Requester: "ana", Flavor: "h100", GPUs: 8, Start: t0, End: t0.Add(time.Hour)}
	for _, err := range []error{
		db.PutRequest(ctx, req),
		db.PutThread(ctx, id, thread),
		db.AppendUsage(ctx, use),
		db.PutState(ctx, "sim", []byte(`{"nodes":4}`)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.AppendAudit(ctx, entry); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Seen(ctx, "evt-1", t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = mustOpenPath(t, path)
	gotReq, err := db.GetRequest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(req, gotReq); diff != "" {
		t.Errorf("request after restart (-want +got):\n%s", diff)
	}
	gotThread, err := db.GetThread(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(thread, gotThread); diff != "" {
		t.Errorf("thread after restart (-want +got):\n%s", diff)
	}
	gotAudit, err := db.Audit(ctx, AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	entry.Seq = 1
	if diff := cmp.Diff([]records.AuditEntry{entry}, gotAudit); diff != "" {
		t.Errorf("audit after restart (-want +got):\n%s", diff)
	}
	gotUsage, err := db.Usage(ctx, t0, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]records.UsageRecord{use}, gotUsage); diff != "" {
		t.Errorf("usage after restart (-want +got):\n%s", diff)
	}
	gotState, err := db.GetState(ctx, "sim")
	if err != nil {
		t.Fatal(err)
	}
	if string(gotState) != `{"nodes":4}` {
		t.Errorf("state after restart = %q", gotState)
	}
	if seen, err := db.Seen(ctx, "evt-1", t0.Add(time.Minute), time.Hour); err != nil || !seen {
		t.Errorf("Seen(evt-1) after restart = %v, %v; want true, nil", seen, err)
	}
	if next, err := db.NextRequestID(ctx); err != nil || next != "r2" {
		t.Errorf("NextRequestID after restart = %q, %v; want r2", next, err)
	}
}

// TestLocked checks that a second Open of a file in use fails with
// ErrLocked. bbolt's flock is per open file description, so this holds
// within one process too.
func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpubot.db")
	first := mustOpenPath(t, path)

	for name, timeout := range map[string]time.Duration{"short timeout": 100 * time.Millisecond, "no wait": 0} {
		t.Run(name, func(t *testing.T) {
			db, err := Open(path, WithLockTimeout(timeout))
			if err == nil {
				db.Close()
				t.Fatal("second Open succeeded")
			}
			if !errors.Is(err, ErrLocked) {
				t.Fatalf("second Open: %v, want ErrLocked", err)
			}
			if msg := err.Error(); !strings.Contains(msg, path+" is in use by another gpubot process") {
				t.Errorf("message %q does not name the file and the reason", msg)
			}
		})
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	mustOpenPath(t, path, WithLockTimeout(100*time.Millisecond))
}

// plant writes a bbolt file at path with the given buckets and keys,
// bypassing Open.
func plant(t *testing.T, path string, data map[string]map[string]string) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Update(func(tx *bolt.Tx) error {
		for bucket, kv := range data {
			bk, err := tx.CreateBucketIfNotExists([]byte(bucket))
			if err != nil {
				return err
			}
			for k, v := range kv {
				if err := bk.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesSchema(t *testing.T) {
	tests := map[string]struct {
		data map[string]map[string]string
		want []string // in the message
	}{
		"newer version": {
			data: map[string]map[string]string{"meta": {"schema": "2"}, "requests": {}},
			want: []string{"schema version 2", "version 1"},
		},
		"much newer version": {
			data: map[string]map[string]string{"meta": {"schema": "17"}},
			want: []string{"schema version 17", "version 1"},
		},
		"garbage version": {
			data: map[string]map[string]string{"meta": {"schema": "two"}},
			want: []string{`unknown schema version "two"`, "version 1"},
		},
		"version zero": {
			data: map[string]map[string]string{"meta": {"schema": "0"}},
			want: []string{`unknown schema version "0"`},
		},
		"no version": {
			data: map[string]map[string]string{"meta": {}},
			want: []string{`unknown schema version ""`},
		},
		"not gpubot's": {
			data: map[string]map[string]string{"members": {"k": "v"}},
			want: []string{"did not write it"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gpubot.db")
			plant(t, path, tc.data)

			db, err := Open(path)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrSchema) {
				t.Fatalf("Open: %v, want ErrSchema", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not contain %q", err, w)
				}
			}

			// The refused file is untouched and released.
			b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatalf("file still locked after a refused Open: %v", err)
			}
			defer b.Close()
			_ = b.View(func(tx *bolt.Tx) error {
				if tx.Bucket(bucketAudit) != nil {
					t.Error("refused Open created buckets")
				}
				return nil
			})
		})
	}
}

func TestOpenNotABboltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpubot.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path)
	if err == nil {
		db.Close()
		t.Fatal("Open succeeded on a text file")
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("message %q does not name the file", err)
	}
}

// everyMethod calls each method of DB once with ctx.
func everyMethod() map[string]func(context.Context, *DB) error {
	return map[string]func(context.Context, *DB) error{
		"NextRequestID": func(ctx context.Context, db *DB) error { _, err := db.NextRequestID(ctx); return err },
		"PutRequest":    func(ctx context.Context, db *DB) error { return db.PutRequest(ctx, request("r1")) },
		"SaveRequests":  func(ctx context.Context, db *DB) error { return db.SaveRequests(ctx, request("r1")) },
		"GetRequest":    func(ctx context.Context, db *DB) error { _, err := db.GetRequest(ctx, "r1"); return err },
		"ListRequests":  func(ctx context.Context, db *DB) error { _, err := db.ListRequests(ctx, nil); return err },
		"AppendAudit": func(ctx context.Context, db *DB) error {
			_, err := db.AppendAudit(ctx, records.AuditEntry{At: t0, Actor: "ana", Action: "cancel"})
			return err
		},
		"Audit": func(ctx context.Context, db *DB) error { _, err := db.Audit(ctx, AuditQuery{}); return err },
		"AppendUsage": func(ctx context.Context, db *DB) error {
			return db.AppendUsage(ctx, records.UsageRecord{Request: "r1", Start: t0, End: t0.Add(time.Hour)})
		},
		"Usage": func(ctx context.Context, db *DB) error {
			_, err := db.Usage(ctx, t0, t0.Add(time.Hour))
			return err
		},
		"PutThread": func(ctx context.Context, db *DB) error { return db.PutThread(ctx, "r1", records.Thread{Channel: "C1"}) },
		"GetThread": func(ctx context.Context, db *DB) error { _, err := db.GetThread(ctx, "r1"); return err },
		"Seen":      func(ctx context.Context, db *DB) error { _, err := db.Seen(ctx, "k", t0, time.Minute); return err },
		"PutState":  func(ctx context.Context, db *DB) error { return db.PutState(ctx, "s", []byte("x")) },
		"GetState":  func(ctx context.Context, db *DB) error { _, err := db.GetState(ctx, "s"); return err },
		"UpdateState": func(ctx context.Context, db *DB) error {
			return db.UpdateState(ctx, "s", func([]byte) ([]byte, error) { return []byte("y"), nil })
		},
	}
}

func TestClosed(t *testing.T) {
	db := mustOpen(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	for name, call := range everyMethod() {
		if err := call(context.Background(), db); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// TestCloseWhileBusy closes the store under running writers: each call
// either succeeds or fails with ErrClosed, nothing else.
func TestCloseWhileBusy(t *testing.T) {
	db := mustOpen(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				_, err := db.AppendAudit(context.Background(), records.AuditEntry{At: t0, Actor: "ana", Action: "x"})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("AppendAudit: %v", err)
					return
				}
			}
		})
	}
	if _, err := db.Audit(context.Background(), AuditQuery{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func TestCanceledContext(t *testing.T) {
	db := mustOpen(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, call := range everyMethod() {
		if err := call(ctx, db); err != context.Canceled {
			t.Errorf("%s with a canceled context: %v, want context.Canceled", name, err)
		}
	}
	// Nothing was written.
	_ = db.bolt.View(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if string(name) == string(bucketMeta) {
				continue
			}
			b := tx.Bucket(name)
			if n := b.Stats().KeyN; n != 0 || b.Sequence() != 0 {
				t.Errorf("bucket %s has %d keys, sequence %d", name, n, b.Sequence())
			}
		}
		return nil
	})
}
