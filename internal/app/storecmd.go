package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpubot/gpubot/store"
)

// StoreFile is the store's file name in the data directory.
const StoreFile = "gpubot.db"

// openStore opens the data directory's store for the bot. A store that
// is refused gets the sentence an operator needs: what is wrong, that the
// file was not changed, and what to do.
func openStore(dataDir string) (*store.DB, error) {
	path := filepath.Join(dataDir, StoreFile)
	db, err := store.Open(path)
	if err != nil {
		return nil, refusal(path, err)
	}
	return db, nil
}

// InboxFile is the store file, beside StoreFile, that keeps Slack's
// deliveries from before their ack until handled: apart from the main
// store so that an ack waits for its own small write only, never behind
// a decision's.
const InboxFile = "inbox.db"

// openInbox opens the inbox store of dataDir.
func openInbox(dataDir string) (*store.DB, error) {
	path := filepath.Join(dataDir, InboxFile)
	db, err := store.Open(path)
	if err != nil {
		return nil, refusal(path, err)
	}
	return db, nil
}

// refusal adds what to do to an error opening the store at path.
func refusal(path string, err error) error {
	aside := fmt.Sprintf("mv %s %s.damaged", path, path)
	switch {
	case errors.Is(err, store.ErrEmpty):
		return fmt.Errorf("%w. gpubot has not changed it. If this is a new data directory whose first start was interrupted, remove the empty file; otherwise restore the latest backup (README, \"Backups and restore\")", err)
	case errors.Is(err, store.ErrDamaged), errors.Is(err, store.ErrCorrupt):
		return fmt.Errorf("%w. gpubot has not changed it. Restore the latest backup (README, \"Backups and restore\"), or move the file aside to start with an empty store (%s); \"gpubot store check %s\" lists every problem", err, aside, path)
	case errors.Is(err, store.ErrSchema):
		return fmt.Errorf("%w. gpubot has not changed it", err)
	case errors.Is(err, store.ErrLocked):
		return fmt.Errorf("%w: stop the other gpubot first, or give this one its own --data-dir", err)
	}
	return err
}

// StoreCheck checks the store file at path (a data directory's
// gpubot.db, or a backup) and prints what it found to w. It returns
// whether the file is fine to start on, and an error only when it could
// not check it at all (missing, in use).
func StoreCheck(path string, w io.Writer) (bool, error) {
	rep, err := store.Check(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("%s does not exist", path)
	case errors.Is(err, store.ErrLocked):
		return false, fmt.Errorf("%s is in use by a running gpubot; check a backup of it instead: gpubot store backup --data-dir %s copy.db && gpubot store check copy.db", path, filepath.Dir(path))
	case err == nil:
		fmt.Fprintf(w, "%s: fine: %s.\n", path, describe(rep))
		return true, nil
	}
	what := "is damaged"
	switch {
	case errors.Is(err, store.ErrCorrupt):
		what = "has records that do not decode"
	case errors.Is(err, store.ErrSchema):
		what = "is not one this gpubot can read"
	case !errors.Is(err, store.ErrDamaged):
		return false, err
	}
	fmt.Fprintf(w, "%s %s; gpubot will not start on it:\n", path, what)
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "  - %s\n", p)
	}
	if !errors.Is(err, store.ErrSchema) {
		fmt.Fprintf(w, "Restore the latest backup (README, \"Backups and restore\"), or move the file aside to start with an empty store: mv %s %s.damaged\n", path, path)
	}
	return false, nil
}

// describe summarises a healthy store.
func describe(rep store.Report) string {
	if rep.Schema == 0 {
		return fmt.Sprintf("a new store with nothing in it yet (%d bytes)", rep.Size)
	}
	parts := []string{fmt.Sprintf("schema %d, transaction %d, %d pages of %d bytes", rep.Schema, rep.Transaction, rep.Pages, rep.PageSize)}
	names := make([]string, 0, len(rep.Records))
	for n := range rep.Records {
		names = append(names, n)
	}
	slices.Sort(names)
	var counts []string
	for _, n := range names {
		counts = append(counts, fmt.Sprintf("%s %d", n, rep.Records[n]))
	}
	parts = append(parts, "records: "+strings.Join(counts, ", "))
	if len(rep.Unknown) > 0 {
		parts = append(parts, "buckets this gpubot does not know (kept as they are): "+strings.Join(rep.Unknown, ", "))
	}
	return strings.Join(parts, "; ")
}

// StoreBackup writes a consistent, checked copy of the store in dataDir
// to the new file dest, and says so on w. With gpubot stopped it reads
// the file itself (read-only, shared lock); while gpubot runs (it holds
// the file) it asks the running gpubot over its admin socket.
func StoreBackup(ctx context.Context, dataDir, dest string, w io.Writer) error {
	path := filepath.Join(dataDir, StoreFile)
	db, err := store.OpenReadOnly(path, store.WithLockTimeout(0))
	var rep store.Report
	how := "from the stopped gpubot's file"
	switch {
	case err == nil:
		rep, err = store.WriteBackup(dest, func(out io.Writer) error { _, err := db.Backup(ctx, out); return err })
		if cerr := db.Close(); cerr != nil && err == nil {
			err = cerr
		}
	case errors.Is(err, store.ErrLocked):
		how = "from the running gpubot, over " + filepath.Join(dataDir, SocketName)
		rep, err = fetchBackup(ctx, dataDir, dest)
		if errors.Is(err, errNoAdmin) {
			return fmt.Errorf("%s is in use, but %w: is the gpubot holding it older than this one, or its data directory's path too long for a socket? Stop it and run the backup again", path, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("there is no store to back up: %s does not exist", path)
	default:
		return refusal(path, err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Backed up %s to %s %s: %s.\n", path, dest, how, describe(rep))
	return nil
}
