package allocator

import (
	"slices"
	"time"
)

// Preemption searches are the expensive part of a busy cycle, and most of
// them fail the same way cycle after cycle: even with every candidate
// victim gone, the pods would not fit. A shadow answers that question
// without walking the candidates: it keeps, for one candidate set, how
// many nodes (of the flavor, of each rack and of each block) would have
// each free count if the set were gone, plus the set's GPUs. Shadows
// are built on first use and then kept up to date at every real
// admission and release, like the snapshot's own buckets; a check costs
// the size of the buckets.
//
// A candidate set is the preemptor's queue's own candidates, named by
// the queue, flavor and priority. With LowerOrNewerEqualPriority it also
// depends on the preemptor's Created: the shadow keeps the last one
// asked for and moves to another by adding or removing the
// equal-priority workloads created in between. A reclaim search (other
// queues' candidates too) is not filtered by a shadow: greedyFits
// decides it exactly, and the check with every candidate gone passed
// almost always (17 900 of 19 000 calls in the benchmark) while keeping
// such a shadow cost moving a queue's whole list each time it started
// or stopped borrowing (BENCHMARKS.md, issue 12, fifth pass). Shadows
// are caches: clones start without them, and unused ones are dropped
// after a few cycles.

type shadowKey struct {
	q, f int32
	prio int32
}

type shadow struct {
	key     shadowKey
	created admKey    // LowerOrNewerEqualPriority: equal priority counts if newer (prio, Created)
	cand    []int32   // per flavor node position: candidates' GPUs there
	cnt     []int32   // nodes per free count with the candidates gone
	rack    [][]int32 // per rack of the flavor, by position
	block   [][]int32 // per block of the flavor, by position
	own     int       // candidates' GPUs
	used    uint64    // cycle of last use
}

type shadowSet struct {
	byKey     map[shadowKey]*shadow
	perFlavor [][]*shadow
}

// maxShadows bounds the shadows a snapshot keeps.
const maxShadows = 1024

// isCand reports whether admitted workload v belongs to sh's set.
func (s *Snapshot) isCand(sh *shadow, v int32) bool {
	x := &s.ws[v]
	w := &x.w
	q := int(sh.key.q)
	qi := &s.ix.queues[q]
	return int(x.q) == q && qi.within != polNever && (w.Priority < sh.key.prio ||
		(qi.within == polLowerOrNewerEqual && w.Priority == sh.key.prio && (x.crSec > sh.created.sec ||
			(x.crSec == sh.created.sec && x.crNs > sh.created.ns))))
}

// shadowFor returns the up-to-date shadow for the given set, except,
// with LowerOrNewerEqualPriority, for its Created threshold: sh.created
// may differ from head's (see fitsWithout).
func (s *Snapshot) shadowFor(q int, head *Workload, f int) *shadow {
	k := shadowKey{q: int32(q), f: int32(f), prio: head.Priority}
	if s.shadows == nil {
		s.shadows = &shadowSet{byKey: map[shadowKey]*shadow{}, perFlavor: make([][]*shadow, len(s.ix.flavors))}
	}
	sh := s.shadows.byKey[k]
	if sh == nil {
		if len(s.shadows.byKey) >= maxShadows {
			s.pruneShadows(s.cycleNo + 1)
		}
		sh = &shadow{key: k, created: createdKey(head)}
		s.shadows.byKey[k] = sh
		s.shadows.perFlavor[f] = append(s.shadows.perFlavor[f], sh)
		s.buildShadow(sh)
	}
	sh.used = s.cycleNo
	return sh
}

// createdKey is w's priority and Created as the admitted lists' keys.
func createdKey(w *Workload) admKey {
	return admKey{prio: w.Priority, sec: w.Created.Unix(), ns: int32(w.Created.Nanosecond())}
}

// moveCreated changes a LowerOrNewerEqualPriority shadow's Created
// threshold to t (of the shadow's priority): equal-priority workloads of
// the queue created between the old threshold and t join or leave the
// set.
func (s *Snapshot) moveCreated(sh *shadow, t admKey) {
	q, f := int(sh.key.q), int(sh.key.f)
	lo, hi, sign := sh.created, t, int32(-1) // (lo, hi] leave
	if createdKeyCmp(t, sh.created) < 0 {
		lo, hi, sign = t, sh.created, 1 // (lo, hi] join
	}
	// Equal priority, Created in (lo, hi]: a run of byCreated.
	l := &s.adm[q][f]
	keys := l.ckeys
	i, _ := slices.BinarySearchFunc(keys, lo, func(k, lo admKey) int {
		if createdKeyCmp(k, lo) > 0 {
			return 1
		}
		return -1
	})
	for ; i < len(keys) && createdKeyCmp(keys[i], hi) <= 0; i++ {
		x := &s.ws[l.byCreated[i]]
		sh.own += int(sign) * x.w.GPUs
		for _, n := range x.nodes {
			ni := &s.ix.npos[n]
			old := s.nodeFree[n] + sh.cand[ni.pos]
			sh.cand[ni.pos] += sign * x.per
			sh.move(ni, old, old+sign*x.per)
		}
	}
	sh.created = t
}

// move records that node ni's free count with the candidates gone went
// from old to h.
func (sh *shadow) move(ni *nodePos, old, h int32) {
	sh.cnt[old]--
	sh.cnt[h]++
	sh.rack[ni.rackPos][old]--
	sh.rack[ni.rackPos][h]++
	sh.block[ni.blockPos][old]--
	sh.block[ni.blockPos][h]++
}

func (s *Snapshot) buildShadow(sh *shadow) {
	f := int(sh.key.f)
	fi := &s.ix.flavors[f]
	sh.cand = resize(sh.cand, len(fi.nodes))
	sh.cnt = resize(sh.cnt, fi.maxGPUs+1)
	sh.rack = resize2(sh.rack, len(fi.racks), fi.maxGPUs+1)
	sh.block = resize2(sh.block, len(fi.blocks), fi.maxGPUs+1)
	sh.own = 0
	for _, v := range s.adm[sh.key.q][f].slots {
		if !s.isCand(sh, v) {
			continue
		}
		x := &s.ws[v]
		for _, n := range x.nodes {
			sh.cand[s.ix.npos[n].pos] += x.per
		}
		sh.own += x.w.GPUs
	}
	for p, n := range fi.nodes {
		h := s.nodeFree[n] + sh.cand[p]
		ni := &s.ix.npos[n]
		sh.cnt[h]++
		sh.rack[ni.rackPos][h]++
		sh.block[ni.blockPos][h]++
	}
}

func resize(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	b = b[:n]
	clear(b)
	return b
}

func resize2(b [][]int32, n, m int) [][]int32 {
	if cap(b) < n {
		b = make([][]int32, n)
	}
	b = b[:n]
	for i := range b {
		b[i] = resize(b[i], m)
	}
	return b
}

// shadowUpdate keeps the shadows of admitted workload v's flavor in step
// after v was admitted (sign +1, the GPUs already taken) or released
// (sign −1, the GPUs already given back).
func (s *Snapshot) shadowUpdate(v int32, sign int32) {
	if s.shadows == nil {
		return
	}
	x := &s.ws[v]
	f := int(x.fl)
	for _, sh := range s.shadows.perFlavor[f] {
		if s.isCand(sh, v) {
			for _, n := range x.nodes {
				sh.cand[s.ix.npos[n].pos] += sign * x.per
			}
			sh.own += int(sign) * x.w.GPUs
			continue
		}
		for i, n := range x.nodes {
			if dup(x.nodes[:i], n) {
				continue
			}
			ni := &s.ix.npos[n]
			h := s.nodeFree[n] + sh.cand[ni.pos]
			sh.move(ni, h+sign*x.per*int32(count(x.nodes, n)), h)
		}
	}
}

func dup(nodes []int32, n int32) bool {
	for _, m := range nodes {
		if m == n {
			return true
		}
	}
	return false
}

func count(nodes []int32, n int32) int {
	c := 0
	for _, m := range nodes {
		if m == n {
			c++
		}
	}
	return c
}

// pruneShadows drops shadows last used before cycle keepFrom−2.
func (s *Snapshot) pruneShadows(keepFrom uint64) {
	if s.shadows == nil {
		return
	}
	for f, list := range s.shadows.perFlavor {
		kept := list[:0]
		for _, sh := range list {
			if sh.used+2 >= keepFrom {
				kept = append(kept, sh)
			} else {
				delete(s.shadows.byKey, sh.key)
			}
		}
		clear(list[len(kept):])
		s.shadows.perFlavor[f] = kept
	}
}

// fitsWithout reports whether the head workload of queue q would fit on
// c (by quota, borrowing allowed, and by placement) if its queue's own
// candidates were gone.
//
// With LowerOrNewerEqualPriority the shadow is moved to head's Created
// only if its set as it stands does not decide: a later Created only
// takes equal-priority workloads out of the set and an earlier one only
// adds them, and with fewer candidates gone the head fits no better (by
// quota or on the nodes), so a set that will shrink and fails now fails
// after the move, and one that will grow and fits now fits after it.
// Within a Schedule call the heads come in Created order, so most
// checks are of the first kind and most of them fail: their moves are
// not made (the next check that needs the move makes it at once).
func (s *Snapshot) fitsWithout(q int, head *Workload, topo Level, c cand, place bool) bool {
	sh := s.shadowFor(q, head, int(c.f))
	if t := createdKey(head); s.ix.queues[q].within == polLowerOrNewerEqual && t != sh.created {
		now := s.shadowFits(sh, q, head, topo, c, place)
		if later := createdKeyCmp(t, sh.created) > 0; later != now {
			return now
		}
		s.moveCreated(sh, t)
	}
	return s.shadowFits(sh, q, head, topo, c, place)
}

// shadowFits is fitsWithout on sh's set as it stands.
func (s *Snapshot) shadowFits(sh *shadow, q int, head *Workload, topo Level, c cand, place bool) bool {
	f := int(c.f)
	if head.GPUs > s.availableWith(q, f, s.used[q][f]-sh.own, 0) {
		return false
	}
	if !place {
		return true
	}
	k, pods := int(c.per), int(c.pods)
	switch topo {
	case LevelHost:
		for v := pods * k; v < len(sh.cnt); v++ {
			if sh.cnt[v] > 0 {
				return true
			}
		}
		return false
	case LevelRack:
		for _, cnt := range sh.rack {
			if podCap(cnt, k, pods) {
				return true
			}
		}
		return false
	case LevelBlock:
		for _, cnt := range sh.block {
			if podCap(cnt, k, pods) {
				return true
			}
		}
		return false
	}
	return podCap(sh.cnt, k, pods)
}

// pcache remembers that Kueue's reclaim search failed for a class's head
// on one candidate flavor although fitsWithout passed (other queues stop
// being candidates once back at nominal). It stays valid only while
// nothing is freed on the flavor, no queue starts or stops borrowing
// there, and no borrowing queue admits more there.
type pcache struct {
	ok      bool
	prio    int32     // the head it was computed for: later heads of
	created time.Time // lower priority or later Created have fewer candidates
	freed   int64
	flip    uint64
	reclaim uint64
}

func (s *Snapshot) cachedMiss(c *class, i int, head *Workload, place bool) bool {
	if len(c.pcache) == 0 {
		return false
	}
	e := &c.pcache[2*i+b2i(place)]
	f := c.cands[i].f
	return e.ok && (head.Priority < e.prio || (head.Priority == e.prio && !head.Created.Before(e.created))) &&
		e.freed == s.freedGPUs[f] && e.flip == s.flipGen[f] && e.reclaim == s.reclaimGen[f]
}

func (s *Snapshot) rememberMiss(c *class, i int, head *Workload, place bool) {
	if len(c.pcache) != 2*len(c.cands) {
		c.pcache = make([]pcache, 2*len(c.cands))
	}
	f := c.cands[i].f
	c.pcache[2*i+b2i(place)] = pcache{ok: true, prio: head.Priority, created: head.Created,
		freed: s.freedGPUs[f], flip: s.flipGen[f], reclaim: s.reclaimGen[f]}
}

// liftScratch prepares the scratch free counts used by greedyFits: h[n]
// is node n's free count with some workloads lifted off, valid where
// seen[n].
func (s *Snapshot) liftScratch() *scratch {
	sc := s.scratchBuf()
	if len(sc.h) != len(s.nodeFree) {
		sc.h = make([]int32, len(s.nodeFree))
		sc.seen = make([]bool, len(s.nodeFree))
	}
	sc.touched = sc.touched[:0]
	return sc
}

func (s *Snapshot) unlift(sc *scratch) {
	for _, n := range sc.touched {
		sc.seen[n] = false
	}
	sc.touched = sc.touched[:0]
}

// podCount is how many pods of k GPUs the nodes counted by cnt can host.
func podCount(cnt []int32, k int) int {
	have := 0
	for v := k; v < len(cnt); v++ {
		have += int(cnt[v]) * (v / k)
	}
	return have
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
