package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/gpubot/gpubot/records"
)

// Errors reported by the store. Compare with errors.Is: the store wraps
// them with what it was doing.
var (
	// ErrNotFound is returned by the getters when there is no such record.
	// It is records.ErrNotFound, the kind the consumers' ports compare with.
	ErrNotFound = records.ErrNotFound

	// ErrLocked is returned by Open when another process (or another DB
	// value in this process) holds the file and does not let go within
	// the lock timeout.
	ErrLocked = errors.New("in use by another gpubot process")

	// ErrSchema is returned by Open when the file was written with a
	// schema version this build does not know: a newer gpubot, or not
	// gpubot at all. The message names both versions.
	ErrSchema = errors.New("unsupported schema version")

	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("store is closed")

	// ErrCorrupt is returned when a stored value cannot be decoded, or
	// decodes to something that contradicts its key. The message names
	// the bucket and the key. Nothing is changed when it is returned.
	ErrCorrupt = errors.New("corrupt record")

	// ErrDamaged is returned when the file itself is broken: empty,
	// truncated, a header page that fails its checksum, a page of the
	// tree or the freelist that does not hold what it should, or bbolt
	// panicking or faulting while reading it. Open and Check return it
	// without having written to the file; a DB that hits it while
	// running stops using the file (every later call returns it too).
	ErrDamaged = errors.New("damaged store file")

	// ErrEmpty is returned (wrapped with ErrDamaged) for a store file
	// of zero bytes: bbolt would take it for a new file and start
	// afresh, so Open refuses it instead.
	ErrEmpty = errors.New("the file is empty (0 bytes)")

	// ErrReadOnly is returned by every method that writes, on a DB
	// opened with OpenReadOnly.
	ErrReadOnly = errors.New("store is open read-only")
)

// DefaultLockTimeout is how long Open waits for another process to
// release the file unless WithLockTimeout says otherwise.
const DefaultLockTimeout = 2 * time.Second

// DB is an open gpubot store. It is safe for concurrent use by several
// goroutines; bbolt serialises writers and lets readers run alongside.
type DB struct {
	bolt     *bolt.DB
	path     string
	schema   int
	readOnly bool
	closed   atomic.Bool
	// broken is set once bbolt panicked or faulted on the file: from
	// then on nothing touches it.
	broken atomic.Pointer[error]
	// ids is the highest request number NextRequestID handed out (idMu
	// held to hand out the next).
	idMu sync.Mutex
	ids  atomic.Uint64
	// delivered gathers the outbox removals (Delivered) that arrive
	// while one is being written, for the next write.
	delivered deliveredQueue
	// writes counts the write transactions begun (for tests).
	writes atomic.Uint64
}

type options struct {
	lockTimeout time.Duration
}

// Option changes how Open opens the store.
type Option func(*options)

// WithLockTimeout sets how long Open waits for another process to
// release the file before it gives up with ErrLocked. The default is
// DefaultLockTimeout (2s). A zero or negative d tries once and fails at
// once: Open never waits forever.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = d }
}

func newOptions(opts []Option) options {
	o := options{lockTimeout: DefaultLockTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// boltTimeout is bbolt's lock timeout for ours: bbolt waits forever on
// 0, and any positive timeout shorter than its retry interval makes it
// try exactly once.
func boltTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Nanosecond
	}
	return d
}

// Open opens the store at path for reading and writing, creating the
// file (mode 0o600) and its missing parent directories (mode 0o700) if
// needed.
//
// An existing file is checked first, read-only, as Check does: a
// damaged, empty or corrupt file, or one of a newer or foreign schema, is
// refused (ErrDamaged, ErrCorrupt, ErrSchema) before anything is written
// to it, so that it stays as it was for a backup to replace or for an
// expert to look at. Only then is it opened for writing; on a new file
// Open writes the current schema version, and it creates any missing
// bucket.
//
// Only one DB may have the file open at a time. If another holds it, Open
// waits up to the lock timeout (see WithLockTimeout) and then fails with
// ErrLocked.
func Open(path string, opts ...Option) (*DB, error) {
	o := newOptions(opts)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("opening store: creating directory: %w", err)
	}
	switch _, err := os.Stat(path); {
	case err == nil:
		if _, err := Check(path, opts...); err != nil {
			return nil, fmt.Errorf("opening store: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("opening store: %w", err)
	}
	b, err := openBolt(path, &bolt.Options{Timeout: boltTimeout(o.lockTimeout)})
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("opening store: %s is %w (waited %s)", path, ErrLocked, max(o.lockTimeout, 0))
	}
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}

	db := &DB{bolt: b, path: path}
	err = db.update(func(tx *bolt.Tx) error {
		v, err := prepare(tx)
		db.schema = v
		return err
	})
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	return db, nil
}

// OpenReadOnly opens an existing store for reading only, after checking
// it as Check does (and refusing it as Open does), without ever writing
// to the file. It takes a shared lock: several read-only DBs may be open
// at once, but not while a gpubot has the file open for writing (that
// fails with ErrLocked after the lock timeout). Every method that writes
// returns ErrReadOnly. A file that gpubot created but never wrote into
// reads as empty.
//
// It is for tools that read a stopped gpubot's data directory (backups,
// reports).
func OpenReadOnly(path string, opts ...Option) (*DB, error) {
	o := newOptions(opts)
	if _, err := Check(path, opts...); err != nil {
		return nil, fmt.Errorf("opening store read-only: %w", err)
	}
	b, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: boltTimeout(o.lockTimeout)})
	if errors.Is(err, ErrLocked) {
		return nil, fmt.Errorf("opening store read-only: %s is %w (waited %s)", path, ErrLocked, max(o.lockTimeout, 0))
	}
	if err != nil {
		return nil, fmt.Errorf("opening store %s read-only: %w", path, err)
	}
	db := &DB{bolt: b, path: path, readOnly: true}
	err = db.view(func(tx *bolt.Tx) error {
		v, err := readSchema(tx)
		db.schema = v
		return err
	})
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("opening store %s read-only: %w", path, err)
	}
	return db, nil
}

// Close releases the file after the transactions in progress finish.
// From then on every method that touches records returns ErrClosed, and
// so does a second Close. Path and SchemaVersion keep answering.
func (db *DB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("closing store %s: %w", db.path, err)
	}
	return nil
}

// Path returns the path the store was opened with.
func (db *DB) Path() string { return db.path }

// SchemaVersion returns the schema version of the open file, which is
// always the version this build writes (Open refuses anything else), or
// 0 for an empty file opened with OpenReadOnly.
func (db *DB) SchemaVersion() int { return db.schema }

// ready returns ctx.Err() or ErrClosed if a transaction must not start.
func (db *DB) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.closed.Load() {
		return ErrClosed
	}
	return nil
}

// update runs fn in a read-write transaction, committed (and fsynced) if
// fn returns nil, rolled back otherwise; the transaction also makes the
// request IDs handed out so far durable (NextRequestID). Callers check
// ready first. A panic or memory fault inside bbolt is returned as
// ErrDamaged, and the DB stops using the file.
func (db *DB) update(fn func(tx *bolt.Tx) error) error {
	if db.readOnly {
		return ErrReadOnly
	}
	db.writes.Add(1)
	return db.guard(func() error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			if b := tx.Bucket(bucketRequests); b != nil {
				return db.keepIDs(b)
			}
			return nil
		})
	})
}

// view runs fn in a read-only transaction. Callers check ready first.
// Panics and faults are handled as in update.
func (db *DB) view(fn func(tx *bolt.Tx) error) error {
	return db.guard(func() error { return db.bolt.View(fn) })
}

// guard runs a transaction: the store's boundary, where no panic from
// bbolt gets past.
func (db *DB) guard(tx func() error) error {
	if p := db.broken.Load(); p != nil {
		return *p
	}
	err := guarded(tx)
	if errors.Is(err, ErrDamaged) {
		err = fmt.Errorf("%w (%s); gpubot stopped using the file", err, db.path)
		db.broken.CompareAndSwap(nil, &err)
	}
	return closedErr(err)
}

// closedErr turns bbolt's "not open" (Close won a race with the check in
// ready) into ErrClosed.
func closedErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// lookup returns a copy of the value at key and whether the key exists,
// telling an empty value from a missing one.
func lookup(b *bolt.Bucket, key []byte) ([]byte, bool) {
	k, v := b.Cursor().Seek(key)
	if k == nil || !bytes.Equal(k, key) {
		return nil, false
	}
	return append([]byte{}, v...), true
}

// corrupt reports an undecodable value in bucket at key.
func corrupt(bucket []byte, key string, err error) error {
	return fmt.Errorf("%w in bucket %s at key %s: %w", ErrCorrupt, bucket, key, err)
}
