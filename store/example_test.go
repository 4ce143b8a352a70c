package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "gpubot-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	db, err := store.Open(filepath.Join(dir, "data", "gpubot.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	id, err := db.NextRequestID(ctx)
	if err != nil {
		log.Fatal(err)
	}
	err = db.PutRequest(ctx, records.Request{
		ID: id, Requester: "ana", Team: "vision", GPUs: 8, Flavor: "h100",
		Priority: "normal", Duration: 6 * time.Hour, State: records.StateQueued,
	})
	if err != nil {
		log.Fatal(err)
	}
	r, err := db.GetRequest(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.ID, r.Requester, r.GPUs, r.Flavor, r.State)

	_, err = db.GetRequest(ctx, "r99")
	fmt.Println(err)

	// A second gpubot on the same file is turned away.
	_, err = store.Open(db.Path(), store.WithLockTimeout(0))
	fmt.Println(errors.Is(err, store.ErrLocked))
	// Output:
	// r1 ana 8 h100 queued
	// getting request r99: not found
	// true
}

func ExampleDB_Seen() {
	dir, err := os.MkdirTemp("", "gpubot-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx := context.Background()
	now := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{0, time.Second, time.Hour} {
		// Slack redelivers an event it thinks we missed.
		seen, err := db.Seen(ctx, "Ev0123", now.Add(at), 10*time.Minute)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("+%s seen=%v\n", at, seen)
	}
	// Output:
	// +0s seen=false
	// +1s seen=true
	// +1h0m0s seen=false
}

func ExampleDB_UpdateState() {
	dir, err := os.MkdirTemp("", "gpubot-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx := context.Background()
	appendLine := func(old []byte) ([]byte, error) {
		return append(old, "tick\n"...), nil
	}
	for range 2 {
		if err := db.UpdateState(ctx, "log", appendLine); err != nil {
			log.Fatal(err)
		}
	}
	data, err := db.GetState(ctx, "log")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(data))
	// Output:
	// tick
	// tick
}
