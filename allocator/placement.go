package allocator

import (
	"fmt"
	"math/bits"
)

// MaxRequestGPUs bounds the size of a request PodShape accepts.
const MaxRequestGPUs = 1 << 24

// PodShape splits a request of gpus GPUs on a flavor with gpusPerNode GPUs
// per node into pods = ceil(gpus/gpusPerNode) equal pods of perPod GPUs.
// It fails when gpus <= 0, gpusPerNode <= 0, or gpus is not a multiple of
// pods; the error then names the nearest valid sizes below and above.
func PodShape(gpus, gpusPerNode int) (pods, perPod int, err error) {
	if gpusPerNode <= 0 {
		return 0, 0, fmt.Errorf("%d GPUs per node is not a valid node size", gpusPerNode)
	}
	if gpus <= 0 {
		return 0, 0, fmt.Errorf("a request needs at least 1 GPU, not %d", gpus)
	}
	if gpus > MaxRequestGPUs {
		return 0, 0, fmt.Errorf("%d GPUs is more than any cluster has (at most %d)", gpus, MaxRequestGPUs)
	}
	pods = (gpus + gpusPerNode - 1) / gpusPerNode
	if gpus%pods != 0 {
		below, above := gpus-1, gpus+1
		for !validShape(below, gpusPerNode) {
			below--
		}
		for !validShape(above, gpusPerNode) {
			above++
		}
		return 0, 0, fmt.Errorf("%d GPUs cannot be split into %d equal pods of at most %d GPUs (one pod per node); the nearest sizes that can are %d and %d", gpus, pods, gpusPerNode, below, above)
	}
	return pods, gpus / pods, nil
}

func validShape(gpus, gpn int) bool {
	if gpus <= gpn {
		return true
	}
	pods := (gpus + gpn - 1) / gpn
	return gpus%pods == 0
}

// podCap reports whether the nodes counted by cnt (nodes per free count)
// can host pods pods of k GPUs. Any placement of one pod lowers the
// capacity Σ floor(free/k) by exactly one, so this is exact.
func podCap(cnt []int32, k, pods int) bool {
	have := 0
	for v := k; v < len(cnt); v++ {
		if cnt[v] > 0 {
			have += int(cnt[v]) * (v / k)
			if have >= pods {
				return true
			}
		}
	}
	return have >= pods
}

// feasible reports whether c's pods fit on the free GPUs of its flavor
// under topology requirement topo, ignoring quota.
func (s *Snapshot) feasible(c cand, topo Level) bool {
	f, pods, k := int(c.f), int(c.pods), int(c.per)
	need := pods * k
	st := &s.fl[f]
	if need > st.free {
		return false
	}
	switch topo {
	case LevelHost:
		for v := need; v < len(st.cnt); v++ {
			if st.cnt[v] > 0 {
				return true
			}
		}
		return false
	case LevelRack:
		for _, d := range s.ix.flavors[f].racks {
			if s.rackFree[d] >= need && podCap(s.rackCnt[d], k, pods) {
				return true
			}
		}
		return false
	case LevelBlock:
		for _, d := range s.ix.flavors[f].blocks {
			if s.blockFree[d] >= need && podCap(s.blockCnt[d], k, pods) {
				return true
			}
		}
		return false
	}
	return podCap(st.cnt, k, pods)
}

// place chooses nodes for c's pods under topo by the policy's placement
// (see the package doc), or returns nil if they do not fit. id names the
// workload being placed; only PlacementRandom uses it. s is unchanged.
func (s *Snapshot) place(c cand, topo Level, id string) []int32 {
	if !s.feasible(c, topo) {
		return nil
	}
	if s.ix.placement != placeFrag {
		return s.placeSimple(c, topo, id)
	}
	f, pods, k := int(c.f), int(c.pods), int(c.per)
	frag := s.fragTable(f)
	st := &s.fl[f]
	nodes := make([]int32, 0, pods)
	switch topo {
	case LevelNone:
		for range pods {
			best, bestD := -1, int64(0)
			for v := k; v < len(st.cnt); v++ {
				if st.cnt[v] == 0 {
					continue
				}
				if d := frag[v-k] - frag[v]; best < 0 || d < bestD {
					best, bestD = v, d
				}
			}
			n := s.firstNode(f, best)
			nodes = append(nodes, int32(n))
			s.setFree(n, int32(best-k))
		}
	case LevelHost:
		need := pods * k
		best, bestD := -1, int64(0)
		for v := need; v < len(st.cnt); v++ {
			if st.cnt[v] == 0 {
				continue
			}
			if d := frag[v-need] - frag[v]; best < 0 || d < bestD {
				best, bestD = v, d
			}
		}
		n := s.firstNode(f, best)
		for range pods {
			nodes = append(nodes, int32(n))
		}
		return nodes // nothing was changed
	case LevelRack, LevelBlock:
		doms, cnts, free := s.ix.flavors[f].racks, s.rackCnt, s.rackFree
		infos := s.ix.racks
		if topo == LevelBlock {
			doms, cnts, free, infos = s.ix.flavors[f].blocks, s.blockCnt, s.blockFree, s.ix.blocks
		}
		sc := s.scratchBuf()
		best, bestD := -1, int64(0)
		for _, d := range doms {
			if free[d] < pods*k || !podCap(cnts[d], k, pods) {
				continue
			}
			sc.cnt = append(sc.cnt[:0], cnts[d]...)
			if dd, ok := greedyDelta(sc.cnt, frag, k, pods); ok && (best < 0 || dd < bestD) {
				best, bestD = d, dd
			}
		}
		for range pods {
			bn, bd, bv := -1, int64(0), int32(0)
			for _, n := range infos[best].nodes {
				v := s.nodeFree[n]
				if int(v) < k {
					continue
				}
				d := frag[int(v)-k] - frag[v]
				if bn < 0 || d < bd || (d == bd && v < bv) {
					bn, bd, bv = n, d, v
				}
			}
			nodes = append(nodes, int32(bn))
			s.setFree(bn, bv-int32(k))
		}
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		s.setFree(int(n), s.nodeFree[n]+int32(k))
	}
	return nodes
}

// greedyDelta places pods pods of k GPUs one by one on the free-count
// histogram cnt (modified), each where the scaled measure grows least,
// and returns the total growth.
func greedyDelta(cnt []int32, frag []int64, k, pods int) (int64, bool) {
	var total int64
	for range pods {
		best, bestD := -1, int64(0)
		for v := k; v < len(cnt); v++ {
			if cnt[v] == 0 {
				continue
			}
			if d := frag[v-k] - frag[v]; best < 0 || d < bestD {
				best, bestD = v, d
			}
		}
		if best < 0 {
			return 0, false
		}
		cnt[best]--
		cnt[best-k]++
		total += bestD
	}
	return total, true
}

// firstNode returns the first node, by name, of flavor f with v free GPUs.
func (s *Snapshot) firstNode(f, v int) int {
	for w, word := range s.fl[f].bits[v] {
		if word != 0 {
			return s.ix.flavors[f].nodes[w*64+bits.TrailingZeros64(word)]
		}
	}
	return -1
}

// sameDomain reports whether nodes satisfy topology requirement topo.
func (s *Snapshot) sameDomain(topo Level, nodes []int32) bool {
	for _, n := range nodes[1:] {
		a, b := &s.ix.nodes[nodes[0]], &s.ix.nodes[n]
		switch topo {
		case LevelHost:
			if nodes[0] != n {
				return false
			}
		case LevelRack:
			if a.rack != b.rack {
				return false
			}
		case LevelBlock:
			if a.block != b.block {
				return false
			}
		}
	}
	return true
}

type scratch struct {
	cnt        []int32
	cyc        *cycleState
	h          []int32 // missWithout: free counts with the candidates gone
	seen       []bool
	touched    []int32
	dom        []int
	u          []int // greedyFits: usage per queue
	pos        []int // greedyFits: merge positions
	visited    []int32
	own        []int32   // getTargets: the queue's own candidates
	lists      [][]int32 // getTargets: other queues' candidate lists
	removed    []int32   // shrink: the candidates removed so far
	domHave    []int
	domSeen    []bool
	domTouched []int
	// classicalTargets' candidate lists
	same, hier, prio, all []pcand
}

func (s *Snapshot) scratchBuf() *scratch {
	if s.scratch == nil {
		s.scratch = &scratch{}
	}
	return s.scratch
}
