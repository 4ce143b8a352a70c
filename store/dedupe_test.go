package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestSeen(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	ttl := 10 * time.Minute
	steps := []struct {
		key  string
		now  time.Time
		want bool
	}{
		{"evt-1", t0, false},                                     // fresh
		{"evt-1", t0.Add(time.Minute), true},                     // duplicate; expiry moves to t0+11m
		{"evt-2", t0.Add(time.Minute), false},                    // another key
		{"evt-1", t0.Add(10*time.Minute + 30*time.Second), true}, // kept alive by the duplicate
		{"evt-2", t0.Add(time.Minute + ttl - 1), true},           // one nanosecond before expiry
		{"evt-2", t0.Add(time.Minute + 2*ttl - 1), false},        // exactly at expiry
		{"evt-1", t0.Add(time.Hour), false},                      // expired
	}
	for i, s := range steps {
		got, err := db.Seen(ctx, s.key, s.now, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if got != s.want {
			t.Errorf("step %d: Seen(%s, t0+%s) = %v, want %v", i+1, s.key, s.now.Sub(t0), got, s.want)
		}
	}
}

func TestSeenRefuses(t *testing.T) {
	tests := map[string]struct {
		key string
		now time.Time
		ttl time.Duration
	}{
		"empty key":    {"", t0, time.Minute},
		"zero ttl":     {"k", t0, 0},
		"negative ttl": {"k", t0, -time.Minute},
		"zero now":     {"k", time.Time{}, time.Minute},
	}
	db := mustOpen(t)
	for name, tc := range tests {
		if _, err := db.Seen(context.Background(), tc.key, tc.now, tc.ttl); err == nil {
			t.Errorf("%s: Seen succeeded", name)
		}
	}
}

// countDedupe returns how many keys bucket dedupe holds.
func countDedupe(t *testing.T, db *DB) int {
	t.Helper()
	var n int
	_ = db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketDedupe).Stats().KeyN
		return nil
	})
	return n
}

func TestSeenPrunesBounded(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	const old = 150
	for i := range old {
		if _, err := db.Seen(ctx, fmt.Sprintf("old-%d", i), t0.Add(time.Duration(i)*time.Second), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n := countDedupe(t, db); n != old {
		t.Fatalf("%d keys before pruning, want %d", n, old)
	}

	// Each later call adds one key and removes at most pruneBatch expired ones.
	later := t0.Add(3 * time.Hour)
	want := []int{old - pruneBatch + 1, old - 2*pruneBatch + 2, 3, 4}
	for i, w := range want {
		if _, err := db.Seen(ctx, fmt.Sprintf("new-%d", i), later, time.Minute); err != nil {
			t.Fatal(err)
		}
		if n := countDedupe(t, db); n != w {
			t.Errorf("after call %d: %d keys, want %d", i+1, n, w)
		}
	}

	// Pruning removes only what has expired: the new keys stay.
	if seen, err := db.Seen(ctx, "new-0", later.Add(time.Second), time.Minute); err != nil || !seen {
		t.Errorf("Seen(new-0) = %v, %v; want true", seen, err)
	}
}

// TestSeenConcurrent: of many concurrent deliveries of one key, exactly
// one is new.
func TestSeenConcurrent(t *testing.T) {
	db := mustOpen(t)
	var fresh atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			seen, err := db.Seen(context.Background(), "evt", t0, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if !seen {
				fresh.Add(1)
			}
		})
	}
	wg.Wait()
	if fresh.Load() != 1 {
		t.Errorf("%d calls saw the key as new, want 1", fresh.Load())
	}
}
