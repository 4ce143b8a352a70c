package allocator

import "math/bits"

// The placements other than the fragmentation-aware default, on the same
// free-count buckets. Pods are placed one by one, each by the rule:
//
//   - BestFit: the node with the fewest free GPUs that fit the pod;
//   - Spread: the node with the most free GPUs;
//   - Random: a node drawn uniformly among those that fit the pod.
//
// Ties go to the node first by name. A host requirement applies the rule
// once, to nodes that fit every pod; a rack or block requirement first
// picks the domain by the same rule on the domains' free GPUs (Random:
// uniformly among the domains that can host every pod; ties by name),
// then places inside it.

// rng is splitmix64: small, fast and good enough to spread placements.
type rng struct{ x uint64 }

func (r *rng) next() uint64 {
	r.x += 0x9e3779b97f4a7c15
	z := r.x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n), n > 0.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// placementRNG seeds the random placement of workload id: FNV-1a of the
// ID mixed with the policy's seed.
func (s *Snapshot) placementRNG(id string) *rng {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return &rng{x: h ^ s.ix.seed*0x9e3779b97f4a7c15}
}

// pickCount chooses a free count v >= need among the buckets cnt (nodes
// per free count) by the placement rule, and for Random the index of the
// node within that bucket. ok is false if no node has need free GPUs.
func (s *Snapshot) pickCount(cnt []int32, need int, r *rng) (v, idx int, ok bool) {
	switch s.ix.placement {
	case placeBestFit:
		for v := need; v < len(cnt); v++ {
			if cnt[v] > 0 {
				return v, 0, true
			}
		}
	case placeSpread:
		for v := len(cnt) - 1; v >= need; v-- {
			if cnt[v] > 0 {
				return v, 0, true
			}
		}
	case placeRandom:
		total := 0
		for v := need; v < len(cnt); v++ {
			total += int(cnt[v])
		}
		if total == 0 {
			return 0, 0, false
		}
		i := r.intn(total)
		for v := need; v < len(cnt); v++ {
			if i < int(cnt[v]) {
				return v, i, true
			}
			i -= int(cnt[v])
		}
	}
	return 0, 0, false
}

// nthNode returns the idx-th node, by name, of flavor f with v free GPUs.
func (s *Snapshot) nthNode(f, v, idx int) int {
	for w, word := range s.fl[f].bits[v] {
		if c := bits.OnesCount64(word); idx >= c {
			idx -= c
			continue
		}
		for ; idx > 0; idx-- {
			word &= word - 1
		}
		return s.ix.flavors[f].nodes[w*64+bits.TrailingZeros64(word)]
	}
	return -1
}

// placeSimple is place for BestFit, Spread and Random.
func (s *Snapshot) placeSimple(c cand, topo Level, id string) []int32 {
	f, pods, k := int(c.f), int(c.pods), int(c.per)
	st := &s.fl[f]
	var r *rng
	if s.ix.placement == placeRandom {
		r = s.placementRNG(id)
	}
	nodes := make([]int32, 0, pods)
	switch topo {
	case LevelNone:
		for range pods {
			v, idx, _ := s.pickCount(st.cnt, k, r)
			n := s.nthNode(f, v, idx)
			nodes = append(nodes, int32(n))
			s.setFree(n, int32(v-k))
		}
	case LevelHost:
		v, idx, _ := s.pickCount(st.cnt, pods*k, r)
		n := s.nthNode(f, v, idx)
		for range pods {
			nodes = append(nodes, int32(n))
		}
		return nodes // nothing was changed
	case LevelRack, LevelBlock:
		doms, cnts, free, infos := s.ix.flavors[f].racks, s.rackCnt, s.rackFree, s.ix.racks
		if topo == LevelBlock {
			doms, cnts, free, infos = s.ix.flavors[f].blocks, s.blockCnt, s.blockFree, s.ix.blocks
		}
		fits := func(d int) bool { return free[d] >= pods*k && podCap(cnts[d], k, pods) }
		best := -1
		if r != nil {
			n := 0
			for _, d := range doms {
				if fits(d) {
					n++
				}
			}
			i := r.intn(n) // feasible() said at least one fits
			for _, d := range doms {
				if fits(d) {
					if i == 0 {
						best = d
						break
					}
					i--
				}
			}
		} else {
			for _, d := range doms {
				if !fits(d) {
					continue
				}
				if best < 0 || (s.ix.placement == placeBestFit && free[d] < free[best]) ||
					(s.ix.placement == placeSpread && free[d] > free[best]) {
					best = d
				}
			}
		}
		for range pods {
			n := s.pickInDomain(infos[best].nodes, k, r)
			nodes = append(nodes, int32(n))
			s.setFree(n, s.nodeFree[n]-int32(k))
		}
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		s.setFree(int(n), s.nodeFree[n]+int32(k))
	}
	return nodes
}

// pickInDomain chooses, among nodes (in name order) with at least k free
// GPUs, one by the placement rule.
func (s *Snapshot) pickInDomain(nodes []int, k int, r *rng) int {
	if r != nil {
		n := 0
		for _, m := range nodes {
			if int(s.nodeFree[m]) >= k {
				n++
			}
		}
		i := r.intn(n)
		for _, m := range nodes {
			if int(s.nodeFree[m]) >= k {
				if i == 0 {
					return m
				}
				i--
			}
		}
	}
	best := -1
	for _, m := range nodes {
		v := s.nodeFree[m]
		if int(v) < k {
			continue
		}
		if best < 0 || (s.ix.placement == placeBestFit && v < s.nodeFree[best]) ||
			(s.ix.placement == placeSpread && v > s.nodeFree[best]) {
			best = m
		}
	}
	return best
}
