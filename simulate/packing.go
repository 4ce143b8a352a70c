package simulate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// The packing mode reproduces the evaluation of the FGD paper (Weng et
// al., "Beware of Fragmentation", USENIX ATC '23) on its own terms: pods
// arrive one by one in a seeded random order and never leave; each is
// placed at once by the placement policy, or fails and is dropped; as the
// arrived GPU demand grows from 0 to MaxArrived % of the cluster's GPUs,
// the unallocated GPUs and the fragmentation are recorded at every whole
// percent. Once the trace is exhausted, pods are drawn from it again at
// random (with replacement) until MaxArrived is reached.
//
// Unlike the replay, which goes through the allocator's whole-GPU model,
// the packer models what the paper's simulator does: each GPU of a node
// has a free share in thousandths, so that a pod asking for 460
// thousandths of a GPU can share a GPU with others; and a node's CPU and
// memory must fit too. GPU models restrict pods with a gpu_spec.
//
// Fragmentation is the paper's measure, of which DESIGN.md's measure (a)
// is the whole-GPU case: for a node n and a typical task m, F_n(m) is all
// of n's free GPU capacity if m cannot run on n at all (GPU model, CPU,
// memory, or GPU capacity), and otherwise the free capacity of n's GPUs
// whose free share is smaller than what m asks per GPU (a whole-GPU task
// cannot use a partly used GPU). The cluster's fragmentation is
// Σ_n Σ_m p_m·F_n(m), with p_m the share of task type m (GPU count, share
// per GPU, CPU, GPU models) among the trace's GPU pods. Memory counts
// for fitting but does not make a task type of its own.
//
// Placements (ties go to the node first by name unless said otherwise):
//
//   - random: a node drawn uniformly among those that fit; a share goes on
//     a GPU drawn uniformly among those with room.
//   - best-fit: the node with the least free GPU capacity; a share on the
//     GPU with the least room that fits.
//   - spread: the node with the most free GPU capacity; a share on the GPU
//     with the most room.
//   - fgd: the node and GPU where the fragmentation grows least (the
//     paper's Fragmentation Gradient Descent, and gpubot's
//     fragmentation-aware placement generalised to shares); ties go to
//     the node with less free GPU capacity.
//   - fgd-scored: FGD as the paper's Kubernetes scheduler plugin applies
//     it (hkust-adsl/kubernetes-scheduler-simulator): each node gets the
//     integer score ⌊100·σ(−ΔF)⌋ (σ the logistic function, ΔF the growth
//     in GPUs by the artifact's typical task types, packing_typical.go);
//     a share goes on the first GPU with the best score; the best score
//     wins and, as the artifact's selectHost takes the first name among
//     equal scores and its simulator names the nodes after a seeded
//     random permutation, equal scores go to the node first in an order
//     drawn once per seed. Near-ties (within a few hundredths of a GPU)
//     thus go to that order rather than to the fuller node.
//
// Which node resources must fit is a choice (Resources): GPUs always;
// CPU and memory by default, as in the paper's simulator.

// PackingPlacements are the packing mode's placement policies.
var PackingPlacements = []string{"random", "best-fit", "spread", "fgd", "fgd-scored"}

// PackingSetup describes a packing run.
type PackingSetup struct {
	Nodes []Node
	Trace *Trace
	// Placements to compare; default PackingPlacements.
	Placements []string
	// Seeds is the number of arrival orders (default 10), the first
	// being Seed.
	Seeds int
	Seed  uint64
	// MaxArrived is the arrived demand, in % of the GPUs, to stop at
	// (default 130).
	MaxArrived int
	// Fractional is FractionalShare (default) or FractionalRoundUp.
	Fractional Fractional
	// IgnoreCPU and IgnoreMemory leave the nodes' CPU or memory out of the
	// fit (and CPU out of the measure).
	IgnoreCPU, IgnoreMemory bool
	Progress                func(run string, done, total int)
}

// PackingResult is the outcome of a packing run.
type PackingResult struct {
	Placements []string `json:"placements"`
	Seeds      []uint64 `json:"seeds"`
	Fractional string   `json:"fractional"`
	// Resources lists the node resources that must fit.
	Resources string `json:"resources"`
	// Arrived lists the points: arrived GPU demand in % of the GPUs.
	Arrived []int `json:"arrivedPct"`
	// Curves maps a placement to one point per Arrived entry.
	Curves map[string][]PackingPoint `json:"curves"`
	// Reference holds the FGD paper's published figures when the trace is
	// the openb default one on its GPU node list; nil otherwise.
	Reference *PaperReference `json:"paperReference,omitempty"`
	// PerSeed holds every seed's points (CSV only).
	PerSeed map[string][][]PackingPoint `json:"-"`
}

// PackingPoint is the state at one arrival point: mean, smallest and
// largest over the seeds.
type PackingPoint struct {
	Unallocated Spread `json:"unallocatedPct"` // % of all GPUs not allocated
	FragAll     Spread `json:"fragPctOfAll"`   // fragmentation, % of all GPUs
	FragFree    Spread `json:"fragPctOfFree"`  // fragmentation, % of free GPUs
	Failed      Spread `json:"failedPods"`     // pods that could not be placed so far
}

// Spread is a mean with the smallest and largest value.
type Spread struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// Packing runs the packing mode.
func Packing(s PackingSetup) (*Report, error) {
	if s.Trace == nil || len(s.Nodes) == 0 {
		return nil, errors.New("packing needs a node list and a trace")
	}
	places := s.Placements
	if len(places) == 0 {
		places = PackingPlacements
	}
	for _, p := range places {
		if !slices.Contains(PackingPlacements, p) {
			return nil, fmt.Errorf("unknown packing placement %q (want %s)", p, strings.Join(PackingPlacements, ", "))
		}
	}
	frac := s.Fractional
	if frac == "" {
		frac = FractionalShare
	}
	if frac != FractionalShare && frac != FractionalRoundUp {
		return nil, fmt.Errorf("the packing mode handles fractional GPUs by %s or %s, not %q", FractionalShare, FractionalRoundUp, frac)
	}
	seeds := s.Seeds
	if seeds <= 0 {
		seeds = 10
	}
	maxArr := s.MaxArrived
	if maxArr <= 0 {
		maxArr = 130
	}
	// Models, pod types and the measure's typical types.
	modelIdx := map[string]int{}
	var sorted []Node
	sorted = append(sorted, s.Nodes...)
	slices.SortFunc(sorted, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range sorted {
		if _, ok := modelIdx[Flavor(n.Model)]; !ok {
			modelIdx[Flavor(n.Model)] = len(modelIdx)
		}
	}
	if len(modelIdx) > 64 {
		return nil, fmt.Errorf("the packing mode handles at most 64 GPU models, the node list has %d", len(modelIdx))
	}
	typeIdx := map[ptype]int{}
	var types []ptype
	var podType []int // per trace job
	capGPUs := float64(totalGPUs(s.Nodes))
	for _, j := range s.Trace.Jobs {
		t := ptype{gpus: j.GPUs, milli: int32(j.Milli), cpu: j.CPU, mem: j.Memory, models: ^uint64(0)}
		if s.IgnoreCPU {
			t.cpu = 0
		}
		if s.IgnoreMemory {
			t.mem = 0
		}
		if t.gpus == 0 {
			t.milli = 0
		} else if frac == FractionalRoundUp {
			t.milli = 1000
		}
		if len(j.Models) > 0 {
			t.models = 0
			for _, m := range j.Models {
				if i, ok := modelIdx[Flavor(m)]; ok {
					t.models |= 1 << i
				}
			}
		}
		k, ok := typeIdx[t]
		if !ok {
			k = len(types)
			typeIdx[t] = k
			types = append(types, t)
		}
		podType = append(podType, k)
	}
	meas, millis := measureTypes(types, podType)
	artTypes, artMillis := artifactTypes(s.Trace.Jobs, modelIdx, frac, s.IgnoreCPU)
	res := &PackingResult{Placements: places, Fractional: string(frac), Resources: "gpu", Curves: map[string][]PackingPoint{}, PerSeed: map[string][][]PackingPoint{}}
	if !s.IgnoreCPU {
		res.Resources += ",cpu"
	}
	if !s.IgnoreMemory {
		res.Resources += ",memory"
	}
	for i := range maxArr + 1 {
		res.Arrived = append(res.Arrived, i)
	}
	for k := range seeds {
		res.Seeds = append(res.Seeds, s.Seed+uint64(k))
	}
	type task struct {
		place string
		seed  int
		out   []PackingPoint
	}
	var tasks []*task
	for _, p := range places {
		for k := range seeds {
			tasks = append(tasks, &task{place: p, seed: k})
		}
	}
	runName := func(t *task) string { return fmt.Sprintf("%s seed %d", t.place, res.Seeds[t.seed]) }
	if s.Progress != nil {
		// Every run counts from the start, so that the total never grows.
		for _, t := range tasks {
			s.Progress(runName(t), 0, maxArr)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for _, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			seed := res.Seeds[t.seed]
			// Every run has its own measures (they hold scratch space).
			var dec *measure
			if t.place == "fgd-scored" {
				dec = newMeasure(artTypes, artMillis)
			}
			pk := newPacker(sorted, modelIdx, types, newMeasure(meas, millis), dec, t.place, seed)
			order := make([]int, len(podType))
			for i := range order {
				order[i] = i
			}
			r := rand.New(rand.NewPCG(seed, 0x0b0e))
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			t.out = pk.run(podType, order, r, capGPUs, maxArr, runName(t), s.Progress)
		}()
	}
	wg.Wait()
	for _, p := range places {
		var runs [][]PackingPoint
		for _, t := range tasks {
			if t.place == p {
				runs = append(runs, t.out)
			}
		}
		res.PerSeed[p] = runs
		res.Curves[p] = aggregate(runs)
	}
	if frac == FractionalShare && !s.IgnoreCPU && !s.IgnoreMemory {
		res.Reference = paperReference(s.Trace, s.Nodes)
	}
	rep := &Report{Mode: "packing", Cluster: summarizeCluster("as given", s.Nodes), Seed: s.Seed, Packing: res}
	rep.Trace = TraceSummary{Name: s.Trace.Name, Format: s.Trace.Format, Rows: len(s.Trace.Jobs) + s.Trace.Skipped,
		Skipped: s.Trace.Skipped, Jobs: len(s.Trace.Jobs), FractionalMode: string(frac)}
	for _, j := range s.Trace.Jobs {
		if j.GPUs == 0 {
			rep.Trace.CPUOnly++
		}
		if j.Fractional() {
			rep.Trace.Fractional++
		}
	}
	return rep, nil
}

// measureTypes returns the typical task types of the fragmentation
// measure: the GPU pod types keyed without memory, with their shares.
func measureTypes(types []ptype, podType []int) ([]mtype, []int32) {
	type key struct {
		gpus   int
		milli  int32
		cpu    int64
		models uint64
	}
	count := map[key]int{}
	var keys []key
	total := 0
	for _, k := range podType {
		t := types[k]
		if t.gpus == 0 {
			continue
		}
		mk := key{t.gpus, t.milli, t.cpu, t.models}
		if _, ok := count[mk]; !ok {
			keys = append(keys, mk)
		}
		count[mk]++
		total++
	}
	var out []mtype
	var millis []int32
	for _, k := range keys {
		mi := slices.Index(millis, k.milli)
		if mi < 0 {
			mi = len(millis)
			millis = append(millis, k.milli)
		}
		out = append(out, mtype{gpus: k.gpus, milli: k.milli, cpu: k.cpu, models: k.models, p: float64(count[k]) / float64(total), mi: mi})
	}
	return out, millis
}

// aggregate turns per-seed curves into means and spreads.
func aggregate(runs [][]PackingPoint) []PackingPoint {
	if len(runs) == 0 {
		return nil
	}
	n := len(runs[0])
	out := make([]PackingPoint, n)
	for i := range n {
		var u, fa, ff, fl []float64
		for _, r := range runs {
			u = append(u, r[i].Unallocated.Mean)
			fa = append(fa, r[i].FragAll.Mean)
			ff = append(ff, r[i].FragFree.Mean)
			fl = append(fl, r[i].Failed.Mean)
		}
		out[i] = PackingPoint{Unallocated: spreadOf(u), FragAll: spreadOf(fa), FragFree: spreadOf(ff), Failed: spreadOf(fl)}
	}
	return out
}

func spreadOf(xs []float64) Spread {
	s := Spread{Min: xs[0], Max: xs[0]}
	sum := 0.0
	for _, x := range xs {
		sum += x
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	s.Mean = sum / float64(len(xs))
	return s
}
