package allocator

// What the index says about fits on an empty cluster and a queue's
// quota, before any workload is placed.

// possible reports whether pods pods of per GPUs fit flavor f under
// topology topo when every node is free.
func (ix *index) possible(f, pods, per int, topo Level) bool {
	fi := &ix.flavors[f]
	switch topo {
	case LevelHost:
		for v := pods * per; v < len(fi.full); v++ {
			if fi.full[v] > 0 {
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
			if podCap(infos[d].full, per, pods) {
				return true
			}
		}
		return false
	}
	return podCap(fi.full, per, pods)
}

// coversAll reports whether queue q has quota on flavor f for every
// resource req asks for: Kueue admits nothing that asks for a resource
// its ClusterQueue does not cover.
func (ix *index) coversAll(q, f int, req resVec) bool {
	if !ix.queues[q].quota[f].has {
		return false
	}
	for r := ResourceCPU; r < numResources; r++ {
		if req[r] > 0 && !ix.tree.nodes[q].has[fr(f, r)] {
			return false
		}
	}
	return true
}

// potential is the most GPUs of flavor f queue q could ever have admitted
// (Kueue's potentialAvailable): N without a cohort, otherwise what it
// keeps plus what its cohort tree could lend it, within borrowing
// limits.
func (ix *index) potential(q, f int) int {
	return int(ix.tree.potential(q, fr(f, ResourceGPU)))
}
