package allocator

import (
	"math"
	"slices"
)

// Mix maps a pod size (GPUs per pod) to its share of recent requests. The
// shares need not sum to 1: users of a Mix normalise it. Sizes <= 0 and
// shares that are not positive finite numbers are ignored; a Mix with
// nothing left is treated as nil.
type Mix map[int]float64

// FlavorCapacity is the capacity view of one flavor.
type FlavorCapacity struct {
	Flavor                   string
	Nodes, Total, Used, Free int
	// Largest is the largest request (in GPUs, valid per PodShape) that
	// fits now with each topology requirement: LevelNone, LevelHost,
	// LevelRack, LevelBlock. 0 if none fits.
	Largest map[Level]int
	// Fragmented is DESIGN.md's measure (a) in GPUs: the expected number
	// of free GPUs that cannot host a typical pod. FragPctAll =
	// 100*Fragmented/Total, FragPctFree = 100*Fragmented/Free (0 if
	// Free == 0).
	Fragmented, FragPctAll, FragPctFree float64
}

type mixShare struct {
	size int
	p    float64
}

// normalize returns the mix as shares summing to 1, by ascending size.
// A nil or empty mix is uniform over the sizes 1, 2, 4, 8 that are at most
// maxSize (all four when maxSize <= 0).
func (m Mix) normalize(maxSize int) []mixShare {
	var out []mixShare
	total := 0.0
	for k, p := range m {
		if k <= 0 || !(p > 0) || math.IsInf(p, 0) {
			continue
		}
		out = append(out, mixShare{k, p})
		total += p
	}
	if len(out) == 0 {
		for _, k := range []int{1, 2, 4, 8} {
			if maxSize <= 0 || k <= maxSize {
				out = append(out, mixShare{k, 1})
				total++
			}
		}
	}
	slices.SortFunc(out, func(a, b mixShare) int { return a.size - b.size })
	for i := range out {
		out[i].p /= total
	}
	return out
}

// Fragmentation is measure (a) over the given per-node free GPU counts:
// Σ_k p_k · Σ_n free_n·[free_n < k], the expected number of free GPUs
// that cannot host a pod whose size k is drawn from mix (p normalised;
// nil means uniform over 1, 2, 4 and 8).
func Fragmentation(free []int, mix Mix) float64 {
	shares := mix.normalize(0)
	total := 0.0
	for _, f := range free {
		if f <= 0 {
			continue
		}
		total += float64(f) * tailShare(shares, f)
	}
	return total
}

// tailShare is Σ p_k over sizes k > v.
func tailShare(shares []mixShare, v int) float64 {
	t := 0.0
	for _, sh := range shares {
		if sh.size > v {
			t += sh.p
		}
	}
	return t
}

// fragTable returns, for flavor f, fragS[x] = x · Σ_{k > x} n_k where n_k
// counts the pending and admitted requests with pod size k on f (uniform
// over 1, 2, 4, 8 when there are none). fragS is measure (a) of one node
// with x free GPUs, scaled by the number of requests, in integers so that
// ties are exact. Placing a pod of k GPUs on a node with v free GPUs
// changes the measure by fragS[v−k] − fragS[v].
func (s *Snapshot) fragTable(f int) []int64 {
	st := &s.fl[f]
	if !st.dirty && st.fragS != nil {
		return st.fragS
	}
	fi := &s.ix.flavors[f]
	if len(st.fragS) != fi.maxGPUs+1 {
		st.fragS = make([]int64, fi.maxGPUs+1)
	}
	counts := st.mix
	empty := true
	for _, n := range counts {
		if n > 0 {
			empty = false
			break
		}
	}
	var tail int64
	for x := fi.maxGPUs; x >= 0; x-- {
		st.fragS[x] = int64(x) * tail
		if x >= 1 && x <= fi.gpn {
			if empty {
				if x == 1 || x == 2 || x == 4 || x == 8 {
					tail++
				}
			} else {
				tail += int64(counts[x])
			}
		}
	}
	st.dirty = false
	return st.fragS
}

// Capacity reports, per flavor in Cluster order, totals, the largest
// request that fits now at each topology level, and measure (a) of
// fragmentation under mix (nil or empty: uniform over the sizes 1, 2, 4, 8
// that are at most the flavor's GPUsPerNode). It only reads s (no cache
// is filled), so it may run on a snapshot nobody changes from several
// goroutines at once.
func (s *Snapshot) Capacity(mix Mix) []FlavorCapacity {
	out := make([]FlavorCapacity, 0, len(s.ix.flavors))
	for f := range s.ix.flavors {
		fi := &s.ix.flavors[f]
		st := &s.fl[f]
		fc := FlavorCapacity{
			Flavor:  fi.name,
			Nodes:   len(fi.nodes),
			Total:   fi.total,
			Free:    st.free,
			Used:    fi.total - st.free,
			Largest: map[Level]int{},
		}
		shares := mix.normalize(fi.gpn)
		for v, n := range st.cnt {
			if n > 0 && v > 0 {
				fc.Fragmented += float64(n) * float64(v) * tailShare(shares, v)
			}
		}
		if fc.Total > 0 {
			fc.FragPctAll = 100 * fc.Fragmented / float64(fc.Total)
		}
		if fc.Free > 0 {
			fc.FragPctFree = 100 * fc.Fragmented / float64(fc.Free)
		}
		for _, lvl := range []Level{LevelNone, LevelHost, LevelRack, LevelBlock} {
			fc.Largest[lvl] = s.largest(f, lvl)
		}
		out = append(out, fc)
	}
	return out
}

// largest is the largest valid request that fits on flavor f now with
// topology requirement lvl.
func (s *Snapshot) largest(f int, lvl Level) int {
	fi := &s.ix.flavors[f]
	upper := s.fl[f].free
	switch lvl {
	case LevelHost:
		upper = 0
		for v := len(s.fl[f].cnt) - 1; v > 0; v-- {
			if s.fl[f].cnt[v] > 0 {
				upper = v
				break
			}
		}
	case LevelRack:
		upper = 0
		for _, d := range fi.racks {
			upper = max(upper, s.rackFree[d])
		}
	case LevelBlock:
		upper = 0
		for _, d := range fi.blocks {
			upper = max(upper, s.blockFree[d])
		}
	}
	for g := upper; g > 0; g-- {
		if !validShape(g, fi.gpn) { // what PodShape refuses, without formatting why
			continue
		}
		pods, per, err := PodShape(g, fi.gpn)
		if err != nil {
			continue
		}
		if s.feasible(cand{f: int32(f), pods: int32(pods), per: int32(per)}, lvl) {
			return g
		}
	}
	return 0
}
