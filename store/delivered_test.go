package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

// TestDeliveredTogether: outbox removals asked for while the store's
// writer is busy wait for it and then go in one write together, and each
// caller returns only once its removal is durable.
func TestDeliveredTogether(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "gpubot.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	var msgs [][]byte
	for range n + 1 {
		msgs = append(msgs, []byte("m"))
	}
	seqs, err := db.Commit(ctx, records.Writes{Outbox: msgs}, at)
	if err != nil {
		t.Fatal(err)
	}
	// The first removal is written while another write holds the store's
	// writer; the n after it queue behind it meanwhile.
	hold, held := make(chan struct{}), make(chan struct{})
	go func() {
		_ = db.update(func(*bolt.Tx) error { close(held); <-hold; return nil })
	}()
	<-held
	var queued sync.WaitGroup
	took := make(chan int, n+1) // room for a write per removal: a failure is told, not a deadlock
	db.delivered.took = func(n int) { took <- n }
	before := db.writes.Load()
	first := make(chan error, 1)
	go func() { first <- db.Delivered(ctx, seqs[0]) }()
	if got := <-took; got != 1 {
		t.Fatalf("the first writer took %d removals, want 1", got)
	}
	// The first caller is the writer now, stuck behind the held write
	// with its own removal: the others queue.
	var wg sync.WaitGroup
	errs := make([]error, n)
	queued.Add(n)
	db.delivered.mu.Lock()
	db.delivered.queued = queued.Done
	db.delivered.mu.Unlock()
	for i := range n {
		wg.Go(func() { errs[i] = db.Delivered(ctx, seqs[i+1]) })
	}
	queued.Wait()
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := <-took; got != n {
		t.Errorf("the next writer took %d removals, want all %d queued", got, n)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("Delivered(%d): %v", seqs[i+1], err)
		}
	}
	// The first removal's write, then one for the n queued behind it.
	if got := db.writes.Load() - before; got != 2 {
		t.Errorf("a removal and %d queued behind it took %d writes, want 2", n, got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Durable: the file has none of them.
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if out, err := db.Outbox(ctx); err != nil || len(out) != 0 {
		t.Errorf("outbox after every removal and a reopen = %d messages, %v; want none", len(out), err)
	}
}

// TestDeliveredError: a removal that cannot be written tells its caller,
// and the ones written with it theirs.
func TestDeliveredError(t *testing.T) {
	ctx := context.Background()
	db, err := Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := db.Delivered(ctx, 1); err == nil {
		t.Error("Delivered on a closed store succeeded")
	}
}
