package simulate

import (
	"math"
	"math/rand/v2"
	"slices"
)

// The packer: the packing mode's cluster model and placements (see
// packing.go for what they are).

// ptype is a pod type: what it asks for.
type ptype struct {
	gpus   int
	milli  int32
	cpu    int64
	mem    int64
	models uint64 // allowed models (bit per model); all ones for any
}

// mtype is a typical task type of a fragmentation measure; gpus 0 is a
// CPU-only type (fgd-scored's measure only), for which all of a node's
// free GPU capacity counts.
type mtype struct {
	gpus   int
	milli  int32
	cpu    int64
	models uint64
	p      float64
	mi     int // index in measure.millis
}

// measure is a fragmentation measure: its typical task types, the
// distinct per-GPU shares they ask for, and scratch space.
type measure struct {
	types  []mtype
	millis []int32
	part   []int64 // per millis entry
}

func newMeasure(types []mtype, millis []int32) *measure {
	return &measure{types: types, millis: millis, part: make([]int64, len(millis))}
}

// pnode is one node in the packer.
type pnode struct {
	name     string
	rank     int // fgd-scored's tie-break: the lower rank wins
	model    int
	free     []int32 // per GPU, thousandths
	cpu, mem int64   // free
	fullFree int     // GPUs entirely free
	maxFree  int32
	sumFree  int64
	frag     float64 // F_n, kept up to date
	dfrag    float64 // F_n by the placement's measure (frag unless fgd-scored)
	ver      uint32  // bumped at every change
	cacheVer []uint32
	cacheD   []float64 // per pod type: ΔF of the best GPU choice
	cacheG   []int16   // per pod type: that GPU (shares)
}

type packer struct {
	nodes  []*pnode
	types  []ptype
	meas   *measure // the reported measure
	dec    *measure // the measure the placement decides by (meas unless fgd-scored)
	policy string
	rnd    *rand.Rand
	cap    float64 // GPUs
	alloc  int64   // allocated, thousandths
	frag   float64
	failed int
	tmp    []int32 // scratch free list
}

// newPacker builds a packer; dec is the measure the placement decides by
// (nil: meas).
func newPacker(nodes []Node, modelIdx map[string]int, types []ptype, meas, dec *measure, policy string, seed uint64) *packer {
	if dec == nil {
		dec = meas
	}
	pk := &packer{types: types, meas: meas, dec: dec, policy: policy, rnd: rand.New(rand.NewPCG(seed, 0x5eed))}
	for _, n := range nodes {
		pn := &pnode{name: n.Name, model: modelIdx[Flavor(n.Model)], free: make([]int32, n.GPUs), cpu: n.CPU, mem: n.Memory,
			cacheVer: make([]uint32, len(types)), cacheD: make([]float64, len(types)), cacheG: make([]int16, len(types))}
		if pn.cpu == 0 {
			pn.cpu = math.MaxInt64
		}
		if pn.mem == 0 {
			pn.mem = math.MaxInt64
		}
		for g := range pn.free {
			pn.free[g] = 1000
		}
		pn.ver = 1
		pk.refresh(pn)
		pk.frag += pn.frag
		pk.cap += float64(n.GPUs)
		pk.nodes = append(pk.nodes, pn)
	}
	if policy == "fgd-scored" {
		// The artifact's simulator creates its nodes under new names, a
		// number from a seeded random permutation of the nodes (in name
		// order) before the name (pkg/simulator/simulator.go,
		// syncClusterResourceList): its selectHost's "first by name" is
		// a random node order drawn once per run.
		for i, r := range rand.New(rand.NewPCG(seed, 0x4a3e)).Perm(len(pk.nodes)) {
			pk.nodes[i].rank = r
		}
	}
	return pk
}

// refresh recomputes a node's summary fields and fragmentation.
func (pk *packer) refresh(n *pnode) {
	n.fullFree, n.maxFree, n.sumFree = 0, 0, 0
	for _, f := range n.free {
		if f == 1000 {
			n.fullFree++
		}
		n.maxFree = max(n.maxFree, f)
		n.sumFree += int64(f)
	}
	n.frag = fragOf(pk.meas, n, n.free, n.cpu, n.fullFree, n.maxFree, n.sumFree)
	n.dfrag = n.frag
	if pk.dec != pk.meas {
		n.dfrag = fragOf(pk.dec, n, n.free, n.cpu, n.fullFree, n.maxFree, n.sumFree)
	}
}

// fragOf is F_n by measure ms for a node of n's model in the given state,
// in GPUs.
func fragOf(ms *measure, n *pnode, free []int32, cpu int64, fullFree int, maxFree int32, sumFree int64) float64 {
	if sumFree == 0 {
		return 0
	}
	for i, m := range ms.millis {
		var s int64
		for _, f := range free {
			if f < m {
				s += int64(f)
			}
		}
		ms.part[i] = s
	}
	total := 0.0
	for i := range ms.types {
		t := &ms.types[i]
		var f int64
		fits := t.gpus > 0 && t.models&(1<<n.model) != 0 && cpu >= t.cpu
		if fits {
			if t.milli == 1000 {
				fits = fullFree >= t.gpus
			} else {
				fits = maxFree >= t.milli
			}
		}
		if fits {
			f = ms.part[t.mi]
		} else {
			f = sumFree
		}
		total += t.p * float64(f)
	}
	return total / 1000
}

// fits reports whether pod type t fits node n now.
func fits(t *ptype, n *pnode) bool {
	if t.models&(1<<n.model) == 0 || n.cpu < t.cpu || n.mem < t.mem {
		return false
	}
	switch {
	case t.gpus == 0:
		return true
	case t.milli == 1000:
		return n.fullFree >= t.gpus
	}
	return n.maxFree >= t.milli
}

// delta returns the growth of n's fragmentation if a pod of type k were
// placed on it, and for a share the GPU it would take (the best, ties to
// the fuller GPU and then the lower index; for fgd-scored the first GPU
// with the best integer score, as the artifact's plugin chooses).
func (pk *packer) delta(n *pnode, k int) (float64, int) {
	if n.cacheVer[k] == n.ver {
		return n.cacheD[k], int(n.cacheG[k])
	}
	t := &pk.types[k]
	pk.tmp = append(pk.tmp[:0], n.free...)
	best, bestG := math.Inf(1), -1
	switch {
	case t.gpus == 0 || t.milli == 1000:
		taken := 0
		for g := range pk.tmp {
			if taken == t.gpus {
				break
			}
			if pk.tmp[g] == 1000 {
				pk.tmp[g] = 0
				taken++
			}
		}
		best = pk.stateFrag(n, pk.tmp, n.cpu-t.cpu) - n.dfrag
	default:
		for g, f := range n.free {
			if f < t.milli || slices.Contains(n.free[:g], f) { // same share, same outcome
				continue
			}
			pk.tmp[g] = f - t.milli
			d := pk.stateFrag(n, pk.tmp, n.cpu-t.cpu) - n.dfrag
			pk.tmp[g] = f
			switch {
			case pk.policy == "fgd-scored":
				// The artifact's plugin: the first GPU with the best
				// integer score.
				if bestG < 0 || fgdScore(d) < fgdScore(best) {
					best, bestG = d, g
				}
			case bestG < 0 || d < best || (d == best && f < n.free[bestG]):
				best, bestG = d, g
			}
		}
	}
	n.cacheVer[k], n.cacheD[k], n.cacheG[k] = n.ver, best, int16(bestG)
	return best, bestG
}

// fgdScore is the FGD artifact's score of a fragmentation growth d (in
// GPUs), negated so that lower is better: −⌊100·σ(−d)⌋.
func fgdScore(d float64) float64 { return -math.Floor(100 / (1 + math.Exp(d))) }

// stateFrag is F_n by the placement's measure with the GPUs' free shares
// free and cpu free CPU.
func (pk *packer) stateFrag(n *pnode, free []int32, cpu int64) float64 {
	full, mx, sum := 0, int32(0), int64(0)
	for _, f := range free {
		if f == 1000 {
			full++
		}
		mx = max(mx, f)
		sum += int64(f)
	}
	return fragOf(pk.dec, n, free, cpu, full, mx, sum)
}

// place puts a pod of type k on a node by the policy; false if none fits.
func (pk *packer) place(k int) bool {
	t := &pk.types[k]
	var best *pnode
	bestG := -1
	bestD := 0.0
	switch pk.policy {
	case "random":
		var cands []*pnode
		for _, n := range pk.nodes {
			if fits(t, n) {
				cands = append(cands, n)
			}
		}
		if len(cands) == 0 {
			return false
		}
		best = cands[pk.rnd.IntN(len(cands))]
		if t.gpus == 1 && t.milli < 1000 {
			var gs []int
			for g, f := range best.free {
				if f >= t.milli {
					gs = append(gs, g)
				}
			}
			bestG = gs[pk.rnd.IntN(len(gs))]
		}
	case "best-fit", "spread":
		spread := pk.policy == "spread"
		for _, n := range pk.nodes {
			if !fits(t, n) {
				continue
			}
			if best == nil || (!spread && n.sumFree < best.sumFree) || (spread && n.sumFree > best.sumFree) {
				best = n
			}
		}
		if best == nil {
			return false
		}
		if t.gpus == 1 && t.milli < 1000 {
			for g, f := range best.free {
				if f < t.milli {
					continue
				}
				if bestG < 0 || (!spread && f < best.free[bestG]) || (spread && f > best.free[bestG]) {
					bestG = g
				}
			}
		}
	case "fgd":
		for _, n := range pk.nodes {
			if !fits(t, n) {
				continue
			}
			d, g := pk.delta(n, k)
			if best == nil || d < bestD || (d == bestD && n.sumFree < best.sumFree) {
				best, bestD, bestG = n, d, g
			}
		}
		if best == nil {
			return false
		}
	case "fgd-scored":
		// As a Kubernetes score plugin in the FGD artifact's scheduler: an
		// integer score 0–100 from a sigmoid of the fragmentation's
		// decrease, in GPUs, by the artifact's typical task types; its
		// selectHost takes the best score and, among equal scores, the
		// node whose name sorts first, which is the node of lowest rank
		// (see newPacker).
		for _, n := range pk.nodes {
			if !fits(t, n) {
				continue
			}
			d, g := pk.delta(n, k)
			score := fgdScore(d)
			if best == nil || score < bestD || (score == bestD && n.rank < best.rank) {
				best, bestD, bestG = n, score, g
			}
		}
		if best == nil {
			return false
		}
	}
	pk.take(best, t, bestG)
	return true
}

// take places a pod of type t on n (a share on GPU g).
func (pk *packer) take(n *pnode, t *ptype, g int) {
	switch {
	case t.gpus == 0:
	case t.milli == 1000:
		taken := 0
		for i := range n.free {
			if taken == t.gpus {
				break
			}
			if n.free[i] == 1000 {
				n.free[i] = 0
				taken++
			}
		}
		pk.alloc += int64(t.gpus) * 1000
	default:
		n.free[g] -= t.milli
		pk.alloc += int64(t.milli)
	}
	n.cpu -= t.cpu
	n.mem -= t.mem
	pk.frag -= n.frag
	pk.refresh(n)
	pk.frag += n.frag
	n.ver++
}

// run lets the pods of order arrive, then pods drawn by r, until maxArr %
// of the GPUs have been asked for, and returns the state at every whole
// percent.
func (pk *packer) run(podType, order []int, r *rand.Rand, capGPUs float64, maxArr int, name string, progress func(string, int, int)) []PackingPoint {
	out := make([]PackingPoint, 0, maxArr+1)
	record := func() {
		free := pk.cap - float64(pk.alloc)/1000
		p := PackingPoint{}
		p.Unallocated.Mean = 100 * free / pk.cap
		p.FragAll.Mean = 100 * pk.frag / pk.cap
		if free > 1e-9 {
			p.FragFree.Mean = 100 * pk.frag / free
		}
		p.Failed.Mean = float64(pk.failed)
		out = append(out, p)
	}
	record()
	var demand int64 // thousandths of a GPU
	for i := 0; len(out) <= maxArr; i++ {
		var j int
		if i < len(order) {
			j = order[i]
		} else {
			j = r.IntN(len(podType))
		}
		k := podType[j]
		t := &pk.types[k]
		if !pk.place(k) {
			pk.failed++
		}
		demand += int64(t.gpus) * int64(t.milli)
		if t.gpus == 0 {
			continue
		}
		// Record every whole percent now reached.
		for len(out) <= maxArr && demand*100 >= int64(len(out))*int64(capGPUs*1000) {
			record()
			if progress != nil {
				progress(name, len(out)-1, maxArr)
			}
		}
	}
	return out
}
