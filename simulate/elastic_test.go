package simulate

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

func TestParseElasticChange(t *testing.T) {
	for in, want := range map[string]Change{
		"16xh100:spot":        {Flavor: "h100", GPUs: 16, Capacity: CapacitySpot},
		"+8xH100:provisioned": {Flavor: "h100", GPUs: 8, Capacity: CapacityProvisioned},
		"16xh100":             {Flavor: "h100", GPUs: 16},
	} {
		got, err := ParseChange(in)
		if err != nil || got != want {
			t.Errorf("ParseChange(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"16xh100:cheap", "-8xh100:spot"} {
		if _, err := ParseChange(bad); err == nil {
			t.Errorf("ParseChange(%q) gave no error", bad)
		}
	}
}

// An elastic pool (spot or provisioned) takes the jobs that waited an
// hour and fit there: waits fall, the pool's GPU-hours are priced, and
// only switched jobs run on it.
func TestElasticWhatIf(t *testing.T) {
	nl, tr := readSample(t, "nodes_sample.csv", "jobs_sample.csv", ReadOptions{})
	for _, kind := range []string{CapacitySpot, CapacityProvisioned} {
		pool := "h100-" + kind
		s := Setup{Nodes: nl.Nodes, Trace: tr, Changes: []Change{{Flavor: "h100", GPUs: 16, Capacity: kind}},
			ElasticPrice: 3.2, Currency: "$", ProvisioningTime: 20 * time.Minute, Calibrate: 0}
		s.check = func(run string, snap *allocator.Snapshot, _, _, _ int) error {
			for _, w := range snap.Workloads() {
				if w.Admission != nil && w.Admission.Flavor == pool && w.Flavor != pool {
					return fmt.Errorf("%s: job %s runs on the pool without being switched to it", run, w.ID)
				}
			}
			return nil
		}
		rep, err := Replay(s)
		if err != nil {
			t.Fatal(err)
		}
		base := map[string]*Run{}
		for _, r := range rep.Runs {
			if r.Capacity == "as given" {
				base[r.Policy] = r
				if r.Elastic != nil {
					t.Errorf("%s: an elastic report on the cluster as given", r.Name)
				}
			}
		}
		for _, r := range rep.Runs {
			if r.Capacity == "as given" {
				continue
			}
			x := r.Elastic
			if x == nil || x.Switched == 0 || x.GPUHours <= 0 {
				t.Fatalf("%s: elastic %+v; want jobs switched and GPU-hours on the pool", r.Name, x)
			}
			if math.Abs(x.Cost-x.GPUHours*3.2) > 1e-6 || x.Flavor != "h100-"+kind {
				t.Errorf("%s: %+v: cost is not GPU-hours × price, or the pool is misnamed", r.Name, x)
			}
			if o := base[r.Policy]; r.AllWaits.Mean > o.AllWaits.Mean {
				t.Errorf("%s: mean wait %v with the pool, %v without", r.Name, r.AllWaits.Mean, o.AllWaits.Mean)
			}
		}
		if got := elasticLine(rep.Runs[len(rep.Runs)-1]); got == "" {
			t.Errorf("no elastic line for %s", rep.Runs[len(rep.Runs)-1].Name)
		}
	}
}
