package simulate

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpubot/gpubot/allocator"
)

// Tests on the samples in testdata: 38 real openb nodes (189 GPUs) and
// 300 real openb pods (every 27th of the default list), and a small
// synthetic generic trace.

func readSample(t testing.TB, nodes, trace string, o ReadOptions) (*NodeList, *Trace) {
	t.Helper()
	nf, err := os.Open(filepath.Join("testdata", nodes))
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	nl, err := ReadNodes(nf, nodes, o)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := os.Open(filepath.Join("testdata", trace))
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	tr, err := ReadTrace(tf, trace, o)
	if err != nil {
		t.Fatal(err)
	}
	return nl, tr
}

// checkState is the allocator's invariants, seen from outside, and the
// replay's bookkeeping against the snapshot.
func checkState(nodeGPUs map[string]int, nodeFlavor map[string]string, flavorGPUs map[string]int) func(string, *allocator.Snapshot, int, int, int) error {
	return func(run string, s *allocator.Snapshot, used, running, pending int) error {
		onNode := map[string]int{}
		byFlavor := map[string]int{}
		admitted, waiting := 0, 0
		for _, w := range s.Workloads() {
			if w.Admission == nil {
				waiting++
				continue
			}
			admitted++
			a := w.Admission
			if len(a.Nodes) == 0 || w.GPUs%len(a.Nodes) != 0 {
				return fmt.Errorf("%s: %s: %d GPUs on %d pods", run, w.ID, w.GPUs, len(a.Nodes))
			}
			per := w.GPUs / len(a.Nodes)
			for _, n := range a.Nodes {
				if nodeFlavor[n] != a.Flavor {
					return fmt.Errorf("%s: %s: node %s is not of flavor %s", run, w.ID, n, a.Flavor)
				}
				onNode[n] += per
			}
			if w.Flavor != "" && w.Flavor != a.Flavor {
				return fmt.Errorf("%s: %s pinned to %s runs on %s", run, w.ID, w.Flavor, a.Flavor)
			}
			if w.Topology == allocator.LevelHost && slices.ContainsFunc(a.Nodes, func(n string) bool { return n != a.Nodes[0] }) {
				return fmt.Errorf("%s: %s must be on one host, is on %v", run, w.ID, a.Nodes)
			}
			byFlavor[a.Flavor] += w.GPUs
		}
		for n, g := range onNode {
			if g > nodeGPUs[n] {
				return fmt.Errorf("%s: node %s holds %d GPUs of %d", run, n, g, nodeGPUs[n])
			}
		}
		sum := 0
		for _, c := range s.Capacity(nil) {
			if c.Used != byFlavor[c.Flavor] || c.Used+c.Free != flavorGPUs[c.Flavor] || c.Total != flavorGPUs[c.Flavor] {
				return fmt.Errorf("%s: flavor %s: capacity %+v, admitted %d", run, c.Flavor, c, byFlavor[c.Flavor])
			}
			sum += c.Used
		}
		for _, st := range s.Standing() {
			for f, u := range st.Used {
				if u < 0 || u > flavorGPUs[f] {
					return fmt.Errorf("%s: queue %s uses %d of %d %s GPUs", run, st.Queue, u, flavorGPUs[f], f)
				}
			}
		}
		if sum != used || admitted != running || waiting != pending {
			return fmt.Errorf("%s: the replay counts %d GPUs, %d running, %d pending; the snapshot %d, %d, %d",
				run, used, running, pending, sum, admitted, waiting)
		}
		return nil
	}
}

func checkerFor(nodes []Node) func(string, *allocator.Snapshot, int, int, int) error {
	nodeGPUs, nodeFlavor, flavorGPUs := map[string]int{}, map[string]string{}, map[string]int{}
	for _, n := range nodes {
		nodeGPUs[n.Name], nodeFlavor[n.Name] = n.GPUs, Flavor(n.Model)
		flavorGPUs[Flavor(n.Model)] += n.GPUs
	}
	return checkState(nodeGPUs, nodeFlavor, flavorGPUs)
}

// TestReplayInvariants checks the allocator's invariants and the
// replay's bookkeeping after every step of long replays: the openb sample
// under load with every policy and placement, and with capacity added and
// removed; and the generic sample with its pinned flavors and topology.
func TestReplayInvariants(t *testing.T) {
	nl, tr := readSample(t, "openb_nodes_sample.csv", "openb_pods_sample.csv", ReadOptions{Seed: 3})
	for _, pl := range []allocator.Placement{allocator.PlacementFragmentationAware, allocator.PlacementBestFit, allocator.PlacementRandom} {
		s := Setup{Nodes: nl.Nodes, Trace: tr, Load: Load{Target: 1.15}, Placement: pl, Seed: 5, Calibrate: 50,
			Changes: []Change{{Flavor: "g2", GPUs: 16}, {Flavor: "t4", GPUs: -6}}}
		changed, _, err := ApplyChanges(nl.Nodes, s.Changes)
		if err != nil {
			t.Fatal(err)
		}
		base, more := checkerFor(nl.Nodes), checkerFor(changed)
		s.check = func(run string, snap *allocator.Snapshot, used, running, pending int) error {
			if strings.HasSuffix(run, "+16xg2 -6xt4") {
				return more(run, snap, used, running, pending)
			}
			return base(run, snap, used, running, pending)
		}
		rep, err := Replay(s)
		if err != nil {
			t.Fatalf("%s: %v", pl, err)
		}
		if len(rep.Runs) != 6 {
			t.Fatalf("%s: %d runs", pl, len(rep.Runs))
		}
		for _, r := range rep.Runs {
			if r.AllWaits.Jobs != rep.Trace.Jobs {
				t.Errorf("%s %s: %d jobs reported of %d", pl, r.Name, r.AllWaits.Jobs, rep.Trace.Jobs)
			}
		}
	}
	gn, gt := readSample(t, "nodes_sample.csv", "jobs_sample.csv", ReadOptions{})
	_, err := Replay(Setup{Nodes: gn.Nodes, Trace: gt, Calibrate: -1, check: checkerFor(gn.Nodes)})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeterminism: the same input and seed give byte-identical files;
// another seed gives other teams, so other results.
func TestDeterminism(t *testing.T) {
	write := func(seed uint64, packing bool) map[string][]byte {
		nl, tr := readSample(t, "openb_nodes_sample.csv", "openb_pods_sample.csv", ReadOptions{Seed: seed})
		var rep *Report
		var err error
		if packing {
			rep, err = Packing(PackingSetup{Nodes: nl.Nodes, Trace: tr, Seeds: 3, Seed: seed})
		} else {
			rep, err = Replay(Setup{Nodes: nl.Nodes, Trace: tr, Load: Load{Target: 1.1}, Calibrate: -1, Seed: seed,
				Placement: allocator.PlacementRandom, Changes: []Change{{Flavor: "g2", GPUs: 8}}})
		}
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		names, err := WriteFiles(dir, rep, true)
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		if err := WriteText(&text, rep); err != nil {
			t.Fatal(err)
		}
		out := map[string][]byte{"stdout": text.Bytes()}
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			out[n] = b
		}
		return out
	}
	for _, packing := range []bool{false, true} {
		a, b := write(1, packing), write(1, packing)
		if len(a) < 5 {
			t.Fatalf("packing %v: only %d files", packing, len(a))
		}
		for name, data := range a {
			if !bytes.Equal(data, b[name]) {
				t.Errorf("packing %v: %s differs between two identical runs", packing, name)
			}
		}
		if c := write(2, packing); bytes.Equal(a["results.json"], c["results.json"]) {
			t.Errorf("packing %v: seeds 1 and 2 gave the same results", packing)
		}
	}
}

// TestPackingByHand: two 2-GPU nodes; a half-GPU pod, a 1-GPU pod and a
// 2-GPU pod arrive in that order. The measure's task types are the three
// pods, a third each.
//
//   - fgd: the half goes on a (tie: both nodes empty, first by name): a
//     = [.5, 1], F_a = ⅓(0 + .5 + 1.5) = ⅔ (a whole GPU task finds the
//     half-used GPU unusable; a 2-GPU task finds nothing). The 1-GPU pod
//     on a gives a = [.5, 0], F_a = ⅓(0 + .5 + .5) = ⅓ (−⅓), on b gives
//     b = [0, 1], F_b = ⅓·1 (+⅓): a. The 2-GPU pod fits only b. Left:
//     half a GPU, F = ⅓: 12.5 % unallocated, 8.3 % of all, ⅔ of free.
//   - best-fit: the same choices (a is fuller for the 1-GPU pod).
//   - spread: the 1-GPU pod goes on b (emptier); then no node has two
//     free GPUs: the 2-GPU pod fails. a = [.5, 1] (F ⅔), b = [0, 1]
//     (F ⅓): 62.5 % unallocated, 25 % of all, 40 % of free.
func TestPackingByHand(t *testing.T) {
	nodes := []Node{{Name: "a", Model: "X", GPUs: 2}, {Name: "b", Model: "X", GPUs: 2}}
	jobs := []Job{{ID: "half", GPUs: 1, Milli: 500}, {ID: "one", GPUs: 1, Milli: 1000}, {ID: "two", GPUs: 2, Milli: 1000}}
	for _, tc := range []struct {
		place                      string
		unalloc, fragAll, fragFree float64
		failed                     float64
	}{
		{"fgd", 12.5, 100.0 / 12, 200.0 / 3, 0},
		{"fgd-scored", 12.5, 100.0 / 12, 200.0 / 3, 0},
		{"best-fit", 12.5, 100.0 / 12, 200.0 / 3, 0},
		{"spread", 62.5, 25, 40, 1},
	} {
		pk, podType := testPacker(nodes, jobs, tc.place)
		// Arrived demand: .5, 1.5, 3.5 of 4 GPUs: 87 % is the last point
		// before any pod would be drawn again.
		out := pk.run(podType, []int{0, 1, 2}, rand.New(rand.NewPCG(1, 1)), 4, 87, tc.place, nil)
		if len(out) != 88 {
			t.Fatalf("%s: %d points", tc.place, len(out))
		}
		p := out[87]
		if !near(p.Unallocated.Mean, tc.unalloc) || !near(p.FragAll.Mean, tc.fragAll) || !near(p.FragFree.Mean, tc.fragFree) || p.Failed.Mean != tc.failed {
			t.Errorf("%s at 87%%: %+v; want %v unallocated, %v / %v fragmented, %v failed", tc.place, p, tc.unalloc, tc.fragAll, tc.fragFree, tc.failed)
		}
		// After the first pod (12.5 % arrived) and before the third.
		if q := out[12]; !near(q.Unallocated.Mean, 87.5) || !near(q.FragAll.Mean, 100.0/6) {
			t.Errorf("%s at 12%%: %+v; want 87.5 unallocated, 16.7 fragmented", tc.place, q)
		}
		if q := out[0]; q.Unallocated.Mean != 100 || q.FragAll.Mean != 0 {
			t.Errorf("%s at 0%%: %+v", tc.place, q)
		}
	}
}

// testPacker builds a packer as Packing does, for seed 1.
func testPacker(nodes []Node, jobs []Job, place string) (*packer, []int) {
	return testPackerSeed(nodes, jobs, place, 1)
}

func testPackerSeed(nodes []Node, jobs []Job, place string, seed uint64) (*packer, []int) {
	modelIdx := map[string]int{}
	for _, n := range nodes {
		if _, ok := modelIdx[Flavor(n.Model)]; !ok {
			modelIdx[Flavor(n.Model)] = len(modelIdx)
		}
	}
	typeIdx := map[ptype]int{}
	var types []ptype
	var podType []int
	for _, j := range jobs {
		pt := ptype{gpus: j.GPUs, milli: int32(j.Milli), models: ^uint64(0)}
		k, ok := typeIdx[pt]
		if !ok {
			k = len(types)
			typeIdx[pt] = k
			types = append(types, pt)
		}
		podType = append(podType, k)
	}
	meas, millis := measureTypes(types, podType)
	var dec *measure
	if place == "fgd-scored" {
		dec = newMeasure(artifactTypes(jobs, modelIdx, FractionalShare, false))
	}
	return newPacker(nodes, modelIdx, types, newMeasure(meas, millis), dec, place, seed), podType
}

// TestPackingSample runs the packing mode on the openb sample: every
// placement packs at least the demand that fits, fgd and best-fit leave
// fewer GPUs unallocated than spread, and the result does not depend on
// the order of the placements asked for.
func TestPackingSample(t *testing.T) {
	nl, tr := readSample(t, "openb_nodes_sample.csv", "openb_pods_sample.csv", ReadOptions{})
	rep, err := Packing(PackingSetup{Nodes: nl.Nodes, Trace: tr, Seeds: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	pr := rep.Packing
	for _, p := range pr.Placements {
		c := pr.Curves[p]
		if len(c) != 131 {
			t.Fatalf("%s: %d points", p, len(c))
		}
		for a := 1; a <= 130; a++ { // pods never leave
			if c[a].Unallocated.Mean > c[a-1].Unallocated.Mean {
				t.Errorf("%s: more unallocated at %d%% (%.2f) than at %d%% (%.2f)", p, a, c[a].Unallocated.Mean, a-1, c[a-1].Unallocated.Mean)
			}
		}
		if c[130].Unallocated.Min > c[130].Unallocated.Mean || c[130].Unallocated.Mean > c[130].Unallocated.Max {
			t.Errorf("%s: spread %+v", p, c[130].Unallocated)
		}
	}
	if fgd, spread := pr.Curves["fgd"][130].Unallocated.Mean, pr.Curves["spread"][130].Unallocated.Mean; fgd >= spread {
		t.Errorf("fgd leaves %.1f%% unallocated, spread %.1f%%", fgd, spread)
	}
	// Up to half the cluster, fgd places everything that arrives (within
	// a pod: a point is recorded once the demand reaches it).
	for a := 0; a <= 50; a++ {
		if u := pr.Curves["fgd"][a].Unallocated.Max; u > 100-float64(a)+0.1 || u < 100-float64(a)-5 {
			t.Errorf("fgd at %d%%: %.2f unallocated", a, u)
		}
	}
	rev, err := Packing(PackingSetup{Nodes: nl.Nodes, Trace: tr, Seeds: 4, Seed: 1, Placements: []string{"fgd", "random"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"fgd", "random"} {
		if !slices.Equal(rev.Packing.Curves[p], pr.Curves[p]) {
			t.Errorf("%s depends on the other placements run", p)
		}
	}
}

// TestPackingText shows the paper's figures beside ours when there are
// any, and says how far apart they are.
func TestPackingText(t *testing.T) {
	nl, tr := readSample(t, "openb_nodes_sample.csv", "openb_pods_sample.csv", ReadOptions{})
	rep, err := Packing(PackingSetup{Nodes: nl.Nodes, Trace: tr, Seeds: 2, Seed: 1, MaxArrived: 120})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Packing.Reference != nil {
		t.Fatal("the sample got the openb default trace's reference")
	}
	rep.Packing.Reference = &openBDefaultReference
	var b strings.Builder
	if err := WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Unallocated GPUs, % of all GPUs", "Fragmentation, % of free GPUs", "fgd leaves", "120%",
		"The paper on this trace", "The paper's FGD leaves up to 34% fewer GPUs unallocated than its BestFit (at 120% arrived)", "fgd minus the paper's FGD, points:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), " 125%") {
		t.Errorf("text shows points beyond 120%%:\n%s", b.String())
	}
}

// TestPackingOpenBAgainstPaper holds the packing mode to the FGD paper's
// published figures on the openb default trace, point by point (skipped
// without the traces).
func TestPackingOpenBAgainstPaper(t *testing.T) {
	nodes, tr := openB(t, "openb_pod_list_default.csv")
	rep, err := Packing(PackingSetup{Nodes: nodes.Nodes, Trace: tr, Seeds: 2, Seed: 1, Placements: []string{"random", "best-fit", "fgd"}})
	if err != nil {
		t.Fatal(err)
	}
	ref := rep.Packing.Reference
	if ref == nil {
		t.Fatal("no reference for the openb default trace")
	}
	for place, tol := range map[string]float64{"random": 1, "fgd": 1, "best-fit": 2} {
		for i, a := range ref.Arrived {
			ours, theirs := rep.Packing.Curves[place][a].Unallocated.Mean, ref.Unallocated[paperNames[place]][i]
			if math.Abs(ours-theirs) > tol {
				t.Errorf("%s at %d%%: %.1f%% unallocated, the paper %.1f%%", place, a, ours, theirs)
			}
		}
	}
}

// TestFGDScoredAgainstPaper holds fgd-scored to the mean of the FGD
// paper's ten seeds within 0.2 points at every point, on the default pod
// list and on gpushare100, over ten seeds (skipped without the traces).
// With ties by name rather than by the seeded node order, gpushare100 is
// 0.25 points off; with neither that nor the artifact's typical types,
// 0.45.
func TestFGDScoredAgainstPaper(t *testing.T) {
	for _, pods := range []string{"openb_pod_list_default.csv", "openb_pod_list_gpushare100.csv"} {
		nodes, tr := openB(t, pods)
		rep, err := Packing(PackingSetup{Nodes: nodes.Nodes, Trace: tr, Seeds: 10, Seed: 1, Placements: []string{"fgd-scored"}})
		if err != nil {
			t.Fatal(err)
		}
		ref := rep.Packing.Reference
		if ref == nil {
			t.Fatalf("%s: no reference", pods)
		}
		for i, a := range ref.Arrived {
			ours, theirs := rep.Packing.Curves["fgd-scored"][a].Unallocated.Mean, ref.Unallocated["FGD"][i]
			if math.Abs(ours-theirs) > 0.2 {
				t.Errorf("%s at %d%%: %.2f%% unallocated, the paper %.2f%%", pods, a, ours, theirs)
			}
		}
	}
}

// TestFGDScoredTiesBySeededOrder: all nodes empty, so every node gets
// the same score: fgd-scored, like the FGD artifact (whose node names
// begin with a number from a seeded permutation, and whose selectHost
// takes the first name among equal scores), fills the nodes in an order
// drawn once per seed: the same seed fills the same nodes, lowest rank
// first, and the seeds do not all pick the nodes first by name.
func TestFGDScoredTiesBySeededOrder(t *testing.T) {
	var nodes []Node
	for i := range 6 {
		nodes = append(nodes, Node{Name: fmt.Sprintf("n%d", i), Model: "X", GPUs: 2})
	}
	jobs := []Job{{ID: "a", GPUs: 2, Milli: 1000}, {ID: "b", GPUs: 2, Milli: 1000}}
	fill := func(seed uint64) []string {
		pk, podType := testPackerSeed(nodes, jobs, "fgd-scored", seed)
		var full []string
		for _, k := range podType {
			if !pk.place(k) {
				t.Fatalf("seed %d: a pod did not fit", seed)
			}
		}
		byRank := slices.Clone(pk.nodes)
		slices.SortFunc(byRank, func(a, b *pnode) int { return a.rank - b.rank })
		for i, n := range byRank {
			if full := n.fullFree == 0; full != (i < 2) {
				t.Errorf("seed %d: node %s of rank %d full %v; want the two of lowest rank full", seed, n.name, n.rank, full)
			}
		}
		for _, n := range pk.nodes {
			if n.fullFree == 0 {
				full = append(full, n.name)
			}
		}
		return full
	}
	byName := 0
	for seed := uint64(1); seed <= 8; seed++ {
		got := fill(seed)
		if again := fill(seed); !slices.Equal(got, again) {
			t.Errorf("seed %d: full nodes %v, then %v", seed, got, again)
		}
		if slices.Equal(got, []string{"n0", "n1"}) {
			byName++
		}
	}
	if byName == 8 {
		t.Error("every seed filled the nodes first by name")
	}
}

// TestArtifactTypes: fgd-scored's typical task types are the FGD
// artifact's: CPU-only pods count, the most frequent types are kept until
// they hold 95 % of the pods (equal counts: the larger CPU first), their
// shares scaled to sum to 1; a pod asking for no CPU counts as 100
// millicores; memory is not part of a type.
func TestArtifactTypes(t *testing.T) {
	var jobs []Job
	add := func(n int, j Job) {
		for range n {
			jobs = append(jobs, j)
		}
	}
	add(50, Job{GPUs: 1, Milli: 500, CPU: 4000, Memory: 1})
	add(10, Job{GPUs: 1, Milli: 500, CPU: 4000, Memory: 2}) // the same type
	add(25, Job{CPU: 8000})                                 // CPU only
	add(6, Job{GPUs: 1, Milli: 1000, CPU: 2000})
	add(6, Job{GPUs: 1, Milli: 1000, CPU: 6000, Models: []string{"X"}}) // ties with the one above, more CPU
	add(3, Job{GPUs: 2, Milli: 1000})                                   // no CPU
	// 100 pods: 60 + 25 + 6 = 91 < 95, + 6 = 97: four types.
	got, millis := artifactTypes(jobs, map[string]int{"x": 0, "y": 1}, FractionalShare, false)
	want := []mtype{
		{gpus: 1, milli: 500, cpu: 4000, models: ^uint64(0), p: 60.0 / 97},
		{gpus: 0, milli: 0, cpu: 8000, models: ^uint64(0), p: 25.0 / 97},
		{gpus: 1, milli: 1000, cpu: 6000, models: 1, p: 6.0 / 97},
		{gpus: 1, milli: 1000, cpu: 2000, models: ^uint64(0), p: 6.0 / 97},
	}
	if len(got) != len(want) {
		t.Fatalf("types %+v; want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		if g.gpus != want[i].gpus || g.milli != want[i].milli || g.cpu != want[i].cpu || g.models != want[i].models || !near(g.p, want[i].p) || millis[g.mi] != g.milli {
			t.Errorf("type %d: %+v; want %+v", i, g, want[i])
		}
	}
	// A pod asking for no CPU counts as 100 millicores: 100 more of the
	// 2-GPU pods make theirs the most frequent type (103 of 200), and the
	// types held are 103 + 60 + 25 + 6 = 194.
	add(100, Job{GPUs: 2, Milli: 1000})
	got, _ = artifactTypes(jobs, map[string]int{"x": 0}, FractionalShare, false)
	if len(got) != 4 || got[0].gpus != 2 || got[0].cpu != 100 || !near(got[0].p, 103.0/194) {
		t.Errorf("types %+v; want four, the first of 2 GPUs, 100 millicores, 103/194", got)
	}
}

// TestCPUOnlyTypeFragments: in fgd-scored's measure a CPU-only type
// counts all of a node's free GPU capacity, whatever CPU is left.
func TestCPUOnlyTypeFragments(t *testing.T) {
	ms := newMeasure([]mtype{{gpus: 0, cpu: 1000, models: ^uint64(0), p: 0.25}, {gpus: 1, milli: 1000, models: ^uint64(0), p: 0.75, mi: 1}}, []int32{0, 1000})
	n := &pnode{free: []int32{1000, 400}, cpu: 8000}
	// CPU-only: 1.4 GPUs; the 1-GPU type: the 0.4 it cannot use.
	if got, want := fragOf(ms, n, n.free, n.cpu, 1, 1000, 1400), 0.25*1.4+0.75*0.4; !near(got, want) {
		t.Errorf("F = %v; want %v", got, want)
	}
}

// TestPaperReferenceFor: the default pod list and gpushare100 get their
// own figures, other openb pod lists none.
func TestPaperReferenceFor(t *testing.T) {
	nodes := []Node{{Name: "x", Model: "G2", GPUs: 6212}}
	jobs := make([]Job, 8152)
	for name, want := range map[string]*PaperReference{
		"dir/openb_pod_list_default.csv":     &openBDefaultReference,
		"openb_pod_list_gpushare100.csv":     &openBGPUShare100Reference,
		"openb_pod_list_gpushare40.csv":      nil,
		"../x/openb_pod_list_multigpu50.csv": nil,
		"pods.csv":                           &openBDefaultReference,
	} {
		got := paperReference(&Trace{Name: name, Format: "openb", Jobs: jobs}, nodes)
		if got != want {
			t.Errorf("%s: reference %v; want %v", name, got, want)
		}
	}
	if paperReference(&Trace{Name: "openb_pod_list_default.csv", Format: "openb", Jobs: jobs[:10]}, nodes) != nil {
		t.Error("a short trace got a reference")
	}
}
