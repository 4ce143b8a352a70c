package allocator

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// MaxNodeGPUs bounds Node.GPUs; the snapshot keeps per-free-count
// buckets for each node size, so absurd sizes are rejected.
const MaxNodeGPUs = 1024

// ErrInvalid is wrapped by every validation error of NewSnapshot, Add,
// Reserve and the other mutators, so callers can tell bad input from
// a state conflict with errors.Is.
var ErrInvalid = errors.New("invalid input")

// ErrNotFound is wrapped when an operation names a workload the snapshot
// does not hold.
var ErrNotFound = errors.New("no such workload")

// ErrState is wrapped when an operation does not apply to the workload's
// current state (admitting an admitted workload, evicting a pending one…)
// or when an admission would break a quota or capacity limit.
var ErrState = errors.New("not possible in the current state")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Preemption policy values after parsing.
type policyKind uint8

const (
	polNever policyKind = iota
	polLower
	polLowerOrNewerEqual
	polAny
)

// index is the immutable, derived view of a Cluster that every clone of a
// snapshot shares.
type index struct {
	flavors   []flavorInfo
	flavorIdx map[string]int
	nodes     []nodeInfo
	npos      []nodePos // per node
	nodeIdx   map[string]int
	racks     []domainInfo
	blocks    []domainInfo
	queues    []queueInfo
	queueIdx  map[string]int
	cohorts   []cohortInfo
	fair      bool // FairSharing: order by the queues' shares
	fcfs      bool // FirstComeFirstServed: ignore priority, never preempt
	// noFailMemo turns the failure memo off (tests compare against it).
	noFailMemo bool
	placement  placeKind
	seed       uint64
	// tree is the cohort tree with every quota (tree.go).
	tree *quotaTree
	// fs is Kueue's Fair Sharing's preemption strategies; nil is off.
	fs []fsStrategy
	// simple is set when the cluster uses nothing the GPU-only engine
	// does not model (see simpleCluster): it then schedules, else the
	// general one (kueue_cycle.go).
	simple bool
	// nodeRes is set when some node counts CPU or memory.
	nodeRes bool
}

// placeKind is Policy.Placement after parsing.
type placeKind uint8

const (
	placeFrag placeKind = iota
	placeBestFit
	placeSpread
	placeRandom
)

type flavorInfo struct {
	name    string
	gpn     int
	elastic bool     // only pinned workloads may use it
	maxGPUs int      // largest node in the flavor; free counts are 0..maxGPUs
	total   int      // GPUs of all nodes
	nodes   []int    // global node ids sorted by name
	racks   []int    // rack domain ids sorted by name
	blocks  []int    // block domain ids sorted by name
	words   int      // bitset words for len(nodes)
	full    []int32  // nodes per GPU count when all are free
	rises   []uint64 // setFree's rise steps (riseMasks), nil above 63 GPUs
}

type nodeInfo struct {
	name   string
	flavor int
	pos    int // position in flavorInfo.nodes
	gpus   int
	cpu    int64 // allocatable millicores; 0: not counted
	mem    int64 // allocatable bytes; 0: not counted
	rack   int
	block  int
	// positions of rack and block in flavorInfo.racks and .blocks
	rackPos, blockPos int
}

// nodePos is a node's positions in its flavor (nodeInfo's pos, rackPos
// and blockPos), kept apart so that the shadows' updates read little.
type nodePos struct {
	pos, rackPos, blockPos int32
}

type domainInfo struct {
	name   string
	flavor int
	nodes  []int   // global node ids sorted by name
	full   []int32 // nodes per GPU count when all are free
}

type quotaInfo struct {
	has        bool
	nominal    int
	guaranteed int // nominal - lendingLimit: never lent to the cohort
	lendable   int // what the queue contributes to the cohort pool
	borrowSet  bool
	borrow     int
}

type queueInfo struct {
	name    string
	cohort  int // -1 for none
	weight  float64
	flavors []int       // in assignment order
	quota   []quotaInfo // indexed by flavor id
	within  policyKind
	reclaim policyKind
	// borrowWithinCohort LowerPriority, and its priority threshold.
	bwc    bool
	bwcMax *int32
	// flavorFungibility: search on past a borrowing fit, stop at a
	// flavor where preemption works, and the preference.
	borrowTryNext bool
	preemptStop   bool
	preferPreempt bool
}

type cohortInfo struct {
	name       string
	queues     []int
	pool       []int // per flavor: Σ lendable
	reclaimAny bool  // some member reclaims with policy Any
	reclaimers bool  // some member reclaims at all
}

func parsePolicy(s string, allowed ...policyKind) (policyKind, error) {
	var k policyKind
	switch s {
	case "", PreemptNever:
		return polNever, nil
	case PreemptLowerPriority:
		k = polLower
	case PreemptLowerOrNewerEqualPriority:
		k = polLowerOrNewerEqual
	case PreemptAny:
		k = polAny
	default:
		return 0, fmt.Errorf("unknown preemption policy %q", s)
	}
	if !slices.Contains(allowed, k) {
		return 0, fmt.Errorf("preemption policy %q is not allowed here", s)
	}
	return k, nil
}

// cloneCluster returns a deep copy of c.
func cloneCluster(c *Cluster) *Cluster {
	out := &Cluster{
		Flavors: slices.Clone(c.Flavors),
		Nodes:   slices.Clone(c.Nodes),
		Queues:  make([]Queue, len(c.Queues)),
		Cohorts: make([]Cohort, len(c.Cohorts)),
		Policy:  c.Policy,
	}
	if fs := c.Policy.FairSharing; fs != nil {
		out.Policy.FairSharing = &KueueFairSharing{PreemptionStrategies: slices.Clone(fs.PreemptionStrategies)}
	}
	for i, q := range c.Queues {
		q.Flavors = slices.Clone(q.Flavors)
		q.Quotas = cloneQuotas(q.Quotas)
		if m := q.Preemption.BorrowWithinCohortMaxPriority; m != nil {
			v := *m
			q.Preemption.BorrowWithinCohortMaxPriority = &v
		}
		out.Queues[i] = q
	}
	for i, co := range c.Cohorts {
		co.Quotas = cloneQuotas(co.Quotas)
		out.Cohorts[i] = co
	}
	return out
}

func cloneQuotas(in map[string]Quota) map[string]Quota {
	if in == nil {
		return nil
	}
	m := make(map[string]Quota, len(in))
	for k, v := range in {
		v.BorrowingLimit = clonePtr(v.BorrowingLimit)
		v.LendingLimit = clonePtr(v.LendingLimit)
		for _, rq := range []**ResourceQuota{&v.CPU, &v.Memory} {
			if *rq != nil {
				c := **rq
				c.BorrowingLimit = clonePtr(c.BorrowingLimit)
				c.LendingLimit = clonePtr(c.LendingLimit)
				*rq = &c
			}
		}
		m[k] = v
	}
	return m
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// buildIndex validates c and derives the index.
func buildIndex(c *Cluster) (*index, error) {
	if c == nil {
		return nil, invalidf("cluster is nil")
	}
	ix := &index{
		flavorIdx: map[string]int{},
		nodeIdx:   map[string]int{},
		queueIdx:  map[string]int{},
	}
	switch c.Policy.Mode {
	case "", BestEffortFIFO:
	case FairSharing:
		ix.fair = true
	case FirstComeFirstServed:
		ix.fcfs = true
	default:
		return nil, invalidf("policy: unknown mode %q (want %s, %s or %s)", c.Policy.Mode, BestEffortFIFO, FairSharing, FirstComeFirstServed)
	}
	switch c.Policy.Placement {
	case "", PlacementFragmentationAware:
		ix.placement = placeFrag
	case PlacementBestFit:
		ix.placement = placeBestFit
	case PlacementSpread:
		ix.placement = placeSpread
	case PlacementRandom:
		ix.placement = placeRandom
	default:
		return nil, invalidf("policy: unknown placement %q (want %s, %s, %s or %s)", c.Policy.Placement,
			PlacementFragmentationAware, PlacementBestFit, PlacementSpread, PlacementRandom)
	}
	ix.seed = c.Policy.Seed
	if c.Policy.HalfLife < 0 {
		return nil, invalidf("policy: negative half-life %v", c.Policy.HalfLife)
	}
	if c.Policy.EntryPenalty < 0 {
		return nil, invalidf("policy: negative entry penalty %v", c.Policy.EntryPenalty)
	}
	for i, f := range c.Flavors {
		if f.Name == "" {
			return nil, invalidf("flavor %d has no name", i)
		}
		if _, dup := ix.flavorIdx[f.Name]; dup {
			return nil, invalidf("flavor %q defined twice", f.Name)
		}
		if f.GPUsPerNode <= 0 || f.GPUsPerNode > MaxNodeGPUs {
			return nil, invalidf("flavor %q: GPUsPerNode %d must be in 1..%d", f.Name, f.GPUsPerNode, MaxNodeGPUs)
		}
		ix.flavorIdx[f.Name] = i
		ix.flavors = append(ix.flavors, flavorInfo{name: f.Name, gpn: f.GPUsPerNode, elastic: f.Elastic})
	}
	for i, n := range c.Nodes {
		if n.Name == "" {
			return nil, invalidf("node %d has no name", i)
		}
		if _, dup := ix.nodeIdx[n.Name]; dup {
			return nil, invalidf("node %q defined twice", n.Name)
		}
		f, ok := ix.flavorIdx[n.Flavor]
		if !ok {
			return nil, invalidf("node %q: unknown flavor %q", n.Name, n.Flavor)
		}
		if n.GPUs <= 0 || n.GPUs > MaxNodeGPUs {
			return nil, invalidf("node %q: GPUs %d must be in 1..%d", n.Name, n.GPUs, MaxNodeGPUs)
		}
		ix.nodeIdx[n.Name] = i
		ix.nodes = append(ix.nodes, nodeInfo{name: n.Name, flavor: f, gpus: n.GPUs, cpu: n.CPU, mem: n.Memory})
		fi := &ix.flavors[f]
		fi.nodes = append(fi.nodes, i)
		fi.total += n.GPUs
		fi.maxGPUs = max(fi.maxGPUs, n.GPUs)
	}
	for f := range ix.flavors {
		fi := &ix.flavors[f]
		fi.maxGPUs = max(fi.maxGPUs, fi.gpn)
		slices.SortFunc(fi.nodes, func(a, b int) int { return strings.Compare(ix.nodes[a].name, ix.nodes[b].name) })
		for p, n := range fi.nodes {
			ix.nodes[n].pos = p
		}
		fi.words = (len(fi.nodes) + 63) / 64
		fi.full = make([]int32, fi.maxGPUs+1)
		for _, n := range fi.nodes {
			fi.full[ix.nodes[n].gpus]++
		}
		fi.rises = riseMasks(fi.maxGPUs)
		ix.buildDomains(c, f)
	}
	ix.npos = make([]nodePos, len(ix.nodes))
	for n, ni := range ix.nodes {
		ix.npos[n] = nodePos{pos: int32(ni.pos), rackPos: int32(ni.rackPos), blockPos: int32(ni.blockPos)}
	}
	for _, doms := range [][]domainInfo{ix.racks, ix.blocks} {
		for d := range doms {
			di := &doms[d]
			di.full = make([]int32, ix.flavors[di.flavor].maxGPUs+1)
			for _, n := range di.nodes {
				di.full[ix.nodes[n].gpus]++
			}
		}
	}
	if err := ix.buildQueues(c); err != nil {
		return nil, err
	}
	if err := ix.buildTree(c); err != nil {
		return nil, err
	}
	if fs := c.Policy.FairSharing; fs != nil {
		if ix.fair || ix.fcfs {
			return nil, invalidf("policy: Kueue's Fair Sharing needs mode %s", BestEffortFIFO)
		}
		var err error
		if ix.fs, err = parseStrategies(fs.PreemptionStrategies); err != nil {
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if n.CPU < 0 || n.Memory < 0 {
			return nil, invalidf("node %q: negative CPU or memory", n.Name)
		}
		if n.CPU > 0 || n.Memory > 0 {
			ix.nodeRes = true
		}
	}
	ix.simple = simpleCluster(c)
	return ix, nil
}

// simpleCluster reports whether c uses only what the GPU-only engine
// models: GPU quotas, cohorts of one level without quota of their own,
// classical preemption without borrowWithinCohort, Kueue's default
// flavorFungibility, no Kueue Fair Sharing.
func simpleCluster(c *Cluster) bool {
	if c.Policy.FairSharing != nil {
		return false
	}
	for _, co := range c.Cohorts {
		if co.Parent != "" || len(co.Quotas) > 0 {
			return false
		}
	}
	for _, q := range c.Queues {
		p, ff := q.Preemption, q.FlavorFungibility
		if (p.BorrowWithinCohort != "" && p.BorrowWithinCohort != PreemptNever) ||
			(ff.WhenCanBorrow != "" && ff.WhenCanBorrow != MayStopSearch) ||
			(ff.WhenCanPreempt != "" && ff.WhenCanPreempt != TryNextFlavor) || ff.Preference != "" {
			return false
		}
		for _, qt := range q.Quotas {
			if qt.CPU != nil || qt.Memory != nil {
				return false
			}
		}
	}
	return true
}

// buildDomains groups flavor f's nodes into racks and blocks. A node with
// no rack (block) label is a rack (block) of its own.
func (ix *index) buildDomains(c *Cluster, f int) {
	fi := &ix.flavors[f]
	rackOf := map[string]int{}
	blockOf := map[string]int{}
	for _, n := range fi.nodes { // name order, so domain node lists are sorted too
		node := c.Nodes[n]
		bkey := node.Block
		if bkey == "" {
			bkey = "\x00" + node.Name
		}
		rkey := bkey + "/" + node.Rack
		if node.Rack == "" {
			rkey = bkey + "/\x00" + node.Name
		}
		b, ok := blockOf[bkey]
		if !ok {
			b = len(ix.blocks)
			blockOf[bkey] = b
			ix.blocks = append(ix.blocks, domainInfo{name: bkey, flavor: f})
			fi.blocks = append(fi.blocks, b)
		}
		r, ok := rackOf[rkey]
		if !ok {
			r = len(ix.racks)
			rackOf[rkey] = r
			ix.racks = append(ix.racks, domainInfo{name: rkey, flavor: f})
			fi.racks = append(fi.racks, r)
		}
		ix.blocks[b].nodes = append(ix.blocks[b].nodes, n)
		ix.racks[r].nodes = append(ix.racks[r].nodes, n)
		ix.nodes[n].block = b
		ix.nodes[n].rack = r
	}
	slices.SortFunc(fi.racks, func(a, b int) int { return strings.Compare(ix.racks[a].name, ix.racks[b].name) })
	slices.SortFunc(fi.blocks, func(a, b int) int { return strings.Compare(ix.blocks[a].name, ix.blocks[b].name) })
	for p, d := range fi.racks {
		for _, n := range ix.racks[d].nodes {
			ix.nodes[n].rackPos = p
		}
	}
	for p, d := range fi.blocks {
		for _, n := range ix.blocks[d].nodes {
			ix.nodes[n].blockPos = p
		}
	}
}

func (ix *index) buildQueues(c *Cluster) error {
	cohortIdx := map[string]int{}
	nf := len(ix.flavors)
	for i, q := range c.Queues {
		if q.Name == "" {
			return invalidf("queue %d has no name", i)
		}
		if _, dup := ix.queueIdx[q.Name]; dup {
			return invalidf("queue %q defined twice", q.Name)
		}
		if math.IsNaN(q.Weight) || math.IsInf(q.Weight, 0) || q.Weight < 0 {
			return invalidf("queue %q: weight %v must be a finite number >= 0", q.Name, q.Weight)
		}
		bwc := false
		switch q.Preemption.BorrowWithinCohort {
		case "", PreemptNever:
		case PreemptLowerPriority:
			bwc = true
		default:
			return invalidf("queue %q: borrowWithinCohort: unknown policy %q (want Never or LowerPriority)", q.Name, q.Preemption.BorrowWithinCohort)
		}
		ff := q.FlavorFungibility
		if ff.WhenCanBorrow != "" && ff.WhenCanBorrow != MayStopSearch && ff.WhenCanBorrow != TryNextFlavor {
			return invalidf("queue %q: whenCanBorrow %q (want %s or %s)", q.Name, ff.WhenCanBorrow, MayStopSearch, TryNextFlavor)
		}
		if ff.WhenCanPreempt != "" && ff.WhenCanPreempt != MayStopSearch && ff.WhenCanPreempt != TryNextFlavor {
			return invalidf("queue %q: whenCanPreempt %q (want %s or %s)", q.Name, ff.WhenCanPreempt, MayStopSearch, TryNextFlavor)
		}
		switch ff.Preference {
		case "", BorrowingOverPreemption, PreemptionOverBorrowing:
		default:
			return invalidf("queue %q: flavorFungibility preference %q (want %s or %s)", q.Name, ff.Preference, BorrowingOverPreemption, PreemptionOverBorrowing)
		}
		if ff.Preference != "" && (ff.WhenCanBorrow != TryNextFlavor || ff.WhenCanPreempt != TryNextFlavor) {
			return invalidf("queue %q: a flavorFungibility preference needs whenCanBorrow and whenCanPreempt TryNextFlavor (as Kueue requires)", q.Name)
		}
		within, err := parsePolicy(q.Preemption.WithinClusterQueue, polLower, polLowerOrNewerEqual)
		if err != nil {
			return invalidf("queue %q: withinClusterQueue: %v", q.Name, err)
		}
		reclaim, err := parsePolicy(q.Preemption.ReclaimWithinCohort, polLower, polAny)
		if err != nil {
			return invalidf("queue %q: reclaimWithinCohort: %v", q.Name, err)
		}
		if len(q.Flavors) == 0 {
			return invalidf("queue %q lists no flavors", q.Name)
		}
		qi := queueInfo{name: q.Name, cohort: -1, weight: q.Weight, quota: make([]quotaInfo, nf), within: within, reclaim: reclaim,
			bwc: bwc, bwcMax: q.Preemption.BorrowWithinCohortMaxPriority,
			borrowTryNext: ff.WhenCanBorrow == TryNextFlavor, preemptStop: ff.WhenCanPreempt == MayStopSearch,
			preferPreempt: ff.Preference == PreemptionOverBorrowing}
		if qi.weight == 0 {
			qi.weight = 1
		}
		for _, fname := range q.Flavors {
			f, ok := ix.flavorIdx[fname]
			if !ok {
				return invalidf("queue %q: unknown flavor %q", q.Name, fname)
			}
			if qi.quota[f].has {
				return invalidf("queue %q lists flavor %q twice", q.Name, fname)
			}
			qt, ok := q.Quotas[fname]
			if !ok {
				return invalidf("queue %q: no quota for flavor %q", q.Name, fname)
			}
			if qt.Nominal < 0 {
				return invalidf("queue %q flavor %q: negative nominal quota %d", q.Name, fname, qt.Nominal)
			}
			if err := checkQuota(qt); err != nil {
				return invalidf("queue %q flavor %q: %v", q.Name, fname, err)
			}
			for _, rq := range []*ResourceQuota{qt.CPU, qt.Memory} {
				if rq != nil && rq.LendingLimit != nil && *rq.LendingLimit > rq.Nominal {
					return invalidf("queue %q flavor %q: a CPU or memory lendingLimit above its nominal quota", q.Name, fname)
				}
			}
			info := quotaInfo{has: true, nominal: qt.Nominal, lendable: qt.Nominal}
			if qt.LendingLimit != nil {
				if l := *qt.LendingLimit; l < 0 || l > qt.Nominal {
					return invalidf("queue %q flavor %q: lendingLimit %d must be in 0..nominal (%d)", q.Name, fname, l, qt.Nominal)
				}
				info.lendable = *qt.LendingLimit
			}
			info.guaranteed = qt.Nominal - info.lendable
			if qt.BorrowingLimit != nil {
				if *qt.BorrowingLimit < 0 {
					return invalidf("queue %q flavor %q: negative borrowingLimit %d", q.Name, fname, *qt.BorrowingLimit)
				}
				info.borrowSet = true
				info.borrow = *qt.BorrowingLimit
			}
			qi.quota[f] = info
			qi.flavors = append(qi.flavors, f)
		}
		for fname := range q.Quotas {
			f, ok := ix.flavorIdx[fname]
			if !ok || !qi.quota[f].has {
				return invalidf("queue %q has a quota for flavor %q that it does not list in Flavors", q.Name, fname)
			}
		}
		if q.Cohort != "" {
			co, ok := cohortIdx[q.Cohort]
			if !ok {
				co = len(ix.cohorts)
				cohortIdx[q.Cohort] = co
				ix.cohorts = append(ix.cohorts, cohortInfo{name: q.Cohort, pool: make([]int, nf)})
			}
			qi.cohort = co
			ci := &ix.cohorts[co]
			ci.queues = append(ci.queues, i)
			for f, qt := range qi.quota {
				ci.pool[f] += qt.lendable
			}
			if reclaim == polAny {
				ci.reclaimAny = true
			}
			if reclaim != polNever {
				ci.reclaimers = true
			}
		}
		ix.queueIdx[q.Name] = i
		ix.queues = append(ix.queues, qi)
	}
	return nil
}
