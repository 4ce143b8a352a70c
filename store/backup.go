package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Backup writes a consistent copy of the whole store to w, as it was at
// one moment, and returns the number of bytes written. It runs in a read
// transaction (bbolt's Tx.WriteTo), so writers carry on meanwhile; the
// copy is a complete bbolt file, the same layout as the store itself.
// It works on a DB opened with Open (a running gpubot) or OpenReadOnly.
func (db *DB) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if err := db.ready(ctx); err != nil {
		return 0, err
	}
	var n int64
	err := db.view(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx: ctx, w: w})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("backing up store %s: %w", db.path, err)
	}
	return n, nil
}

// ctxWriter stops a long copy when its context ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// WriteBackup makes a new store file at path from what write writes (a
// copy made by Backup, here or in another process): it writes a
// temporary file beside path, syncs it, checks it as Check does, and only
// then gives it its name, so that path is either a complete, checked copy
// or absent. It refuses to replace an existing file. The returned Report
// is the copy's check.
func WriteBackup(path string, write func(io.Writer) error) (Report, error) {
	if _, err := os.Lstat(path); err == nil {
		return Report{Path: path}, fmt.Errorf("writing backup: %s already exists; choose another name or remove it first: %w", path, fs.ErrExist)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return Report{Path: path}, fmt.Errorf("writing backup: %w", err)
	}
	tmpName := tmp.Name()
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return Report{Path: path}, fmt.Errorf("writing backup: %w", err)
	}
	if err := write(tmp); err != nil {
		return Report{Path: path}, fmt.Errorf("writing backup %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return Report{Path: path}, fmt.Errorf("writing backup %s: syncing: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return Report{Path: path}, fmt.Errorf("writing backup %s: %w", path, err)
	}
	rep, err := Check(tmpName)
	rep.Path = path
	if err != nil {
		return rep, fmt.Errorf("writing backup %s: the copy does not pass the check: %w", path, err)
	}
	// Link, not rename: it fails instead of replacing a file that
	// appeared meanwhile.
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return rep, fmt.Errorf("writing backup: %s already exists; choose another name or remove it first: %w", path, err)
		}
		return rep, fmt.Errorf("writing backup %s: %w", path, err)
	}
	done = true
	_ = os.Remove(tmpName)
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return rep, nil
}
