package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
)

// This file reads bbolt's file format on its own, from the file with
// ReadAt and every offset bounds-checked, so that a damaged file is
// described instead of crashing the process: bbolt itself reads pages
// through a memory map with unchecked pointer arithmetic, and a page ID
// or offset past the end of the map faults (SIGSEGV or SIGBUS), which
// no recover() catches. Only once this walk finds nothing wrong does
// Check hand the file to bbolt.
//
// The layout (bbolt 1.x, data format version 2, little-endian on every
// platform gpubot runs on):
//
//	page header (16 bytes): id u64, flags u16, count u16, overflow u32
//	meta (pages 0 and 1, after the header): magic u32, version u32,
//	    pageSize u32, flags u32, root bucket {root u64, sequence u64},
//	    freelist u64, pgid u64 (high-water mark), txid u64, checksum u64
//	    (FNV-64a of the meta bytes before it)
//	branch element (16 bytes): pos u32, ksize u32, pgid u64
//	leaf element (16 bytes): flags u32, pos u32, ksize u32, vsize u32;
//	    pos is counted from the element's own offset
//	bucket value: {root u64, sequence u64}, then, when root is 0, an
//	    inline leaf page
//	freelist page: count page IDs after the header; a count of 0xFFFF
//	    means the real count is the first u64

const (
	boltMagic         = 0xED0CDAED
	boltVersion       = 2
	pageHeaderSize    = 16
	elementSize       = 16
	bucketHeaderSize  = 16
	metaChecksumStart = pageHeaderSize + 56
	flagBranch        = 0x01
	flagLeaf          = 0x02
	flagMeta          = 0x04
	flagFreelist      = 0x10
	leafBucketFlag    = 0x01
	noFreelist        = math.MaxUint64
	maxTreeDepth      = 64
	// maxProblems bounds how many problems one check reports.
	maxProblems = 20
)

// boltMeta is one decoded meta page.
type boltMeta struct {
	page     int // 0 or 1
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
	err      error // why the page is invalid, or nil
}

// fileReport is what the walk found out about the file.
type fileReport struct {
	size     int64
	pageSize int
	pages    uint64 // high-water mark of the current meta
	txid     uint64
	freelist uint64            // page of the current freelist
	inUse    map[uint64]string // page → what uses it, once walked
	problems []string
}

func (r *fileReport) problemf(format string, args ...any) {
	if len(r.problems) < maxProblems {
		r.problems = append(r.problems, fmt.Sprintf(format, args...))
	} else if len(r.problems) == maxProblems {
		r.problems = append(r.problems, "and more")
	}
}

// walker walks the pages of one file.
type walker struct {
	r    io.ReaderAt
	rep  *fileReport
	ps   uint64            // page size
	hwm  uint64            // pages below this are in use or free
	used map[uint64]string // page → what uses it
}

// checkFile checks the structure of the bbolt file r of the given size.
// It never panics and never reads outside the file.
func checkFile(r io.ReaderAt, size int64) *fileReport {
	rep := &fileReport{size: size}
	if size == 0 {
		rep.problemf("the file is empty (0 bytes)")
		return rep
	}
	m0 := readMeta(r, size, 0, 0)
	ps := m0.pageSize
	if m0.err != nil {
		// Page 0 does not say the page size: find page 1 the way bbolt
		// does, by trying the sizes it supports.
		ps = 0
		for s := uint32(1024); s <= 1<<24 && int64(s) < size; s <<= 1 {
			if m := readMeta(r, size, 1, s); m.err == nil {
				ps = s
				break
			}
		}
	}
	if ps == 0 {
		if isMagicless(r, size) {
			rep.problemf("it is not a bbolt database (neither header page has bbolt's signature)")
		} else {
			rep.problemf("header page 0 is invalid (%v) and no valid header page 1 was found", m0.err)
		}
		return rep
	}
	m1 := readMeta(r, size, 1, ps)
	for _, m := range []boltMeta{m0, m1} {
		if m.err != nil {
			rep.problemf("header page %d is invalid: %v", m.page, m.err)
		}
	}
	if m0.err == nil && m1.err == nil && m0.pageSize != m1.pageSize {
		rep.problemf("the two header pages disagree on the page size (%d and %d)", m0.pageSize, m1.pageSize)
		return rep
	}
	cur := m0
	if m0.err != nil || m1.err == nil && m1.txid > m0.txid {
		cur = m1
	}
	if cur.err != nil {
		return rep
	}
	rep.pageSize, rep.pages, rep.txid, rep.freelist = int(ps), cur.pgid, cur.txid, cur.freelist
	if need := cur.pgid * uint64(ps); need > uint64(size) {
		rep.problemf("the file is truncated: %d bytes, but its header (transaction %d) says %d pages of %d bytes (%d bytes)",
			size, cur.txid, cur.pgid, ps, need)
		return rep
	}
	if len(rep.problems) > 0 {
		// A header page is bad; the other one's tree may have been
		// overwritten by the transaction that wrote it, so walking it
		// would only add noise.
		return rep
	}
	w := &walker{r: r, rep: rep, ps: uint64(ps), hwm: cur.pgid, used: map[uint64]string{0: "header page 0", 1: "header page 1"}}
	rep.inUse = w.used
	w.tree(cur.root, "the root bucket", nil, nil, 0)
	free := w.freelist(cur.freelist)
	if len(rep.problems) > 0 {
		return rep
	}
	for id := uint64(2); id < w.hwm; id++ {
		_, inUse := w.used[id]
		switch {
		case inUse && free[id]:
			rep.problemf("page %d is both in use (%s) and listed as free", id, w.used[id])
		case !inUse && !free[id]:
			rep.problemf("page %d is neither in use nor free (lost)", id)
		}
	}
	return rep
}

// readMeta reads header page n, whose page size is ps (0: read it from
// page 0 itself).
func readMeta(r io.ReaderAt, size int64, n int, ps uint32) boltMeta {
	m := boltMeta{page: n}
	off := int64(n) * int64(ps)
	buf := make([]byte, metaChecksumStart+8)
	if off+int64(len(buf)) > size {
		m.err = fmt.Errorf("the file ends before it (%d bytes)", size)
		return m
	}
	if _, err := r.ReadAt(buf, off); err != nil {
		m.err = fmt.Errorf("reading it: %w", err)
		return m
	}
	le := binary.LittleEndian
	meta := buf[pageHeaderSize:]
	m.pageSize = le.Uint32(meta[8:])
	m.root = le.Uint64(meta[16:])
	m.freelist = le.Uint64(meta[32:])
	m.pgid = le.Uint64(meta[40:])
	m.txid = le.Uint64(meta[48:])
	h := fnv.New64a()
	h.Write(meta[:56])
	switch {
	case le.Uint32(meta[0:]) != boltMagic:
		m.err = errors.New("no bbolt signature")
	case le.Uint32(meta[4:]) != boltVersion:
		m.err = fmt.Errorf("format version %d, not %d", le.Uint32(meta[4:]), boltVersion)
	case le.Uint64(meta[56:]) != h.Sum64():
		m.err = errors.New("checksum mismatch")
	case le.Uint16(buf[8:]) != flagMeta || le.Uint64(buf[0:]) != uint64(n):
		m.err = fmt.Errorf("page header says page %d of type %#x", le.Uint64(buf[0:]), le.Uint16(buf[8:]))
	case m.pageSize < 1024 || m.pageSize&(m.pageSize-1) != 0 || m.pageSize > 1<<24:
		m.err = fmt.Errorf("page size %d", m.pageSize)
	case ps != 0 && m.pageSize != ps:
		m.err = fmt.Errorf("page size %d where %d was expected", m.pageSize, ps)
	case m.pgid < 4 || m.root < 2 || m.root >= m.pgid || m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid):
		m.err = fmt.Errorf("page numbers out of range (root %d, freelist %d, %d pages)", m.root, m.freelist, m.pgid)
	}
	return m
}

// isMagicless reports whether neither place a header could be holds
// bbolt's magic number: the file is something else altogether.
func isMagicless(r io.ReaderAt, size int64) bool {
	var b [4]byte
	for _, off := range []int64{pageHeaderSize, 4096 + pageHeaderSize} {
		if off+4 <= size {
			if _, err := r.ReadAt(b[:], off); err == nil && binary.LittleEndian.Uint32(b[:]) == boltMagic {
				return false
			}
		}
	}
	return true
}

// page reads page id and its overflow pages, after checking that they
// lie below the high-water mark and are not used twice.
func (w *walker) page(id uint64, what string) ([]byte, bool) {
	if id < 2 || id >= w.hwm {
		w.rep.problemf("%s points at page %d, outside the file's pages 2–%d", what, id, w.hwm-1)
		return nil, false
	}
	if by, ok := w.used[id]; ok {
		w.rep.problemf("page %d is used twice: by %s and by %s", id, by, what)
		return nil, false
	}
	head := make([]byte, pageHeaderSize)
	if _, err := w.r.ReadAt(head, int64(id*w.ps)); err != nil {
		w.rep.problemf("reading page %d (%s): %v", id, what, err)
		return nil, false
	}
	le := binary.LittleEndian
	if got := le.Uint64(head); got != id {
		w.rep.problemf("page %d (%s) says it is page %d", id, what, got)
		return nil, false
	}
	over := uint64(le.Uint32(head[12:]))
	if over >= w.hwm-id {
		w.rep.problemf("page %d (%s) runs %d pages past the file's %d pages", id, what, over, w.hwm)
		return nil, false
	}
	for i := id; i <= id+over; i++ {
		if by, ok := w.used[i]; ok {
			w.rep.problemf("page %d is used twice: by %s and by %s", i, by, what)
			return nil, false
		}
		w.used[i] = what
	}
	buf := make([]byte, (over+1)*w.ps)
	if _, err := w.r.ReadAt(buf, int64(id*w.ps)); err != nil {
		w.rep.problemf("reading page %d (%s): %v", id, what, err)
		return nil, false
	}
	return buf, true
}

// tree checks the B+tree rooted at page id: every key within [lo, hi),
// keys ascending, children and nested buckets in turn.
func (w *walker) tree(id uint64, what string, lo, hi []byte, depth int) {
	if depth > maxTreeDepth {
		w.rep.problemf("%s is nested more than %d levels deep", what, maxTreeDepth)
		return
	}
	p, ok := w.page(id, what)
	if !ok {
		return
	}
	w.nodes(p, id, what, lo, hi, depth)
}

// nodes checks the elements of one page (p, page id; id 0 for an inline
// page held in a bucket value).
func (w *walker) nodes(p []byte, id uint64, what string, lo, hi []byte, depth int) {
	le := binary.LittleEndian
	flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
	where := fmt.Sprintf("page %d (%s)", id, what)
	if id == 0 {
		where = what + " (inline)"
	}
	if flags != flagBranch && flags != flagLeaf {
		w.rep.problemf("%s has type %#x, not a branch or leaf page", where, flags)
		return
	}
	if pageHeaderSize+count*elementSize > len(p) {
		w.rep.problemf("%s claims %d elements, more than fit", where, count)
		return
	}
	if flags == flagBranch && count == 0 {
		w.rep.problemf("%s is a branch with no children", where)
		return
	}
	type kv struct {
		key, val []byte
		child    uint64
		bucket   bool
	}
	elems := make([]kv, 0, count)
	for i := range count {
		off := pageHeaderSize + i*elementSize
		e := p[off : off+elementSize]
		var k kv
		var pos, ks, vs uint64
		if flags == flagBranch {
			pos, ks, k.child = uint64(le.Uint32(e[0:])), uint64(le.Uint32(e[4:])), le.Uint64(e[8:])
		} else {
			ef := le.Uint32(e[0:])
			if ef&^leafBucketFlag != 0 {
				w.rep.problemf("%s element %d has unknown flags %#x", where, i, ef)
				return
			}
			k.bucket = ef&leafBucketFlag != 0
			pos, ks, vs = uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
		}
		start := uint64(off) + pos
		if start+ks+vs > uint64(len(p)) {
			w.rep.problemf("%s element %d points past the end of the page", where, i)
			return
		}
		k.key, k.val = p[start:start+ks], p[start+ks:start+ks+vs]
		if i > 0 && bytes.Compare(elems[i-1].key, k.key) >= 0 {
			w.rep.problemf("%s keys out of order at element %d", where, i)
			return
		}
		if i == 0 && lo != nil && bytes.Compare(k.key, lo) < 0 || hi != nil && bytes.Compare(k.key, hi) >= 0 {
			w.rep.problemf("%s key %d lies outside the range its parent gives it", where, i)
			return
		}
		elems = append(elems, k)
	}
	for i, k := range elems {
		if flags == flagBranch {
			next := hi
			if i+1 < len(elems) {
				next = elems[i+1].key
			}
			w.tree(k.child, what, k.key, next, depth+1)
			continue
		}
		if !k.bucket {
			continue
		}
		name := fmt.Sprintf("bucket %q", k.key)
		if what != "the root bucket" {
			name = fmt.Sprintf("bucket %q in %s", k.key, what)
		}
		if len(k.val) < bucketHeaderSize {
			w.rep.problemf("%s has a %d-byte header, want %d", name, len(k.val), bucketHeaderSize)
			continue
		}
		root := le.Uint64(k.val)
		if root != 0 {
			w.tree(root, name, nil, nil, depth+1)
			continue
		}
		inline := k.val[bucketHeaderSize:]
		if len(inline) < pageHeaderSize {
			w.rep.problemf("%s is inline but holds no page", name)
			continue
		}
		if le.Uint16(inline[8:]) != flagLeaf {
			w.rep.problemf("%s is inline but its page is not a leaf", name)
			continue
		}
		w.nodes(inline, 0, name, nil, nil, depth+1)
	}
}

// freelist checks the freelist page and returns the free page IDs.
func (w *walker) freelist(id uint64) map[uint64]bool {
	free := map[uint64]bool{}
	if id == noFreelist {
		w.rep.problemf("the file has no freelist (it was written with NoFreelistSync, which gpubot never uses)")
		return free
	}
	p, ok := w.page(id, "the freelist")
	if !ok {
		return free
	}
	le := binary.LittleEndian
	if f := le.Uint16(p[8:]); f != flagFreelist {
		w.rep.problemf("page %d (the freelist) has type %#x", id, f)
		return free
	}
	start, n := uint64(pageHeaderSize), uint64(le.Uint16(p[10:]))
	if n == 0xFFFF {
		if len(p) < pageHeaderSize+8 {
			w.rep.problemf("page %d (the freelist) is cut short", id)
			return free
		}
		n, start = le.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if n > (uint64(len(p))-start)/8 {
		w.rep.problemf("page %d (the freelist) lists %d pages, more than fit", id, n)
		return free
	}
	for i := range n {
		f := le.Uint64(p[start+8*i:])
		switch {
		case f < 2 || f >= w.hwm:
			w.rep.problemf("the freelist lists page %d, outside the file's pages 2–%d", f, w.hwm-1)
		case free[f]:
			w.rep.problemf("the freelist lists page %d twice", f)
		}
		free[f] = true
	}
	return free
}
