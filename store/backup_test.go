package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gpubot/gpubot/records"
)

// TestBackupWhileWriting: a backup taken while another goroutine keeps
// writing is a checked, complete store holding a prefix of the writes.
func TestBackupWhileWriting(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	for i := 1; i <= 50; i++ {
		if err := db.PutRequest(ctx, request(fmt.Sprintf("r%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 51; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.AppendAudit(ctx, records.AuditEntry{At: t0, Actor: "ana", Action: "request", Target: fmt.Sprintf("r%d", i)}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	path := filepath.Join(t.TempDir(), "backup.db")
	rep, err := WriteBackup(path, func(w io.Writer) error { _, err := db.Backup(ctx, w); return err })
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("WriteBackup: %v", err)
	}
	if !rep.OK() || rep.Records["requests"] != 50 {
		t.Errorf("the backup's check: %+v", rep)
	}
	copyDB := mustOpenPath(t, path)
	got, err := copyDB.ListRequests(ctx, nil)
	if err != nil || len(got) != 50 {
		t.Errorf("the backup holds %d requests (%v), want 50", len(got), err)
	}
	entries, err := copyDB.Audit(ctx, AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if e.Seq != uint64(i+1) {
			t.Fatalf("the backup's audit log has entry %d at %d: not a consistent moment", e.Seq, i+1)
		}
	}
}

// TestWriteBackupRefuses: an existing file is never replaced, and a
// failed or bad copy leaves nothing behind.
func TestWriteBackupRefuses(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "taken.db")
	if err := os.WriteFile(existing, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := mustOpen(t)
	_, err := WriteBackup(existing, func(w io.Writer) error { _, err := db.Backup(context.Background(), w); return err })
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("over an existing file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(existing); string(b) != "mine" {
		t.Errorf("the existing file was changed to %q", b)
	}

	failing := filepath.Join(dir, "failing.db")
	boom := errors.New("connection reset")
	if _, err := WriteBackup(failing, func(w io.Writer) error { _, _ = w.Write([]byte("half")); return boom }); !errors.Is(err, boom) {
		t.Errorf("a failing copy: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if _, err := WriteBackup(garbage, func(w io.Writer) error { _, err := io.WriteString(w, strings.Repeat("x", 9000)); return err }); !errors.Is(err, ErrDamaged) {
		t.Errorf("a copy that is not a store: %v, want ErrDamaged", err)
	}
	left, _ := os.ReadDir(dir)
	for _, e := range left {
		if e.Name() != "taken.db" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}
