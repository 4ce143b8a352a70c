package store

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gpubot/gpubot/records"
)

func TestState(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)

	if _, err := db.GetState(ctx, "sim"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetState of a missing blob: %v, want ErrNotFound", err)
	}

	data := []byte("cluster v1")
	if err := db.PutState(ctx, "sim", data); err != nil {
		t.Fatal(err)
	}
	data[0] = 'X' // the store kept its own copy
	got, err := db.GetState(ctx, "sim")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "cluster v1" {
		t.Errorf("GetState = %q, want %q", got, "cluster v1")
	}
	got[0] = 'Y' // and hands out copies
	if again, _ := db.GetState(ctx, "sim"); string(again) != "cluster v1" {
		t.Errorf("GetState after changing a returned blob = %q", again)
	}

	// An empty blob exists and is not nil.
	if err := db.PutState(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := db.GetState(ctx, "empty"); err != nil || got == nil || len(got) != 0 {
		t.Errorf("GetState(empty) = %q (nil %v), %v; want empty, non-nil", got, got == nil, err)
	}

	if err := db.PutState(ctx, "", []byte("x")); err == nil {
		t.Error("PutState with no name succeeded")
	}
}

func TestUpdateState(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)

	var sawNil bool
	err := db.UpdateState(ctx, "counter", func(old []byte) ([]byte, error) {
		sawNil = old == nil
		return []byte("1"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawNil {
		t.Error("fn did not get nil for a missing blob")
	}

	boom := errors.New("boom")
	err = db.UpdateState(ctx, "counter", func(old []byte) ([]byte, error) {
		return []byte("garbage"), boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("UpdateState: %v, want boom", err)
	}
	if got, _ := db.GetState(ctx, "counter"); string(got) != "1" {
		t.Errorf("after a failed update the blob is %q, want %q", got, "1")
	}
}

// TestUpdateStateAtomic increments a counter from many goroutines; a
// lost update would leave it short.
func TestUpdateStateAtomic(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	const workers, each = 8, 25
	inc := func(old []byte) ([]byte, error) {
		n := 0
		if old != nil {
			var err error
			if n, err = strconv.Atoi(string(old)); err != nil {
				return nil, err
			}
		}
		return []byte(strconv.Itoa(n + 1)), nil
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if err := db.UpdateState(ctx, "counter", inc); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := db.GetState(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(workers * each); string(got) != want {
		t.Errorf("counter = %s, want %s", got, want)
	}
}

func TestUpdateStatePanics(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	if err := db.PutState(ctx, "sim", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic in fn did not reach the caller")
			}
		}()
		_ = db.UpdateState(ctx, "sim", func([]byte) ([]byte, error) { panic("bug") })
	}()
	// Rolled back, and the write lock is free again.
	if err := db.PutState(ctx, "other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.GetState(ctx, "sim"); string(got) != "v1" {
		t.Errorf("after a panicking update the blob is %q, want v1", got)
	}
}

// TestStatesByPrefixAndRemoval: States reads every blob of a prefix (and
// no other); Commit removes a state given nil Data and keeps an empty
// one given empty Data, in the same transaction as the rest.
func TestStatesByPrefixAndRemoval(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	w := records.Writes{States: []records.NamedState{
		{Name: "sim", Data: []byte("blob")}, {Name: "sim.a", Data: []byte("1")},
		{Name: "sim.b", Data: []byte("2")}, {Name: "simx", Data: []byte("other")},
	}}
	if _, err := db.Commit(ctx, w, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	got, err := db.States(ctx, "sim.")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string][]byte{"sim.a": []byte("1"), "sim.b": []byte("2")}; !reflect.DeepEqual(got, want) {
		t.Errorf("States(sim.) = %q, want %q", got, want)
	}
	w = records.Writes{States: []records.NamedState{{Name: "sim"}, {Name: "sim.a", Data: []byte{}}, {Name: "sim.c", Data: []byte("3")}}}
	if _, err := db.Commit(ctx, w, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetState(ctx, "sim"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetState of a state committed with nil Data: %v, want ErrNotFound", err)
	}
	got, _ = db.States(ctx, "sim.")
	if want := map[string][]byte{"sim.a": {}, "sim.b": []byte("2"), "sim.c": []byte("3")}; !reflect.DeepEqual(got, want) {
		t.Errorf("States(sim.) after the second commit = %q, want %q", got, want)
	}
	if none, err := db.States(ctx, "nothing."); err != nil || len(none) != 0 {
		t.Errorf("States of an unused prefix = %q, %v; want none", none, err)
	}
}
