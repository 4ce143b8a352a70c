package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/records"
)

// TestReceiveAllRemovesHandled: one ReceiveAll stores the new deliveries
// (a redelivery of a handled one is not stored again) and removes the
// handled ones given with it.
func TestReceiveAllRemovesHandled(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	in := func(keys ...string) []records.Inbound {
		var ds []records.Inbound
		for _, k := range keys {
			ds = append(ds, records.Inbound{Key: k, Data: []byte(`{"Text":"` + k + `"}`)})
		}
		return ds
	}
	held := func() []string {
		got, err := db.Inbox(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, d := range got {
			keys = append(keys, d.Key)
		}
		return keys
	}
	if _, err := db.ReceiveAll(ctx, in("e1", "e2"), t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	fresh, err := db.ReceiveAll(ctx, in("e3", "e1"), t0.Add(time.Second), time.Hour, "e1", "e2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{true, false}, fresh); diff != "" {
		t.Errorf("fresh (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"e3"}, held()); diff != "" {
		t.Errorf("the inbox holds (-want +got):\n%s", diff)
	}
}
