package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/records"
)

func TestAudit(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	entries := []records.AuditEntry{
		{At: t0, Actor: "ana", Action: "request", Target: "r1", Outcome: "ok", Detail: "8xh100 6h"},
		{At: t0.Add(time.Minute), Actor: "lee", Action: "approve", Target: "r1", Outcome: "ok"},
		{At: t0.Add(2 * time.Minute), Actor: "bo", Action: "request", Target: "r2", Outcome: "refused"},
		{At: t0.Add(3 * time.Minute), Actor: "gpubot", Action: "admit", Target: "r1", Outcome: "ok"},
		{At: t0.Add(4 * time.Minute), Actor: "ana", Action: "help", Outcome: "ok"},
		{At: t0.Add(5 * time.Minute), Actor: "lee", Action: "deny", Target: "r2", Outcome: "ok"},
	}
	for i, e := range entries {
		e.Seq = 99 // ignored
		seq, err := db.AppendAudit(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(i + 1); seq != want {
			t.Fatalf("AppendAudit #%d returned seq %d, want %d", i+1, seq, want)
		}
		entries[i].Seq = seq
	}

	tests := map[string]struct {
		q    AuditQuery
		want []uint64
	}{
		"everything":         {AuditQuery{}, []uint64{1, 2, 3, 4, 5, 6}},
		"target":             {AuditQuery{Target: "r1"}, []uint64{1, 2, 4}},
		"actor":              {AuditQuery{Actor: "ana"}, []uint64{1, 5}},
		"target and actor":   {AuditQuery{Target: "r2", Actor: "lee"}, []uint64{6}},
		"since is inclusive": {AuditQuery{Since: t0.Add(4 * time.Minute)}, []uint64{5, 6}},
		"until is exclusive": {AuditQuery{Until: t0.Add(2 * time.Minute)}, []uint64{1, 2}},
		"window":             {AuditQuery{Since: t0.Add(time.Minute), Until: t0.Add(4 * time.Minute)}, []uint64{2, 3, 4}},
		"newest two":         {AuditQuery{Limit: 2}, []uint64{5, 6}},
		"newest two of r1":   {AuditQuery{Target: "r1", Limit: 2}, []uint64{2, 4}},
		"limit above count":  {AuditQuery{Actor: "bo", Limit: 10}, []uint64{3}},
		"negative limit":     {AuditQuery{Limit: -1}, []uint64{1, 2, 3, 4, 5, 6}},
		"no match":           {AuditQuery{Actor: "nobody"}, nil},
		"empty window":       {AuditQuery{Since: t0.Add(time.Hour), Until: t0}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := db.Audit(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var want []records.AuditEntry
			for _, seq := range tc.want {
				want = append(want, entries[seq-1])
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Audit(%+v) (-want +got):\n%s", tc.q, diff)
			}
		})
	}
}

func TestCorruptAudit(t *testing.T) {
	ctx := context.Background()
	db := openUnchecked(t)
	if _, err := db.AppendAudit(ctx, records.AuditEntry{At: t0, Actor: "ana", Action: "request"}); err != nil {
		t.Fatal(err)
	}
	rawPut(t, db, bucketAudit, auditKey(2), []byte("{]"))

	_, err := db.Audit(ctx, AuditQuery{})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Audit: %v, want ErrCorrupt", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "bucket audit at key 2") {
		t.Errorf("message %q does not name the bucket and key", msg)
	}
}
