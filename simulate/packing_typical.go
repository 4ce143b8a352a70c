package simulate

import (
	"cmp"
	"slices"
	"strings"
)

// The typical task types of fgd-scored's measure, chosen as the FGD
// artifact's simulator chooses them (pkg/utils/frag.go, GetTypicalPods,
// with the experiments' configuration in scripts/generate_config_and_run.py:
// isInvolvedCpuPods true, podPopularityThreshold 95, podIncreaseStep 1,
// gpuResWeight 0):
//
//   - Every pod of the trace counts, CPU-only ones included, keyed by what
//     it asks for: CPU (the scheduler's non-zero default, 100 millicores,
//     for a pod that asks for none), the share per GPU, the GPU count and
//     the gpu_spec as written. Memory is not part of the key.
//   - The types are taken by decreasing count (equal counts: the larger
//     CPU, share, GPU count and spec first), one at a time, until they hold
//     at least typicalShare % of the pods; their shares are then scaled to
//     sum to 1.
//   - A CPU-only type counts all of a node's free GPU capacity as
//     fragmented, wherever it could run (the artifact's measure counts
//     every outcome but "the task fits the GPUs and the CPU" as
//     fragmentation, and a CPU-only task never uses a GPU).
//
// The reported measure and the exact fgd keep every GPU pod type (see
// measureTypes): the CPU-only types add the same amount to every node's
// growth for a given pod, which does not change fgd's choice, but the
// integer score of fgd-scored moves with it.

// typicalShare is the share of pods, in %, that the artifact's typical
// types must cover (its podPopularityThreshold in the experiments).
const typicalShare = 95

// artifactTypes returns fgd-scored's typical task types. ignoreCPU drops
// CPU from the key, as the rest of the packer does under --resources gpu.
func artifactTypes(jobs []Job, modelIdx map[string]int, frac Fractional, ignoreCPU bool) ([]mtype, []int32) {
	type key struct {
		cpu   int64
		milli int32
		gpus  int
		spec  string
	}
	count := map[key]int{}
	models := map[string]uint64{}
	for _, j := range jobs {
		k := key{cpu: j.CPU, milli: int32(j.Milli), gpus: j.GPUs, spec: strings.Join(j.Models, "|")}
		switch {
		case ignoreCPU:
			k.cpu = 0
		case k.cpu == 0:
			k.cpu = 100 // the scheduler's default request for a pod without one
		}
		if k.gpus == 0 {
			k.milli = 0
		} else if frac == FractionalRoundUp {
			k.milli = 1000
		}
		count[k]++
		if _, ok := models[k.spec]; !ok {
			m := ^uint64(0)
			if len(j.Models) > 0 {
				m = 0
				for _, name := range j.Models {
					if i, ok := modelIdx[Flavor(name)]; ok {
						m |= 1 << i
					}
				}
			}
			models[k.spec] = m
		}
	}
	keys := make([]key, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(count[b], count[a]), cmp.Compare(b.cpu, a.cpu), cmp.Compare(b.milli, a.milli),
			cmp.Compare(b.gpus, a.gpus), strings.Compare(b.spec, a.spec))
	})
	// Take types until they hold typicalShare % of the pods.
	taken, held := 0, 0
	for taken < len(keys) && 100*held < typicalShare*len(jobs) {
		held += count[keys[taken]]
		taken++
	}
	var out []mtype
	var millis []int32
	for _, k := range keys[:taken] {
		mi := slices.Index(millis, k.milli)
		if mi < 0 {
			mi = len(millis)
			millis = append(millis, k.milli)
		}
		out = append(out, mtype{gpus: k.gpus, milli: k.milli, cpu: k.cpu, models: models[k.spec],
			p: float64(count[k]) / float64(held), mi: mi})
	}
	return out, millis
}
