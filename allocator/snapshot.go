package allocator

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Snapshot is the state of a cluster at one instant: which workloads are
// pending, which are admitted where, how much of each quota and node is
// used, and each queue's decayed usage. It is not safe for concurrent use;
// Clone it to ask what-if questions in parallel.
type Snapshot struct {
	c   *Cluster
	ix  *index
	now time.Time
	ver uint64 // bumped by every mutation; undo functions check it

	ws        []wl
	byID      map[string]int32
	freeSlots []int32

	nodeFree  []int32
	fl        []flState
	rackCnt   [][]int32 // per rack: number of nodes per free count
	blockCnt  [][]int32
	rackFree  []int // per rack: free GPUs
	blockFree []int

	used     [][]int // [queue][flavor] admitted GPUs
	running  []int   // [queue] admitted GPUs over all flavors
	cohortC  [][]int // [cohort][flavor] Σ max(0, used - guaranteed)
	usage    []float64
	nPending []int // [queue]

	adm      [][]admList // [queue][flavor]
	classes  []class
	classIdx map[classKey]int32

	// The general engine's state (nil for a simple cluster): usage of
	// every cohort-tree node per flavor × resource, and each node's free
	// CPU and memory (where some node counts them).
	tuse    [][]int64
	nodeCPU []int64
	nodeMem []int64

	// Caches behind automatic preemption (see shadow.go), not state:
	// per flavor, GPUs freed so far, queues starting or stopping to
	// borrow, and admissions by borrowing queues (monotone counters).
	freedGPUs  []int64
	flipGen    []uint64
	reclaimGen []uint64
	shadows    *shadowSet // not cloned
	cycleNo    uint64

	scratch *scratch // reusable buffers; not state, not cloned
	// lean is set on the private clones estimates simulate on
	// (cloneLean): nobody reads their admissions' node names, so they are
	// not made, and their admissions are cut from admSlab, a block
	// allocated at a time (not state, not cloned). Nothing is added to
	// them and nothing asks them for an ID, so they share their parent's
	// byID read-only, which keeps the IDs of workloads they removed, and
	// count their workloads in nLive.
	lean    bool
	admSlab []Admission
	nLive   int
	// journal, when set, records the slots a simulation changes between
	// its checkpoints (checkpoint.go); not state, not cloned.
	journal *journal

	// idOrder is set while the live slots' order is their IDs' order
	// (NewSnapshot adds the workloads by ID; an Add that recycles a slot
	// or whose ID is not above every ID added before clears it): ties
	// on IDs are then broken by slot, without reading the slots
	// (idCmp). maxID is the greatest ID added so far.
	idOrder bool
	maxID   string
}

// wl is one workload slot.
type wl struct {
	w     Workload // w.Admission is never mutated in place once set
	live  bool
	q     int32
	cls   int32
	fl    int32   // admission flavor, -1 while pending
	per   int32   // GPUs per pod when admitted
	nodes []int32 // global node id of each pod when admitted (immutable)
	atSec int64   // Admission.At, for fast comparisons
	atNs  int32
	crSec int64 // w.Created, for fast comparisons (wall clock)
	crNs  int32
}

// classKey groups pending workloads with identical requirements: they fit
// or fail to fit together.
type classKey struct {
	q    int32
	gpus int
	cpu  int64
	mem  int64
	topo Level
	pin  int32 // pinned flavor or -1
}

// cand is one flavor a class may use, with its pod shape there.
type cand struct {
	f    int32
	pods int32
	per  int32
	// never is set when the request cannot fit on the flavor even with
	// the whole cluster free, by quota or by topology; admission and
	// preemption skip such candidates.
	never bool
}

type class struct {
	key     classKey
	cands   []cand  // immutable, shared by clones
	members []int32 // pending slots in static order
	pcache  []pcache
}

type prioSum struct {
	prio int32
	gpus int
	n    int
}

type flState struct {
	cnt   []int32    // nodes per free count 0..maxGPUs
	bits  [][]uint64 // per free count: bitset over flavor node positions
	free  int
	mix   []int32 // requests per pod size 1..gpn (pending candidates + admitted)
	fragS []int64 // cached scaled measure (a) per free count, see fragTable
	dirty bool
	// rise[m], 1 ≤ m ≤ maxGPUs: how many times a node's ⌊free/m⌋ grew
	// (the failure memo's node condition, failmemo.go); rise[maxGPUs+1]
	// never moves.
	rise []uint64
}

// NewSnapshot validates c (unique names, nodes' flavors exist, queues'
// flavors and quotas exist, GPUs > 0, policies valid) and the workloads
// (unique IDs, known queue, pods fit shapes, admitted ones placed on
// existing nodes of the admission flavor without exceeding node capacity)
// and builds the indexes. usage is the decayed usage per queue in
// GPU-hours for fair sharing; nil means zero. The snapshot keeps its own
// copies of everything. Admitted workloads are not checked against quota
// (a real cluster may be over-admitted after a quota change) nor against
// their topology requirement.
func NewSnapshot(c *Cluster, now time.Time, workloads []Workload, usage map[string]float64) (*Snapshot, error) {
	if c == nil {
		return nil, invalidf("cluster is nil")
	}
	cc := cloneCluster(c)
	ix, err := buildIndex(cc)
	if err != nil {
		return nil, err
	}
	s := newEmpty(cc, ix, now)
	for name, u := range usage {
		q, ok := ix.queueIdx[name]
		if !ok {
			return nil, invalidf("usage for unknown queue %q", name)
		}
		if math.IsNaN(u) || math.IsInf(u, 0) || u < 0 {
			return nil, invalidf("usage of queue %q is %v; want a finite number >= 0", name, u)
		}
		s.usage[q] = u
	}
	order := make([]int, len(workloads))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(workloads[a].ID, workloads[b].ID) })
	for _, i := range order {
		if _, err := s.add(workloads[i]); err != nil {
			return nil, err
		}
	}
	s.ver = 0
	return s, nil
}

func newEmpty(c *Cluster, ix *index, now time.Time) *Snapshot {
	nq, nf := len(ix.queues), len(ix.flavors)
	s := &Snapshot{
		c:          c,
		ix:         ix,
		now:        wall(now),
		byID:       map[string]int32{},
		idOrder:    true,
		nodeFree:   make([]int32, len(ix.nodes)),
		fl:         make([]flState, nf),
		rackCnt:    make([][]int32, len(ix.racks)),
		blockCnt:   make([][]int32, len(ix.blocks)),
		rackFree:   make([]int, len(ix.racks)),
		blockFree:  make([]int, len(ix.blocks)),
		used:       make([][]int, nq),
		running:    make([]int, nq),
		cohortC:    make([][]int, len(ix.cohorts)),
		usage:      make([]float64, nq),
		nPending:   make([]int, nq),
		adm:        make([][]admList, nq),
		classIdx:   map[classKey]int32{},
		freedGPUs:  make([]int64, nf),
		flipGen:    make([]uint64, nf),
		reclaimGen: make([]uint64, nf),
	}
	for f := range ix.flavors {
		fi := &ix.flavors[f]
		st := &s.fl[f]
		st.cnt = make([]int32, fi.maxGPUs+1)
		st.bits = make([][]uint64, fi.maxGPUs+1)
		for v := range st.bits {
			st.bits[v] = make([]uint64, fi.words)
		}
		st.mix = make([]int32, fi.gpn+1)
		st.rise = make([]uint64, fi.maxGPUs+2)
		st.dirty = true
	}
	for d, di := range ix.racks {
		s.rackCnt[d] = make([]int32, ix.flavors[di.flavor].maxGPUs+1)
	}
	for d, di := range ix.blocks {
		s.blockCnt[d] = make([]int32, ix.flavors[di.flavor].maxGPUs+1)
	}
	for n, ni := range ix.nodes {
		g := ni.gpus
		s.nodeFree[n] = int32(g)
		st := &s.fl[ni.flavor]
		st.cnt[g]++
		st.bits[g][ni.pos/64] |= 1 << (ni.pos % 64)
		st.free += g
		s.rackCnt[ni.rack][g]++
		s.blockCnt[ni.block][g]++
		s.rackFree[ni.rack] += g
		s.blockFree[ni.block] += g
	}
	for q := range ix.queues {
		s.used[q] = make([]int, nf)
		s.adm[q] = make([]admList, nf)
	}
	for co := range ix.cohorts {
		s.cohortC[co] = make([]int, nf)
	}
	if !ix.simple {
		s.tuse = make([][]int64, len(ix.tree.nodes))
		for n := range s.tuse {
			s.tuse[n] = make([]int64, ix.tree.nfr)
		}
	}
	if ix.nodeRes {
		s.nodeCPU = make([]int64, len(ix.nodes))
		s.nodeMem = make([]int64, len(ix.nodes))
		for n, ni := range ix.nodes {
			s.nodeCPU[n], s.nodeMem[n] = ni.cpu, ni.mem
		}
	}
	return s
}

// Now returns the snapshot's current time.
func (s *Snapshot) Now() time.Time { return s.now }

// Cluster returns the snapshot's cluster. It is shared by clones and must
// be treated as read-only.
func (s *Snapshot) Cluster() *Cluster { return s.c }

// Clone returns a deep copy of s; the Cluster is shared read-only. Undo
// functions obtained from s do not apply to the clone.
func (s *Snapshot) Clone() *Snapshot {
	out := s.clone(maps.Clone(s.byID))
	out.lean, out.nLive = s.lean, s.nLive
	return out
}

// cloneLean returns a lean deep copy of s (see Snapshot.lean), which
// shares s's byID: s must not change while the copy is in use.
func (s *Snapshot) cloneLean() *Snapshot {
	out := s.clone(s.byID)
	out.lean, out.nLive = true, s.workloadCount()
	return out
}

// workloadCount is the number of workloads in s.
func (s *Snapshot) workloadCount() int {
	if s.lean {
		return s.nLive
	}
	return len(s.byID)
}

func (s *Snapshot) clone(byID map[string]int32) *Snapshot {
	out := s.cloneState(byID)
	out.ws = slices.Clone(s.ws)
	return out
}

// cloneState is clone but for the workload slots, which it leaves nil
// (a checkpoint keeps them apart: see checkpoint.go).
func (s *Snapshot) cloneState(byID map[string]int32) *Snapshot {
	out := &Snapshot{
		c:          s.c,
		ix:         s.ix,
		now:        s.now,
		ver:        s.ver,
		byID:       byID,
		freeSlots:  slices.Clone(s.freeSlots),
		nodeFree:   slices.Clone(s.nodeFree),
		fl:         make([]flState, len(s.fl)),
		rackCnt:    clone2(s.rackCnt),
		blockCnt:   clone2(s.blockCnt),
		rackFree:   slices.Clone(s.rackFree),
		blockFree:  slices.Clone(s.blockFree),
		used:       clone2(s.used),
		running:    slices.Clone(s.running),
		cohortC:    clone2(s.cohortC),
		usage:      slices.Clone(s.usage),
		nPending:   slices.Clone(s.nPending),
		adm:        make([][]admList, len(s.adm)),
		classes:    slices.Clone(s.classes),
		classIdx:   maps.Clone(s.classIdx),
		tuse:       clone2(s.tuse),
		nodeCPU:    slices.Clone(s.nodeCPU),
		nodeMem:    slices.Clone(s.nodeMem),
		freedGPUs:  slices.Clone(s.freedGPUs),
		flipGen:    slices.Clone(s.flipGen),
		reclaimGen: slices.Clone(s.reclaimGen),
		cycleNo:    s.cycleNo,
		idOrder:    s.idOrder,
		maxID:      s.maxID,
	}
	for f, st := range s.fl {
		out.fl[f] = flState{
			cnt:   slices.Clone(st.cnt),
			bits:  clone2(st.bits),
			free:  st.free,
			mix:   slices.Clone(st.mix),
			fragS: slices.Clone(st.fragS),
			dirty: st.dirty,
			rise:  slices.Clone(st.rise),
		}
	}
	for q, lists := range s.adm {
		out.adm[q] = make([]admList, len(lists))
		for f, l := range lists {
			out.adm[q][f] = l.clone()
		}
	}
	for i := range out.classes {
		out.classes[i].members = slices.Clone(out.classes[i].members)
		out.classes[i].pcache = slices.Clone(out.classes[i].pcache)
	}
	return out
}

func clone2[T any](in [][]T) [][]T {
	if in == nil {
		return nil
	}
	out := make([][]T, len(in))
	for i, v := range in {
		out[i] = slices.Clone(v)
	}
	return out
}

// Workload returns a copy of the workload with the given ID.
func (s *Snapshot) Workload(id string) (Workload, bool) {
	slot, ok := s.byID[id]
	if !ok {
		return Workload{}, false
	}
	return copyWorkload(s.ws[slot].w), true
}

// Workloads returns copies of all workloads, sorted by ID. Passing them to
// NewSnapshot with s.Cluster(), s.Now() and s.Usage() rebuilds an
// equivalent snapshot.
func (s *Snapshot) Workloads() []Workload {
	out := make([]Workload, 0, len(s.byID))
	for _, slot := range s.byID {
		out = append(out, copyWorkload(s.ws[slot].w))
	}
	slices.SortFunc(out, func(a, b Workload) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// AdmittedOn returns a copy of each workload admitted on flavor, in no
// particular order: for callers that look at one flavor's work without
// copying and sorting every workload (Workloads).
func (s *Snapshot) AdmittedOn(flavor string) []Workload {
	f, ok := s.ix.flavorIdx[flavor]
	if !ok {
		return nil
	}
	var out []Workload
	for q := range s.adm {
		for _, slot := range s.adm[q][f].slots {
			out = append(out, copyWorkload(s.ws[slot].w))
		}
	}
	return out
}

// Usage returns a copy of every queue's decayed usage in GPU-hours.
func (s *Snapshot) Usage() map[string]float64 {
	out := make(map[string]float64, len(s.usage))
	for q, u := range s.usage {
		out[s.ix.queues[q].name] = u
	}
	return out
}

func copyWorkload(w Workload) Workload {
	if w.Admission != nil {
		a := copyAdmission(w.Admission)
		w.Admission = a
	}
	return w
}

func copyAdmission(a *Admission) *Admission {
	if a == nil {
		return nil
	}
	c := *a
	c.Nodes = slices.Clone(a.Nodes)
	c.At = wall(c.At)
	return &c
}

// wall strips t's monotonic clock reading. A snapshot keeps its times
// without one: Now, every Created and every Admission.At. The
// admission order, the admitted lists and the end heap compare the
// wall-clock integers kept beside the slots, while some comparisons
// (the counts ahead, the failure memo, the cycle's ties) compare the
// times themselves. time.Time compares two times by their monotonic
// readings when both have one and by the wall clock otherwise, so times
// from the store (none) next to times of this process (with readings)
// could be ordered one way here and the other way there if the wall
// clock stepped. Kept wall-clock only, every comparison agrees.
func wall(t time.Time) time.Time { return t.Round(0) }

// candsFor lists the flavors a workload of queue q asking for req
// (pinned to pin, or -1) may use, in the queue's order, skipping flavors
// where the request has no valid pod shape.
func (s *Snapshot) candsFor(q int, req resVec, pin int, topo Level) []cand {
	var out []cand
	gpus := int(req[ResourceGPU])
	for _, f := range s.ix.queues[q].flavors {
		if pin >= 0 && f != pin || pin < 0 && s.ix.flavors[f].elastic {
			continue
		}
		pods, per, err := PodShape(gpus, s.ix.flavors[f].gpn)
		if err != nil {
			continue
		}
		c := cand{f: int32(f), pods: int32(pods), per: int32(per)}
		c.never = !s.ix.coversAll(q, f, req) || gpus > s.ix.potential(q, f) || !s.ix.possible(f, pods, per, topo)
		if !c.never && s.ix.tree != nil && !s.ix.simple {
			for r := ResourceCPU; r < numResources; r++ {
				if req[r] > 0 && req[r] > s.ix.tree.potential(q, fr(f, r)) {
					c.never = true
				}
			}
		}
		if !c.never && s.ix.nodeRes && !s.ix.possibleRes(f, c, topo, req.perPod(c.pods)) {
			c.never = true
		}
		out = append(out, c)
	}
	return out
}

// resolve validates a workload's static fields and returns its queue,
// pinned flavor and candidate flavors.
func (s *Snapshot) resolve(w *Workload) (q, pin int, cands []cand, err error) {
	q, ok := s.ix.queueIdx[w.Queue]
	if !ok {
		return 0, 0, nil, invalidf("workload %q: unknown queue %q", w.ID, w.Queue)
	}
	if w.GPUs <= 0 {
		return 0, 0, nil, invalidf("workload %q: GPUs %d must be > 0", w.ID, w.GPUs)
	}
	if w.Topology < LevelNone || w.Topology > LevelBlock {
		return 0, 0, nil, invalidf("workload %q: unknown topology level %d", w.ID, int(w.Topology))
	}
	if w.Duration < 0 {
		return 0, 0, nil, invalidf("workload %q: negative duration %v", w.ID, w.Duration)
	}
	pin = -1
	if w.Flavor != "" {
		f, ok := s.ix.flavorIdx[w.Flavor]
		if !ok || !s.ix.queues[q].quota[f].has {
			return 0, 0, nil, invalidf("workload %q: flavor %q is not one of queue %q's flavors", w.ID, w.Flavor, w.Queue)
		}
		pin = f
	}
	if w.CPU < 0 || w.Memory < 0 {
		return 0, 0, nil, invalidf("workload %q: negative CPU or memory", w.ID)
	}
	if k, ok := s.classIdx[classKey{q: int32(q), gpus: w.GPUs, cpu: w.CPU, mem: w.Memory, topo: w.Topology, pin: int32(pin)}]; ok {
		cands = s.classes[k].cands
	} else {
		cands = s.candsFor(q, reqOf(w), pin, w.Topology)
	}
	if len(cands) == 0 {
		f := s.ix.queues[q].flavors[0]
		for _, g := range s.ix.queues[q].flavors {
			if !s.ix.flavors[g].elastic {
				f = g
				break
			}
		}
		if pin >= 0 {
			f = pin
		}
		_, _, perr := PodShape(w.GPUs, s.ix.flavors[f].gpn)
		return 0, 0, nil, invalidf("workload %q: no flavor of queue %q can run it: %v", w.ID, w.Queue, perr)
	}
	return q, pin, cands, nil
}

// classFor returns the class of the given requirements, creating it.
func (s *Snapshot) classFor(q int, req resVec, topo Level, pin int, cands []cand) int32 {
	k := classKey{q: int32(q), gpus: int(req[ResourceGPU]), cpu: req[ResourceCPU], mem: req[ResourceMemory], topo: topo, pin: int32(pin)}
	if c, ok := s.classIdx[k]; ok {
		return c
	}
	c := int32(len(s.classes))
	s.classes = append(s.classes, class{key: k, cands: cands})
	s.classIdx[k] = c
	return c
}

func (s *Snapshot) lookup(id string) (int32, error) {
	slot, ok := s.byID[id]
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return slot, nil
}
