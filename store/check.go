package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/gpubot/gpubot/records"
)

// Report is what Check found out about a store file.
type Report struct {
	// Path is the file checked; Size its length in bytes.
	Path string
	Size int64
	// PageSize, Pages and Transaction describe the bbolt file: its page
	// size, its high-water mark in pages and the ID of its last
	// committed transaction. Zero when the file is too damaged to say.
	PageSize    int
	Pages       uint64
	Transaction uint64
	// Schema is the file's schema version; 0 for a bbolt file that
	// gpubot created but never wrote into.
	Schema int
	// Records counts the keys of each bucket gpubot knows, by name.
	Records map[string]int
	// Unknown lists the top-level buckets this gpubot does not know
	// (written by a newer gpubot of the same schema version); they are
	// checked by bbolt's consistency check only.
	Unknown []string
	// Problems says what is wrong, at most about twenty items, most
	// telling first; empty when the file is fine.
	Problems []string
}

// OK reports whether no problem was found.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Check checks the store file at path without changing it: it holds a
// shared lock (so no gpubot writes meanwhile; one that holds the file
// makes Check fail with ErrLocked after the lock timeout), then
//
//  1. reads the file's pages itself, bounds-checked: both header pages
//     (signature, version, checksum), the length the header claims
//     against the file's, every page of the B+tree, every nested bucket
//     and the freelist, and that each page is used once or free;
//  2. only if that found nothing, opens it read-only with bbolt and runs
//     bbolt's own consistency check (Tx.Check);
//  3. checks the schema version and decodes every record of every bucket
//     this gpubot knows, with the invariants between them (IDs match
//     keys, counters are past every ID, indexes point at records).
//
// The error is nil when the file is fine. Otherwise it wraps ErrDamaged
// (the file itself is broken, including an empty file), ErrCorrupt (a
// record does not decode), ErrSchema (a newer or foreign file), ErrLocked,
// or the file system's error (os.ErrNotExist for a missing file); the
// Report then lists the problems. Check never panics: a panic or a memory
// fault inside bbolt is reported as ErrDamaged.
func Check(path string, opts ...Option) (rep Report, err error) {
	o := newOptions(opts)
	rep = Report{Path: path, Records: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return rep, fmt.Errorf("checking store %s: %w", path, err)
	}
	defer f.Close()
	if err := lockShared(f, o.lockTimeout); err != nil {
		if errors.Is(err, errWouldBlock) {
			return rep, fmt.Errorf("checking store: %s is %w (waited %s)", path, ErrLocked, max(o.lockTimeout, 0))
		}
		return rep, fmt.Errorf("checking store %s: locking: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return rep, fmt.Errorf("checking store %s: %w", path, err)
	}
	rep.Size = fi.Size()

	if rep.Size == 0 {
		rep.Problems = []string{ErrEmpty.Error()}
		return rep, fmt.Errorf("%w: %s: %w", ErrDamaged, path, ErrEmpty)
	}
	fr := checkFile(f, rep.Size)
	rep.PageSize, rep.Pages, rep.Transaction = fr.pageSize, fr.pages, fr.txid
	if len(fr.problems) > 0 {
		rep.Problems = fr.problems
		return rep, fmt.Errorf("%w: %s: %s", ErrDamaged, path, summary(rep.Problems))
	}

	b, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: boltTimeout(o.lockTimeout)})
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return rep, fmt.Errorf("checking store: %s is %w", path, ErrLocked)
		}
		rep.Problems = []string{err.Error()}
		return rep, fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
	}
	defer b.Close()
	kind := error(nil)
	err = guarded(func() error {
		return b.View(func(tx *bolt.Tx) error {
			for cerr := range tx.Check() {
				if len(rep.Problems) < maxProblems {
					rep.Problems = append(rep.Problems, "bbolt's consistency check: "+cerr.Error())
				}
				kind = ErrDamaged
			}
			if kind != nil {
				return nil
			}
			v, serr := readSchema(tx)
			rep.Schema = v
			if serr != nil {
				rep.Problems = append(rep.Problems, strings.TrimSuffix(serr.Error(), ": "+ErrSchema.Error()))
				kind = ErrSchema
				return nil
			}
			if v == 0 {
				return nil // a new file: nothing written yet
			}
			rc := &recordCheck{rep: &rep}
			rc.all(tx)
			if len(rep.Problems) > 0 {
				kind = ErrCorrupt
			}
			return nil
		})
	})
	if err != nil {
		rep.Problems = append(rep.Problems, err.Error())
		return rep, fmt.Errorf("checking store %s: %w", path, err)
	}
	if kind != nil {
		return rep, fmt.Errorf("%w: %s: %s", kind, path, summary(rep.Problems))
	}
	return rep, nil
}

// summary joins the first problem with a count of the others.
func summary(problems []string) string {
	switch n := len(problems); n {
	case 0:
		return "no problem found"
	case 1:
		return problems[0]
	default:
		more := n - 1
		if problems[n-1] == "and more" {
			return fmt.Sprintf("%s (and more than %d other problems)", problems[0], more-1)
		}
		return fmt.Sprintf("%s (and %d other problems)", problems[0], more)
	}
}

// guarded runs fn and turns a panic or a memory fault in it (bbolt
// reading a damaged page through its memory map) into an error wrapping
// ErrDamaged.
func guarded(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if cp, ok := v.(callerPanic); ok {
				panic(cp.v)
			}
			err = fmt.Errorf("%w: bbolt failed reading it: %v", ErrDamaged, v)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return fn()
}

// callerPanic carries a panic of the store's caller (UpdateState's fn)
// through guarded, which lets it go on.
type callerPanic struct{ v any }

// openBolt opens path with bbolt, guarded, and maps bbolt's errors to the
// store's.
func openBolt(path string, opts *bolt.Options) (*bolt.DB, error) {
	var b *bolt.DB
	err := guarded(func() error {
		var err error
		b, err = bolt.Open(path, 0o600, opts)
		return err
	})
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, ErrLocked
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("%w: bbolt refuses it: %v", ErrDamaged, err)
	}
	return nil, err
}

// recordCheck decodes every record of the buckets gpubot knows.
type recordCheck struct {
	rep *Report
}

func (c *recordCheck) problemf(format string, args ...any) {
	if len(c.rep.Problems) < maxProblems {
		c.rep.Problems = append(c.rep.Problems, fmt.Sprintf(format, args...))
	} else if len(c.rep.Problems) == maxProblems {
		c.rep.Problems = append(c.rep.Problems, "and more")
	}
}

// each calls fn for every key of bucket name, reporting nested buckets
// where values belong. It returns the bucket (nil if it is missing).
func (c *recordCheck) each(tx *bolt.Tx, name []byte, fn func(k, v []byte) error) *bolt.Bucket {
	b := tx.Bucket(name)
	if b == nil {
		return nil
	}
	n := 0
	_ = b.ForEach(func(k, v []byte) error {
		n++
		if v == nil {
			c.problemf("bucket %s holds a nested bucket %q where records belong", name, k)
			return nil
		}
		if err := fn(k, v); err != nil {
			c.problemf("%v", err)
		}
		return nil
	})
	c.rep.Records[string(name)] = n
	return b
}

func (c *recordCheck) all(tx *bolt.Tx) {
	known := map[string]bool{}
	for _, n := range allBuckets {
		known[string(n)] = true
	}
	_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if !known[string(name)] {
			c.rep.Unknown = append(c.rep.Unknown, string(name))
		}
		return nil
	})
	if meta := tx.Bucket(bucketMeta); meta != nil {
		if _, err := usageMaxSpan(meta); err != nil {
			c.problemf("%v", err)
		}
	}

	var maxID uint64
	reqs := c.each(tx, bucketRequests, func(k, v []byte) error {
		if _, err := decodeRequest(k, v); err != nil {
			return err
		}
		if n, ok := requestNumber(string(k)); ok {
			maxID = max(maxID, n)
		}
		return nil
	})
	if reqs != nil && maxID > reqs.Sequence() {
		c.problemf("bucket %s: the ID counter is at %d but request r%d is stored", bucketRequests, reqs.Sequence(), maxID)
	}

	var last uint64
	audit := c.each(tx, bucketAudit, func(k, v []byte) error {
		e, err := decodeAudit(k, v)
		if err != nil {
			return err
		}
		prev := last
		last = e.Seq
		if e.Seq != prev+1 {
			return corrupt(bucketAudit, strconv.FormatUint(e.Seq, 10), fmt.Errorf("entries %d to %d are missing", prev+1, e.Seq-1))
		}
		return nil
	})
	if audit != nil && audit.Sequence() < last {
		c.problemf("bucket %s: the sequence is at %d but entry %d is stored", bucketAudit, audit.Sequence(), last)
	}

	usage := tx.Bucket(bucketUsage)
	c.each(tx, bucketUsage, func(k, v []byte) error {
		_, _, err := decodeUsage(k, v)
		return err
	})
	c.each(tx, bucketUsageIndex, func(k, v []byte) error {
		if len(k) <= 8 {
			return corrupt(bucketUsageIndex, fmt.Sprintf("%x", k), fmt.Errorf("key is %d bytes, want more than 8", len(k)))
		}
		if usage == nil || usage.Get(v) == nil {
			return corrupt(bucketUsageIndex, fmt.Sprintf("%x", k), errors.New("points at no usage record"))
		}
		return nil
	})
	c.each(tx, bucketThreads, func(k, v []byte) error {
		var t records.Thread
		if err := json.Unmarshal(v, &t); err != nil {
			return corrupt(bucketThreads, strconv.Quote(string(k)), err)
		}
		return nil
	})
	c.each(tx, bucketDedupe, func(k, v []byte) error {
		if len(v) != 8 {
			return corrupt(bucketDedupe, strconv.Quote(string(k)), fmt.Errorf("value is %d bytes, want 8", len(v)))
		}
		return nil
	})
	c.each(tx, bucketDedupeExpiry, func(k, v []byte) error {
		if len(k) <= 8 {
			return corrupt(bucketDedupeExpiry, fmt.Sprintf("%x", k), fmt.Errorf("key is %d bytes, want more than 8", len(k)))
		}
		return nil
	})
	c.each(tx, bucketState, func([]byte, []byte) error { return nil })
	c.each(tx, bucketZombies, func(k, v []byte) error {
		_, err := decodeZombie(k, v)
		return err
	})
	c.each(tx, bucketJobs, func(k, v []byte) error {
		_, err := decodeJobRun(k, v)
		return err
	})
	c.each(tx, bucketSamples, func(k, v []byte) error {
		_, err := decodeSample(k, v)
		return err
	})
	var lastOut uint64
	outbox := c.each(tx, bucketOutbox, func(k, v []byte) error {
		m, err := decodeOutbound(k, v)
		lastOut = max(lastOut, m.Seq)
		return err
	})
	c.each(tx, bucketInbox, func(k, v []byte) error {
		_, err := decodeInbound(k, v)
		return err
	})
	if outbox != nil && outbox.Sequence() < lastOut {
		c.problemf("bucket %s: the sequence is at %d but message %d is stored", bucketOutbox, outbox.Sequence(), lastOut)
	}
	slices.Sort(c.rep.Unknown)
}
