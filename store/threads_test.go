package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/records"
)

func TestThreads(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)

	if _, err := db.GetThread(ctx, "r1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetThread of a missing thread: %v, want ErrNotFound", err)
	}
	for _, want := range []records.Thread{
		{Channel: "C123", TS: "1700000000.000100"},
		{Channel: "C456", TS: "1700000999.000200"}, // moved: replaces
	} {
		if err := db.PutThread(ctx, "r1", want); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetThread(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetThread (-want +got):\n%s", diff)
		}
	}
	if err := db.PutThread(ctx, "", records.Thread{}); err == nil {
		t.Error("PutThread with no request ID succeeded")
	}
}

func TestCorruptThread(t *testing.T) {
	db := openUnchecked(t)
	rawPut(t, db, bucketThreads, []byte("r1"), []byte("nope"))
	_, err := db.GetThread(context.Background(), "r1")
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `bucket threads at key "r1"`) {
		t.Errorf("GetThread: %v, want ErrCorrupt naming threads/r1", err)
	}
}
