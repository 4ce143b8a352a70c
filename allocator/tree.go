package allocator

import (
	"fmt"
	"math"
	"slices"
)

// The quota tree is Kueue's cohort tree (pkg/cache/scheduler,
// resource_node.go): ClusterQueues are its leaves, Cohorts its inner
// nodes, and every node keeps, per (flavor, resource), its own quota
// (nominal, borrowing and lending limits), its SubtreeQuota (its nominal
// plus what its children lend it) and its Usage (for a queue what it has
// admitted; for a cohort what its children use beyond what they keep for
// themselves). Nodes 0..len(queues)-1 are the queues, in Cluster order;
// cohorts follow.

type quotaTree struct {
	nq     int
	nfr    int
	nodes  []tnode
	byName map[string]int // cohort name → node
	// defined: per node, the flavor-resources of its SubtreeQuota (its
	// own quotas and its children's); lendable: per node, per resource,
	// what it could lend a child in all (Kueue's calculateLendable).
	defined  [][]bool
	lendable []resVec
}

type tnode struct {
	name    string
	parent  int   // -1 for a root
	cohorts []int // child cohorts
	queues  []int // child queues
	weight  float64
	// Per fr (flavor × resource).
	has       []bool
	nominal   []int64
	borrow    []int64 // valid where borrowSet
	borrowSet []bool
	lendSet   []bool
	lend      []int64
	subtree   []int64 // SubtreeQuota
	local     []int64 // localQuota: what lending limits keep in the subtree
	height    int     // Kueue's getNodeHeight
}

func (n *tnode) init(nfr int) {
	n.has = make([]bool, nfr)
	n.nominal = make([]int64, nfr)
	n.borrow = make([]int64, nfr)
	n.borrowSet = make([]bool, nfr)
	n.lend = make([]int64, nfr)
	n.lendSet = make([]bool, nfr)
	n.subtree = make([]int64, nfr)
	n.local = make([]int64, nfr)
}

func (n *tnode) setQuota(f int, q Quota) {
	for r := range numResources {
		rq := q.resource(r)
		if rq == nil {
			continue
		}
		i := fr(f, r)
		n.has[i] = true
		n.nominal[i] = rq.Nominal
		if rq.BorrowingLimit != nil {
			n.borrowSet[i], n.borrow[i] = true, *rq.BorrowingLimit
		}
		if rq.LendingLimit != nil {
			n.lendSet[i], n.lend[i] = true, *rq.LendingLimit
		}
	}
}

// buildTree builds the cohort tree of c (after buildQueues). Kueue
// rejects limits on a cohort without a parent and stops a tree with a
// cycle; so does this.
func (ix *index) buildTree(c *Cluster) error {
	nf := len(ix.flavors)
	t := &quotaTree{nq: len(ix.queues), nfr: nf * int(numResources), byName: map[string]int{}}
	t.nodes = make([]tnode, len(ix.queues))
	for q := range ix.queues {
		n := &t.nodes[q]
		n.init(t.nfr)
		n.name, n.parent, n.weight = ix.queues[q].name, -1, ix.queues[q].weight
		for f, qt := range c.Queues[q].Quotas {
			n.setQuota(ix.flavorIdx[f], qt)
		}
	}
	cohort := func(name string) int {
		if i, ok := t.byName[name]; ok {
			return i
		}
		i := len(t.nodes)
		t.byName[name] = i
		t.nodes = append(t.nodes, tnode{name: name, parent: -1, weight: 1})
		t.nodes[i].init(t.nfr)
		return i
	}
	declared := map[string]bool{}
	for i, co := range c.Cohorts {
		if co.Name == "" {
			return invalidf("cohort %d has no name", i)
		}
		if declared[co.Name] {
			return invalidf("cohort %q defined twice", co.Name)
		}
		declared[co.Name] = true
		if math.IsNaN(co.Weight) || math.IsInf(co.Weight, 0) || co.Weight < 0 {
			return invalidf("cohort %q: weight %v must be a finite number >= 0", co.Name, co.Weight)
		}
		n := cohort(co.Name)
		if co.Weight > 0 {
			t.nodes[n].weight = co.Weight
		}
		if co.Parent != "" {
			if co.Parent == co.Name {
				return invalidf("cohort %q is its own parent", co.Name)
			}
			p := cohort(co.Parent)
			t.nodes[n].parent = p
		}
		for fname, qt := range co.Quotas {
			f, ok := ix.flavorIdx[fname]
			if !ok {
				return invalidf("cohort %q: unknown flavor %q", co.Name, fname)
			}
			if co.Parent == "" && (qt.BorrowingLimit != nil || qt.LendingLimit != nil ||
				(qt.CPU != nil && (qt.CPU.BorrowingLimit != nil || qt.CPU.LendingLimit != nil)) ||
				(qt.Memory != nil && (qt.Memory.BorrowingLimit != nil || qt.Memory.LendingLimit != nil))) {
				return invalidf("cohort %q flavor %q: borrowing and lending limits need a parent cohort", co.Name, fname)
			}
			if err := checkQuota(qt); err != nil {
				return invalidf("cohort %q flavor %q: %v", co.Name, fname, err)
			}
			t.nodes[n].setQuota(f, qt)
		}
	}
	for q := range ix.queues {
		if name := c.Queues[q].Cohort; name != "" {
			p := cohort(name)
			t.nodes[q].parent = p
		}
	}
	// Children lists, and no cycles.
	for i := range t.nodes {
		p := t.nodes[i].parent
		if p < 0 {
			continue
		}
		if i < t.nq {
			t.nodes[p].queues = append(t.nodes[p].queues, i)
		} else {
			t.nodes[p].cohorts = append(t.nodes[p].cohorts, i)
		}
	}
	for i := t.nq; i < len(t.nodes); i++ {
		seen := map[int]bool{}
		for n := i; n >= 0; n = t.nodes[n].parent {
			if seen[n] {
				return invalidf("cohort %q is in a cycle of parents", t.nodes[i].name)
			}
			seen[n] = true
		}
	}
	for i := t.nq; i < len(t.nodes); i++ {
		if t.nodes[i].parent < 0 {
			t.accumulate(i)
		}
	}
	for q := 0; q < t.nq; q++ {
		if t.nodes[q].parent < 0 {
			t.accumulate(q)
		}
	}
	t.defined = make([][]bool, len(t.nodes))
	for n := range t.nodes {
		t.defined[n] = make([]bool, t.nfr)
	}
	for n := range t.nodes {
		for i, h := range t.nodes[n].has {
			if !h {
				continue
			}
			for a := n; a >= 0; a = t.nodes[a].parent {
				t.defined[a][i] = true
			}
		}
	}
	t.lendable = make([]resVec, len(t.nodes))
	for n := range t.nodes {
		root := t.root(n)
		for i := range t.nfr {
			if t.defined[root][i] {
				t.lendable[n][frResource(i)] += t.potential(n, i)
			}
		}
	}
	ix.tree = t
	return nil
}

func checkQuota(q Quota) error {
	if q.Nominal < 0 {
		return fmt.Errorf("negative nominal quota %d", q.Nominal)
	}
	if q.BorrowingLimit != nil && *q.BorrowingLimit < 0 {
		return fmt.Errorf("negative borrowingLimit %d", *q.BorrowingLimit)
	}
	if q.LendingLimit != nil && *q.LendingLimit < 0 {
		return fmt.Errorf("negative lendingLimit %d", *q.LendingLimit)
	}
	for _, rq := range []*ResourceQuota{q.CPU, q.Memory} {
		if rq == nil {
			continue
		}
		if rq.Nominal < 0 || (rq.BorrowingLimit != nil && *rq.BorrowingLimit < 0) || (rq.LendingLimit != nil && *rq.LendingLimit < 0) {
			return fmt.Errorf("negative CPU or memory quota")
		}
	}
	return nil
}

// accumulate computes SubtreeQuota, localQuota and height below node n
// (Kueue's updateCohortResourceNode and accumulateFromChild).
func (t *quotaTree) accumulate(n int) {
	nd := &t.nodes[n]
	copy(nd.subtree, nd.nominal)
	nd.height = min(len(nd.cohorts)+len(nd.queues), 1)
	for _, c := range nd.cohorts {
		t.accumulate(c)
		t.addChild(nd, &t.nodes[c])
		nd.height = max(nd.height, t.nodes[c].height+1)
	}
	for _, c := range nd.queues {
		t.accumulate(c)
		t.addChild(nd, &t.nodes[c])
	}
	for i := range nd.local {
		nd.local[i] = 0
		if nd.lendSet[i] {
			nd.local[i] = max(0, nd.subtree[i]-nd.lend[i])
		}
	}
}

func (t *quotaTree) addChild(p, c *tnode) {
	for i := range c.subtree {
		local := int64(0)
		if c.lendSet[i] {
			local = max(0, c.subtree[i]-c.lend[i])
		}
		p.subtree[i] += c.subtree[i] - local
	}
}

// root returns the root of node n's tree.
func (t *quotaTree) root(n int) int {
	for t.nodes[n].parent >= 0 {
		n = t.nodes[n].parent
	}
	return n
}

// subtreeQueues lists the queues under node n.
func (t *quotaTree) subtreeQueues(n int) []int {
	nd := &t.nodes[n]
	out := slices.Clone(nd.queues)
	for _, c := range nd.cohorts {
		out = append(out, t.subtreeQueues(c)...)
	}
	return out
}

// potential is Kueue's potentialAvailable: the most of fr node n could
// ever use, all usage aside, within borrowing limits.
func (t *quotaTree) potential(n, i int) int64 {
	nd := &t.nodes[n]
	if nd.parent < 0 {
		return nd.subtree[i]
	}
	a := nd.local[i] + t.potential(nd.parent, i)
	if nd.borrowSet[i] {
		a = min(a, nd.subtree[i]+nd.borrow[i])
	}
	return a
}

// Dynamic arithmetic, on the snapshot's tree usage s.tuse[node][fr].

// tAvailable is Kueue's available(): what node n may still use of fr,
// locally and from its ancestors within borrowing limits. It may be
// negative after over-admission.
func (s *Snapshot) tAvailable(n, i int) int64 {
	t := s.ix.tree
	nd := &t.nodes[n]
	u := s.tuse[n][i]
	if nd.parent < 0 {
		return nd.subtree[i] - u
	}
	pa := s.tAvailable(nd.parent, i)
	if nd.borrowSet[i] {
		stored := nd.subtree[i] - nd.local[i]
		usedInParent := max(0, u-nd.local[i])
		pa = min(pa, stored-usedInParent+nd.borrow[i])
	}
	return max(0, nd.local[i]-u) + pa
}

// tLocalAvailable is Kueue's LocalAvailable.
func (s *Snapshot) tLocalAvailable(n, i int) int64 {
	return max(0, s.ix.tree.nodes[n].local[i]-s.tuse[n][i])
}

// tAdd is Kueue's addUsage (v > 0) and removeUsage (v < 0): usage beyond
// what a node keeps locally bubbles up to its parent.
func (s *Snapshot) tAdd(n, i int, v int64) {
	t := s.ix.tree
	if v >= 0 {
		for n >= 0 && v != 0 {
			la := s.tLocalAvailable(n, i)
			s.tuse[n][i] += v
			if t.nodes[n].parent < 0 || v <= la {
				return
			}
			v -= la
			n = t.nodes[n].parent
		}
		return
	}
	v = -v
	for n >= 0 && v != 0 {
		nd := &t.nodes[n]
		stored := s.tuse[n][i] - nd.local[i]
		s.tuse[n][i] -= v
		if stored <= 0 || nd.parent < 0 {
			return
		}
		v = min(v, stored)
		n = nd.parent
	}
}

// tAddReq adds (sign +1) or removes (−1) request req of queue q on
// flavor f.
func (s *Snapshot) tAddReq(q, f int, req resVec, sign int64) {
	for r, v := range req {
		if v != 0 {
			s.tAdd(q, fr(f, Resource(r)), sign*v)
		}
	}
}

// tBorrowingWith is Kueue's BorrowingWith: node n would use more than its
// SubtreeQuota (for a queue, its nominal quota) with v more.
func (s *Snapshot) tBorrowingWith(n, i int, v int64) bool {
	return s.tuse[n][i]+v > s.ix.tree.nodes[n].subtree[i]
}

// lowestSubtreeThatFits is Kueue's FindHeightOfLowestSubtreeThatFits
// (pkg/scheduler/preemption/classical/hierarchical_preemption.go): the
// height of the smallest subtree above queue q where val more of fr fit
// without borrowing from further up (0: within q's nominal quota), and
// whether that subtree is below the root (so that reclaiming inside it
// may be possible while borrowing).
func (s *Snapshot) lowestSubtreeThatFits(q, i int, val int64) (int, bool) {
	t := s.ix.tree
	hasParent := t.nodes[q].parent >= 0
	if !s.tBorrowingWith(q, i, val) || !hasParent {
		return 0, hasParent
	}
	remaining := val - s.tLocalAvailable(q, i)
	for n := t.nodes[q].parent; n >= 0; n = t.nodes[n].parent {
		if !s.tBorrowingWith(n, i, remaining) {
			return t.nodes[n].height, t.nodes[n].parent >= 0
		}
		remaining -= s.tLocalAvailable(n, i)
	}
	return t.nodes[t.root(q)].height, false
}

// withinNominal is Kueue's IsWithinNominalInResources for node n and the
// flavor-resources frs.
func (s *Snapshot) withinNominal(n int, frs []int) bool {
	nd := &s.ix.tree.nodes[n]
	for _, i := range frs {
		if s.tuse[n][i] > nd.subtree[i] {
			return false
		}
	}
	return true
}
