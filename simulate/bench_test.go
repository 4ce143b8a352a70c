package simulate

import (
	"os"
	"path/filepath"
	"testing"
)

// tracesDir is where the real traces live, relative to this package.
const tracesDir = "../../shared/traces/alibaba-gpu-v2023"

// openB reads the openb GPU node list and a pod list, or skips.
func openB(tb testing.TB, pods string) (*NodeList, *Trace) {
	tb.Helper()
	nf, err := os.Open(filepath.Join(tracesDir, "openb_node_list_gpu_node.csv"))
	if err != nil {
		tb.Skipf("the openb traces are not here (%v); they live in ../shared/traces", err)
	}
	defer nf.Close()
	nodes, err := ReadNodes(nf, "openb_node_list_gpu_node.csv", ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	pf, err := os.Open(filepath.Join(tracesDir, pods))
	if err != nil {
		tb.Skipf("the openb traces are not here (%v); they live in ../shared/traces", err)
	}
	defer pf.Close()
	tr, err := ReadTrace(pf, pods, ReadOptions{Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	return nodes, tr
}

// BenchmarkReplayOpenB replays the openb default trace with gpubot's
// policy at a peak demand of 110 % of the GPUs, estimates included.
func BenchmarkReplayOpenB(b *testing.B) {
	nodes, tr := openB(b, "openb_pod_list_default.csv")
	for b.Loop() {
		_, err := Replay(Setup{Nodes: nodes.Nodes, Trace: tr, Policies: []Policy{GpubotDefaults}, Load: Load{Target: 1.1}, Calibrate: 500})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackingOpenB packs the openb default trace once (one seed) with
// fgd, the costliest placement.
func BenchmarkPackingOpenB(b *testing.B) {
	nodes, tr := openB(b, "openb_pod_list_default.csv")
	for b.Loop() {
		if _, err := Packing(PackingSetup{Nodes: nodes.Nodes, Trace: tr, Seeds: 1, Seed: 1, Placements: []string{"fgd"}}); err != nil {
			b.Fatal(err)
		}
	}
}
