package allocator

import (
	"math/bits"
	"slices"
)

// Placement when pods ask for CPU or memory and nodes count them (as
// Kueue's Topology Aware Scheduling counts every resource a pod asks
// for against its node's allocatable): each pod needs a node with its
// GPUs, CPU and memory free. Pods of a workload are equal, so a node
// hosts min over the resources of free/per-pod of them, and the pods fit
// a set of nodes exactly when those counts add up to the pods. The
// choice of node follows the policy's rule on GPUs (fragmentation-aware:
// where measure (a) grows least, ties to the node left with the fewest
// free GPUs, then the name; best-fit, spread and random as in
// placement_simple.go) among the nodes with room for a whole pod; a host,
// rack or block requirement picks the domain whose greedy placement
// grows the measure least (ties by name). This is a node scan, used only
// for such pods; GPU-only pods use the free-count buckets.

// needsRes reports whether pods of per must be placed by resources.
func (s *Snapshot) needsRes(per resVec) bool {
	return s.nodeCPU != nil && (per[ResourceCPU] > 0 || per[ResourceMemory] > 0)
}

// podsOn is how many pods of per node n can host with free GPUs g, CPU
// c and memory m (a resource the node does not count never limits).
func (s *Snapshot) podsOn(n int, per resVec, g int32, c, m int64) int {
	ni := &s.ix.nodes[n]
	k := int(per[ResourceGPU])
	have := int(g) / k
	if ni.cpu > 0 && per[ResourceCPU] > 0 {
		have = min(have, int(max(0, c)/per[ResourceCPU]))
	}
	if ni.mem > 0 && per[ResourceMemory] > 0 {
		have = min(have, int(max(0, m)/per[ResourceMemory]))
	}
	return have
}

func (s *Snapshot) podsNow(n int, per resVec) int {
	return s.podsOn(n, per, s.nodeFree[n], s.nodeCPU[n], s.nodeMem[n])
}

// possibleRes reports whether c's pods of per fit flavor f under topo
// when every node is free.
func (ix *index) possibleRes(f int, c cand, topo Level, per resVec) bool {
	if per[ResourceCPU] == 0 && per[ResourceMemory] == 0 {
		return true
	}
	full := func(n int) int {
		ni := &ix.nodes[n]
		k := int(per[ResourceGPU])
		have := ni.gpus / k
		if ni.cpu > 0 && per[ResourceCPU] > 0 {
			have = min(have, int(ni.cpu/per[ResourceCPU]))
		}
		if ni.mem > 0 && per[ResourceMemory] > 0 {
			have = min(have, int(ni.mem/per[ResourceMemory]))
		}
		return have
	}
	return ix.fitsDomains(f, topo, int(c.pods), full)
}

// fitsDomains reports whether pods pods fit flavor f's nodes under topo,
// a node hosting cap(n) of them.
func (ix *index) fitsDomains(f int, topo Level, pods int, capOf func(n int) int) bool {
	fi := &ix.flavors[f]
	switch topo {
	case LevelHost:
		for _, n := range fi.nodes {
			if capOf(n) >= pods {
				return true
			}
		}
		return false
	case LevelRack, LevelBlock:
		doms, infos := fi.racks, ix.racks
		if topo == LevelBlock {
			doms, infos = fi.blocks, ix.blocks
		}
		for _, d := range doms {
			have := 0
			for _, n := range infos[d].nodes {
				have += capOf(n)
			}
			if have >= pods {
				return true
			}
		}
		return false
	}
	have := 0
	for _, n := range fi.nodes {
		if have += capOf(n); have >= pods {
			return true
		}
	}
	return false
}

// feasibleRes is feasible for pods that ask for CPU or memory: the GPUs
// must fit first (the buckets answer that at once); without a topology
// requirement or for one host, only the nodes with room for a pod's
// GPUs are looked at.
func (s *Snapshot) feasibleRes(c cand, topo Level, per resVec) bool {
	if !s.feasible(c, topo) {
		return false
	}
	f, pods, k := int(c.f), int(c.pods), int(per[ResourceGPU])
	switch topo {
	case LevelNone:
		have := 0
		s.nodesWithFree(f, k, func(n int) bool {
			have += s.podsNow(n, per)
			return have < pods
		})
		return have >= pods
	case LevelHost:
		ok := false
		s.nodesWithFree(f, pods*k, func(n int) bool {
			ok = s.podsNow(n, per) >= pods
			return !ok
		})
		return ok
	}
	return s.ix.fitsDomains(f, topo, pods, func(n int) int { return s.podsNow(n, per) })
}

// byPos orders nodes of a flavor by name.
func (s *Snapshot) byPos(a, b int) int { return s.ix.nodes[a].pos - s.ix.nodes[b].pos }

// nodesWithFree calls fn for flavor f's nodes with at least k free GPUs,
// most free first, by name within a count, until fn returns false.
func (s *Snapshot) nodesWithFree(f, k int, fn func(n int) bool) {
	st := &s.fl[f]
	nodes := s.ix.flavors[f].nodes
	for v := len(st.bits) - 1; v >= max(k, 1); v-- {
		if st.cnt[v] == 0 {
			continue
		}
		for w, word := range st.bits[v] {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &^= 1 << b
				if !fn(nodes[w*64+b]) {
					return
				}
			}
		}
	}
}

// placeRes is place for pods that ask for CPU or memory. s is unchanged.
func (s *Snapshot) placeRes(c cand, topo Level, id string, per resVec) []int32 {
	if !s.feasibleRes(c, topo, per) {
		return nil
	}
	f, pods := int(c.f), int(c.pods)
	fi := &s.ix.flavors[f]
	frag := s.fragTable(f)
	k := int32(per[ResourceGPU])
	var r *rng
	if s.ix.placement == placeRandom {
		r = s.placementRNG(id)
	}
	// score ranks placing k more GPUs on a node with v free: lower wins.
	score := func(v int32) int64 {
		switch s.ix.placement {
		case placeBestFit:
			return int64(v)
		case placeSpread:
			return -int64(v)
		case placeRandom:
			return 0
		}
		return frag[v-k] - frag[v]
	}
	// greedy places the pods on nodes (nil: the flavor's nodes with room
	// for a pod's GPUs), one by one, and returns them and the total
	// score; the state is restored before it returns.
	greedy := func(nodes []int) ([]int32, int64, bool) {
		out := make([]int32, 0, pods)
		var total int64
		var scan []int
		for range pods {
			best, bestS := -1, int64(0)
			var ties []int
			if nodes == nil {
				scan = scan[:0]
				s.nodesWithFree(f, int(k), func(n int) bool { scan = append(scan, n); return true })
				slices.SortFunc(scan, s.byPos)
			} else {
				scan = nodes
			}
			for _, n := range scan {
				if s.podsNow(n, per) < 1 {
					continue
				}
				v := s.nodeFree[n]
				sc := score(v)
				switch {
				case best < 0 || sc < bestS || (sc == bestS && s.ix.placement != placeRandom && v < s.nodeFree[best]):
					best, bestS = n, sc
					ties = append(ties[:0], n)
				case sc == bestS:
					ties = append(ties, n)
				}
			}
			if best < 0 {
				s.unplace(out, per)
				return nil, 0, false
			}
			if r != nil {
				best = ties[r.intn(len(ties))]
			}
			total += bestS
			out = append(out, int32(best))
			s.takeRes(best, per, 1)
		}
		s.unplace(out, per)
		return out, total, true
	}
	switch topo {
	case LevelNone:
		nodes, _, _ := greedy(nil)
		return nodes
	case LevelHost:
		best, bestS := -1, int64(0)
		var hosts []int
		s.nodesWithFree(f, pods*int(k), func(n int) bool { hosts = append(hosts, n); return true })
		slices.SortFunc(hosts, s.byPos)
		for _, n := range hosts {
			if s.podsNow(n, per) < pods {
				continue
			}
			v := s.nodeFree[n]
			sc := score(v)
			if s.ix.placement == placeFrag {
				sc = frag[int(v)-pods*int(k)] - frag[v]
			}
			if best < 0 || sc < bestS {
				best, bestS = n, sc
			}
		}
		if best < 0 {
			return nil
		}
		out := make([]int32, pods)
		for i := range out {
			out[i] = int32(best)
		}
		return out
	}
	doms, infos := fi.racks, s.ix.racks
	if topo == LevelBlock {
		doms, infos = fi.blocks, s.ix.blocks
	}
	var best []int32
	bestS := int64(0)
	for _, d := range doms {
		nodes, total, ok := greedy(infos[d].nodes)
		if ok && (best == nil || total < bestS) {
			best, bestS = nodes, total
		}
	}
	return best
}

// takeRes takes (pods > 0) or gives back (pods < 0) pods pods of per on
// node n, GPUs included.
func (s *Snapshot) takeRes(n int, per resVec, pods int) {
	s.setFree(n, s.nodeFree[n]-int32(pods)*int32(per[ResourceGPU]))
	s.nodeCPU[n] -= int64(pods) * per[ResourceCPU]
	s.nodeMem[n] -= int64(pods) * per[ResourceMemory]
}

func (s *Snapshot) unplace(nodes []int32, per resVec) {
	for _, n := range slices.Backward(nodes) {
		s.takeRes(int(n), per, -1)
	}
}

// placeFor places c's pods for workload w under topo: by resources when
// its pods ask for CPU or memory and nodes count them, else by GPUs.
func (s *Snapshot) placeFor(c cand, w *Workload) []int32 {
	if per := reqOf(w).perPod(c.pods); s.needsRes(per) {
		return s.placeRes(c, w.Topology, w.ID, per)
	}
	return s.place(c, w.Topology, w.ID)
}

// feasibleFor is feasible for workload w's pods.
func (s *Snapshot) feasibleFor(c cand, w *Workload, topo Level) bool {
	if per := reqOf(w).perPod(c.pods); s.needsRes(per) {
		return s.feasibleRes(c, topo, per)
	}
	return s.feasible(c, topo)
}
