package allocator

import (
	"slices"
	"time"
)

func sharesFlavor(a, b []cand) bool {
	for _, x := range a {
		for _, y := range b {
			if x.f == y.f {
				return true
			}
		}
	}
	return false
}

// flavorSets numbers the distinct candidate-flavor sets of the
// workloads of an order (the flavors only: classes of other sizes on the
// same flavors share one): set[i] is that of order[i], overlap[d] the
// sets that share a flavor with set d (d included).
type flavorSets struct {
	set     []int32
	overlap [][]int32
}

func (s *Snapshot) flavorSetsOf(order []int32) flavorSets {
	setOf := make([]int32, len(s.classes)) // class → set id + 1
	var sets [][]cand
	fs := flavorSets{set: make([]int32, len(order))}
	sameFlavors := func(a, b []cand) bool {
		return slices.EqualFunc(a, b, func(x, y cand) bool { return x.f == y.f })
	}
	for i, slot := range order {
		cls := s.ws[slot].cls
		if setOf[cls] == 0 {
			cands := s.classes[cls].cands
			d := -1
			for j, other := range sets {
				if sameFlavors(other, cands) {
					d = j
					break
				}
			}
			if d < 0 {
				d = len(sets)
				sets = append(sets, cands)
			}
			setOf[cls] = int32(d) + 1
		}
		fs.set[i] = setOf[cls] - 1
	}
	fs.overlap = make([][]int32, len(sets))
	for a := range sets {
		for b := range sets {
			if sharesFlavor(sets[a], sets[b]) {
				fs.overlap[a] = append(fs.overlap[a], int32(b))
			}
		}
	}
	return fs
}

// aheadCounts computes, for each workload of order, how many before it
// share a candidate flavor (ahead) and how many of those have a higher
// priority and a later Created (higher), in O(n log n) per distinct set
// of candidate flavors (fs, flavorSetsOf(order)).
func (s *Snapshot) aheadCounts(order []int32, fs *flavorSets) (ahead, higher []int) {
	n := len(order)
	ahead, higher = make([]int, n), make([]int, n)
	set, overlap := fs.set, fs.overlap
	// Created ranks for the Fenwick trees.
	times := make([]time.Time, n)
	for i, slot := range order {
		times[i] = s.ws[slot].w.Created
	}
	sorted := slices.Clone(times)
	slices.SortFunc(sorted, func(a, b time.Time) int { return a.Compare(b) })
	sorted = slices.CompactFunc(sorted, func(a, b time.Time) bool { return a.Equal(b) })
	rank := make([]int, n)
	for i, t := range times {
		r, _ := slices.BinarySearchFunc(sorted, t, func(a, b time.Time) int { return a.Compare(b) })
		rank[i] = r
	}
	count := make([]int, len(overlap))
	trees := make([]fenwick, len(overlap))
	inTree := make([]int, len(overlap))
	for d := range trees {
		trees[d] = make(fenwick, len(sorted)+1)
	}
	groupStart := 0
	for i, slot := range order {
		if i > 0 && s.ws[order[i-1]].w.Priority != s.ws[slot].w.Priority {
			for j := groupStart; j < i; j++ {
				trees[set[j]].add(rank[j])
				inTree[set[j]]++
			}
			groupStart = i
		}
		for _, e := range overlap[set[i]] {
			ahead[i] += count[e]
			higher[i] += inTree[e] - trees[e].prefix(rank[i])
		}
		count[set[i]]++
	}
	return ahead, higher
}

// fenwick counts items by rank.
type fenwick []int

func (f fenwick) add(r int) {
	for i := r + 1; i < len(f); i += i & -i {
		f[i]++
	}
}

// prefix counts items with rank <= r.
func (f fenwick) prefix(r int) int {
	n := 0
	for i := r + 1; i > 0; i -= i & -i {
		n += f[i]
	}
	return n
}
