package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

var (
	goodOnce  sync.Once
	goodBytes []byte
)

// goodStore returns the bytes of a store with enough of everything to
// have branch pages, overflow pages and free pages (written once per test
// binary: 1 200 transactions); callers get their own copy.
func goodStore(t testing.TB) []byte {
	t.Helper()
	goodOnce.Do(func() { goodBytes = writeGoodStore(t) })
	if goodBytes == nil {
		t.Fatal("the good store could not be written")
	}
	return bytes.Clone(goodBytes)
}

func writeGoodStore(t testing.TB) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gpubot.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 1; i <= 300; i++ {
		id := fmt.Sprintf("r%d", i)
		if err := db.PutRequest(ctx, request(id)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			// Rewrite some: frees pages.
			if err := db.PutRequest(ctx, request(id, func(r *records.Request) { r.State = records.StateFinished })); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.AppendAudit(ctx, records.AuditEntry{At: t0, Actor: "ana", Action: "request", Target: id, Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
		if err := db.AppendUsage(ctx, records.UsageRecord{Request: id, Team: "vision", GPUs: 8, Start: t0.Add(time.Duration(i) * time.Minute), End: t0.Add(time.Duration(i)*time.Minute + time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := db.PutThread(ctx, id, records.Thread{Channel: "C1", TS: fmt.Sprintf("1700000000.%06d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Seen(ctx, "slack:env:1", t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := db.PutState(ctx, "sim", bytes.Repeat([]byte("x"), 20000)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// layout finds pages of each kind in a good store's bytes.
type layout struct {
	pageSize int
	pages    int // high-water mark
	byKind   map[string][]int
}

func layoutOf(t testing.TB, data []byte) layout {
	t.Helper()
	rep := checkFile(bytes.NewReader(data), int64(len(data)))
	if len(rep.problems) > 0 {
		t.Fatalf("the good store has problems: %v", rep.problems)
	}
	l := layout{pageSize: rep.pageSize, pages: int(rep.pages), byKind: map[string][]int{}}
	le := binary.LittleEndian
	for id := 2; id < l.pages; id++ {
		p := data[id*l.pageSize:]
		if _, ok := rep.inUse[uint64(id)]; !ok || le.Uint64(p) != uint64(id) {
			continue // free, or an overflow page
		}
		switch le.Uint16(p[8:]) {
		case flagBranch:
			l.byKind["branch"] = append(l.byKind["branch"], id)
		case flagLeaf:
			l.byKind["leaf"] = append(l.byKind["leaf"], id)
		case flagFreelist:
			l.byKind["freelist"] = append(l.byKind["freelist"], id)
		}
	}
	for _, k := range []string{"branch", "leaf", "freelist"} {
		if len(l.byKind[k]) == 0 {
			t.Fatalf("the good store has no %s page", k)
		}
	}
	return l
}

// mutate returns a copy of data changed by fn.
func mutate(data []byte, fn func(b []byte) []byte) []byte {
	return fn(append([]byte(nil), data...))
}

func zeroPage(l layout, id int) func([]byte) []byte {
	return func(b []byte) []byte {
		clear(b[id*l.pageSize : (id+1)*l.pageSize])
		return b
	}
}

func flip(off int) func([]byte) []byte {
	return func(b []byte) []byte {
		b[off] ^= 0xFF
		return b
	}
}

// plantRaw opens a good store's copy with bbolt directly, changes it with
// fn and returns its bytes: for damage that is valid bbolt.
func plantRaw(t testing.TB, data []byte, fn func(tx *bolt.Tx) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "planted.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func put(bucket, key, value string) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error { return tx.Bucket([]byte(bucket)).Put([]byte(key), []byte(value)) }
}

// TestDamagedStores is the corpus of damaged store files: each is
// refused by Open, Check and OpenReadOnly with an error that names the
// file and wraps the right sentinel, without a panic and without a byte
// of the file changing.
func TestDamagedStores(t *testing.T) {
	good := goodStore(t)
	l := layoutOf(t, good)
	ps := l.pageSize
	hwmBytes := l.pages * ps
	branch, leaf, free := l.byKind["branch"][0], l.byKind["leaf"][len(l.byKind["leaf"])/2], l.byKind["freelist"][0]
	le := binary.LittleEndian
	auditKey3 := string(auditKey(3))

	tests := map[string]struct {
		data []byte
		want error
		msg  string // in the error
	}{
		"zero-length file":                          {data: []byte{}, want: ErrDamaged, msg: "empty"},
		"truncated to 1 byte":                       {data: good[:1], want: ErrDamaged, msg: "not a bbolt database"},
		"truncated inside header page 0":            {data: good[:100], want: ErrDamaged},
		"truncated to header page 0":                {data: good[:ps], want: ErrDamaged, msg: "truncated"},
		"truncated to both header pages":            {data: good[:2*ps], want: ErrDamaged, msg: "truncated"},
		"truncated to half":                         {data: good[:hwmBytes/2], want: ErrDamaged, msg: "truncated"},
		"truncated by one page":                     {data: good[:hwmBytes-ps], want: ErrDamaged, msg: "truncated"},
		"truncated by one byte":                     {data: good[:hwmBytes-1], want: ErrDamaged, msg: "truncated"},
		"zeroed header page 0":                      {data: mutate(good, zeroPage(l, 0)), want: ErrDamaged, msg: "header page 0 is invalid"},
		"zeroed header page 1":                      {data: mutate(good, zeroPage(l, 1)), want: ErrDamaged, msg: "header page 1 is invalid"},
		"flipped byte in header page 0":             {data: mutate(good, flip(pageHeaderSize+40)), want: ErrDamaged, msg: "checksum mismatch"},
		"flipped byte in header page 1":             {data: mutate(good, flip(ps+pageHeaderSize+20)), want: ErrDamaged, msg: "header page 1 is invalid"},
		"header pages both zeroed":                  {data: mutate(mutate(good, zeroPage(l, 0)), zeroPage(l, 1)), want: ErrDamaged},
		"zeroed freelist page":                      {data: mutate(good, zeroPage(l, free)), want: ErrDamaged, msg: "freelist"},
		"flipped byte in freelist count":            {data: mutate(good, flip(free*ps+10)), want: ErrDamaged},
		"flipped byte in a freelist entry":          {data: mutate(good, flip(free*ps+pageHeaderSize+7)), want: ErrDamaged, msg: "freelist"},
		"zeroed branch page":                        {data: mutate(good, zeroPage(l, branch)), want: ErrDamaged, msg: fmt.Sprintf("page %d", branch)},
		"flipped byte in a branch element's child":  {data: mutate(good, flip(branch*ps+pageHeaderSize+8+6)), want: ErrDamaged},
		"flipped byte in a branch page's count":     {data: mutate(good, flip(branch*ps+10)), want: ErrDamaged},
		"zeroed leaf page":                          {data: mutate(good, zeroPage(l, leaf)), want: ErrDamaged, msg: fmt.Sprintf("page %d", leaf)},
		"flipped byte in a leaf element's key size": {data: mutate(good, flip(leaf*ps+pageHeaderSize+8+1)), want: ErrDamaged},
		"flipped byte in a leaf page's type":        {data: mutate(good, flip(leaf*ps+8)), want: ErrDamaged},
		"leaf page copied over another": {data: mutate(good, func(b []byte) []byte {
			other := l.byKind["leaf"][0]
			copy(b[leaf*ps:(leaf+1)*ps], b[other*ps:(other+1)*ps])
			return b
		}), want: ErrDamaged},
		"flipped first byte of a request's JSON": {data: mutate(good, func(b []byte) []byte {
			i := bytes.Index(b, []byte(`{"id":"r150"`))
			b[i] = '['
			return b
		}), want: ErrCorrupt, msg: "requests"},
		"random bytes": {data: bytes.Repeat([]byte{0xA5, 0x3C, 0x7E}, 20000), want: ErrDamaged, msg: "not a bbolt database"},
		"a text file":  {data: []byte(strings.Repeat("not a database\n", 1000)), want: ErrDamaged, msg: "not a bbolt database"},
		"all zeros":    {data: make([]byte, 64<<10), want: ErrDamaged},
		"page size field changed and re-checksummed": {data: mutate(good, func(b []byte) []byte {
			m := b[pageHeaderSize:]
			le.PutUint32(m[8:], 8192)
			h := fnvSum(m[:56])
			le.PutUint64(m[56:], h)
			return b
		}), want: ErrDamaged},
		"foreign bbolt file": {data: plantRaw(t, good, func(tx *bolt.Tx) error {
			if err := tx.DeleteBucket(bucketMeta); err != nil {
				return err
			}
			_, err := tx.CreateBucket([]byte("members"))
			return err
		}), want: ErrSchema, msg: "did not write it"},
		"newer schema":                {data: plantRaw(t, good, put("meta", "schema", "2")), want: ErrSchema, msg: "newer"},
		"garbage schema":              {data: plantRaw(t, good, put("meta", "schema", "two")), want: ErrSchema, msg: "unknown schema version"},
		"undecodable request":         {data: plantRaw(t, good, put("requests", "r7", "{not json")), want: ErrCorrupt, msg: `"r7"`},
		"request under another ID":    {data: plantRaw(t, good, put("requests", "r8", `{"id":"r9"}`)), want: ErrCorrupt, msg: `record has ID "r9"`},
		"request past the ID counter": {data: plantRaw(t, good, put("requests", "r999", `{"id":"r999"}`)), want: ErrCorrupt, msg: "ID counter"},
		"undecodable audit entry":     {data: plantRaw(t, good, put("audit", auditKey3, "[")), want: ErrCorrupt, msg: "audit"},
		"audit entry missing":         {data: plantRaw(t, good, func(tx *bolt.Tx) error { return tx.Bucket(bucketAudit).Delete([]byte(auditKey3)) }), want: ErrCorrupt, msg: "missing"},
		"undecodable usage record": {data: plantRaw(t, good, func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketUsage).Cursor()
			k, _ := c.First()
			return tx.Bucket(bucketUsage).Put(bytes.Clone(k), []byte("{"))
		}), want: ErrCorrupt, msg: "usage"},
		"usage index to nowhere":           {data: plantRaw(t, good, put("usage-index", "\x00\x00\x00\x00\x00\x00\x00\x01r1", "nowhere")), want: ErrCorrupt, msg: "points at no usage record"},
		"undecodable thread":               {data: plantRaw(t, good, put("threads", "r3", "thread")), want: ErrCorrupt, msg: "threads"},
		"undecodable zombie":               {data: plantRaw(t, good, put("zombies", "\x00\x00\x00\x00\x00\x00\x00\x02", "{")), want: ErrCorrupt, msg: "zombies"},
		"dedupe expiry of the wrong size":  {data: plantRaw(t, good, put("dedupe", "slack:env:1", "soon")), want: ErrCorrupt, msg: "dedupe"},
		"usage-max-span of the wrong size": {data: plantRaw(t, good, put("meta", "usage-max-span", "1h")), want: ErrCorrupt, msg: "usage-max-span"},
		"undecodable outbox message":       {data: plantRaw(t, good, put("outbox", "\x00\x00\x00\x00\x00\x00\x00\x01", "{")), want: ErrCorrupt, msg: "outbox"},
		"outbox message under another sequence": {data: plantRaw(t, good, func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketOutbox)
			if err := b.SetSequence(2); err != nil {
				return err
			}
			return b.Put(seqKey(2), []byte(`{"seq":1,"message":"e30="}`))
		}), want: ErrCorrupt, msg: "record has sequence 1"},
		"outbox message past the sequence": {data: plantRaw(t, good, put("outbox", "\x00\x00\x00\x00\x00\x00\x00\x09", `{"seq":9,"message":"e30="}`)), want: ErrCorrupt, msg: "sequence is at"},
		"undecodable inbox delivery":       {data: plantRaw(t, good, put("inbox", "slack:env:9", "{")), want: ErrCorrupt, msg: "inbox"},
		"a bucket where records belong": {data: plantRaw(t, good, func(tx *bolt.Tx) error {
			_, err := tx.Bucket(bucketRequests).CreateBucket([]byte("r5x"))
			return err
		}), want: ErrCorrupt, msg: "nested bucket"},
	}
	if len(tests) < 40 {
		t.Fatalf("the corpus has %d kinds of damage", len(tests))
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gpubot.db")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s accepted it", what)
				}
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: %v, want %v", what, err, tc.want)
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("%s: %q does not name the file", what, err)
				}
				if !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("%s: %q does not say %q", what, err, tc.msg)
				}
			}
			rep, err := Check(path)
			check("Check", err)
			if rep.OK() {
				t.Errorf("Check's report lists no problem: %+v", rep)
			}
			db, err := Open(path, WithLockTimeout(0))
			if err == nil {
				db.Close()
			}
			check("Open", err)
			db, err = OpenReadOnly(path, WithLockTimeout(0))
			if err == nil {
				db.Close()
			}
			check("OpenReadOnly", err)

			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(after, tc.data) {
				t.Errorf("the refused file changed (%d bytes before, %d after)", len(tc.data), len(after))
			}
		})
	}
}

func fnvSum(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// TestCheckGoodStore: a healthy store passes, with its records counted,
// and the file is not written by Check, OpenReadOnly or reading.
func TestCheckGoodStore(t *testing.T) {
	good := goodStore(t)
	path := filepath.Join(t.TempDir(), "gpubot.db")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(path)
	if err != nil || !rep.OK() {
		t.Fatalf("Check: %v, %v", err, rep.Problems)
	}
	for bucket, n := range map[string]int{"requests": 300, "audit": 300, "usage": 300, "usage-index": 300, "threads": 300, "dedupe": 1, "state": 1} {
		if rep.Records[bucket] != n {
			t.Errorf("Records[%s] = %d, want %d", bucket, rep.Records[bucket], n)
		}
	}
	if rep.Schema != schemaVersion || rep.PageSize == 0 || rep.Transaction == 0 || rep.Size != int64(len(good)) {
		t.Errorf("report: %+v", rep)
	}
	db, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if rs, err := db.ListRequests(ctx, nil); err != nil || len(rs) != 300 {
		t.Errorf("ListRequests: %d, %v", len(rs), err)
	}
	if err := db.PutRequest(ctx, request("r1")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("PutRequest on a read-only store: %v, want ErrReadOnly", err)
	}
	if _, err := db.Seen(ctx, "k", t0, time.Hour); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Seen on a read-only store: %v, want ErrReadOnly", err)
	}
	// Two readers at once are fine; a writer is not let in.
	db2, err := OpenReadOnly(path)
	if err != nil {
		t.Errorf("a second OpenReadOnly: %v", err)
	} else {
		db2.Close()
	}
	if w, err := Open(path, WithLockTimeout(0)); !errors.Is(err, ErrLocked) {
		if w != nil {
			w.Close()
		}
		t.Errorf("Open while a reader holds the file: %v, want ErrLocked", err)
	}
	db.Close()
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, good) {
		t.Error("checking and reading changed the file")
	}
}

// TestCheckWhileRunning: Check and OpenReadOnly of a file a DB has open
// for writing fail with ErrLocked instead of reading it mid-write.
func TestCheckWhileRunning(t *testing.T) {
	db := mustOpen(t)
	if _, err := Check(db.Path(), WithLockTimeout(0)); !errors.Is(err, ErrLocked) {
		t.Errorf("Check: %v, want ErrLocked", err)
	}
	if r, err := OpenReadOnly(db.Path(), WithLockTimeout(0)); !errors.Is(err, ErrLocked) {
		if r != nil {
			r.Close()
		}
		t.Errorf("OpenReadOnly: %v, want ErrLocked", err)
	}
}

// TestDamageWhileRunning: a page damaged under a running DB (here: a
// branch page's child pointer sent far past the end of the file, which
// makes bbolt read outside its memory map) gives ErrDamaged, not a crash,
// and the DB stops using the file.
func TestDamageWhileRunning(t *testing.T) {
	good := goodStore(t)
	l := layoutOf(t, good)
	path := filepath.Join(t.TempDir(), "gpubot.db")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Every branch page's children point a terabyte away.
	for _, id := range l.byKind["branch"] {
		off := int64(id * l.pageSize)
		var head [pageHeaderSize]byte
		if _, err := f.ReadAt(head[:], off); err != nil {
			t.Fatal(err)
		}
		n := int(binary.LittleEndian.Uint16(head[10:]))
		for i := range n {
			var far [8]byte
			binary.LittleEndian.PutUint64(far[:], 1<<28+uint64(i))
			if _, err := f.WriteAt(far[:], off+pageHeaderSize+int64(i*elementSize)+8); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.Close()
	ctx := context.Background()
	_, err = db.ListRequests(ctx, nil)
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("ListRequests on a damaged file: %v, want ErrDamaged", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("%q does not name the file", err)
	}
	if err := db.PutThread(ctx, "r1", records.Thread{Channel: "C1"}); !errors.Is(err, ErrDamaged) {
		t.Errorf("a write after the damage: %v, want ErrDamaged", err)
	}
}
