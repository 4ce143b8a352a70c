package simulate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	xs := []float64{50, 10, 40, 20, 30} // sorted: 10 20 30 40 50
	for p, want := range map[float64]float64{1: 10, 20: 10, 21: 20, 50: 30, 80: 40, 81: 50, 95: 50, 100: 50} {
		if got := Percentile(xs, p); got != want {
			t.Errorf("Percentile(%v) = %v, want %v", p, got, want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("Percentile of nothing is not 0")
	}
	if xs[0] != 50 {
		t.Error("Percentile sorted its input")
	}
}

func TestJain(t *testing.T) {
	for name, tc := range map[string]struct {
		xs   []float64
		want float64
	}{
		"equal":         {[]float64{3, 3, 3}, 1},
		"one has all":   {[]float64{5, 0, 0, 0}, 0.25},
		"1 and 2":       {[]float64{1, 2}, 9.0 / 10},
		"4/3 and 2":     {[]float64{4.0 / 3, 2}, 100.0 / 104},
		"none":          {nil, 1},
		"all zero":      {[]float64{0, 0}, 1},
		"one value":     {[]float64{7}, 1},
		"two and three": {[]float64{2, 3}, 25.0 / 26},
	} {
		if got := Jain(tc.xs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: Jain(%v) = %v, want %v", name, tc.xs, got, tc.want)
		}
	}
}

func TestSlowdown(t *testing.T) {
	for _, tc := range []struct {
		wait, run time.Duration
		want      float64
	}{
		{0, time.Hour, 1},
		{time.Hour, time.Hour, 2},
		{30 * time.Second, 10 * time.Second, 1.5}, // runs under a minute count as a minute
		{0, 0, 1},
	} {
		if got := Slowdown(tc.wait, tc.run); got != tc.want {
			t.Errorf("Slowdown(%v, %v) = %v, want %v", tc.wait, tc.run, got, tc.want)
		}
	}
}

func TestRequestedFor(t *testing.T) {
	for run, want := range map[time.Duration]time.Duration{
		0: 15 * time.Minute, 15 * time.Minute: 15 * time.Minute, 16 * time.Minute: 30 * time.Minute,
		59 * time.Minute: time.Hour, 3 * time.Hour: 4 * time.Hour, 13 * time.Hour: 24 * time.Hour,
		50 * time.Hour: 72 * time.Hour, 8 * 24 * time.Hour: 8 * 24 * time.Hour, 8*24*time.Hour + time.Second: 9 * 24 * time.Hour,
	} {
		if got := RequestedFor(run); got != want {
			t.Errorf("RequestedFor(%v) = %v, want %v", run, got, want)
		}
	}
}

func TestParseLoad(t *testing.T) {
	for in, want := range map[string]Load{"": {}, "1.1": {Target: 1.1}, "110%": {Target: 1.1}, "50x": {Factor: 50}, "0.5x": {Factor: 0.5}} {
		got, err := ParseLoad(in)
		if err != nil || math.Abs(got.Target-want.Target) > 1e-12 || got.Factor != want.Factor {
			t.Errorf("ParseLoad(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "-1", "0", "fast", "-3x", "0%", "20"} {
		if _, err := ParseLoad(in); err == nil {
			t.Errorf("ParseLoad(%q): no error", in)
		}
	}
}

// TestDemand works out the demand of three jobs by hand: at 0 a 2-GPU job
// for 2h, at 1h a 1-GPU job for 30m, at 2h (the last arrival) a 4-GPU job.
func TestDemand(t *testing.T) {
	jobs := []*job{
		{Job: Job{Submit: 0, Runtime: 2 * time.Hour}, gpus: 2},
		{Job: Job{Submit: time.Hour, Runtime: 30 * time.Minute}, gpus: 1},
		{Job: Job{Submit: 2 * time.Hour, Runtime: time.Hour}, gpus: 4},
	}
	// Window 2h: 2 GPUs × 2h + 1 × 0.5h + 4 × 0 = 4.5 GPU-h → 2.25 GPUs;
	// peak 4: the 4-GPU job alone (it starts as the first ends).
	mean, peak := demand(jobs, 1)
	if mean != 2.25 || peak != 4 {
		t.Errorf("demand(1) = %v, %v; want 2.25, 4", mean, peak)
	}
	// Twice as fast: window 1h, arrivals at 0, 30m, 1h: 2×1 + 1×0.5 = 2.5
	// GPU-h → 2.5 GPUs; all three overlap from 1h on: 2+4 and the 1-GPU
	// job ended at 1h → peak 6.
	mean, peak = demand(jobs, 0.5)
	if mean != 2.5 || peak != 6 {
		t.Errorf("demand(0.5) = %v, %v; want 2.5, 6", mean, peak)
	}
	// A peak of 6 GPUs needs the 4-GPU job to start before the first one
	// ends at 2h: any speed-up at all; the largest scale is just below 1.
	c, err := scaleForPeak(jobs, 6, 6)
	if err != nil || c >= 1 || c < 0.999999 {
		t.Errorf("scaleForPeak(6) = %v, %v; want just below 1", c, err)
	}
	if _, p := demand(jobs, c); p != 6 {
		t.Errorf("peak at the scale found = %v, want 6", p)
	}
	if _, err := scaleForPeak(jobs, 8, 6); err == nil || !strings.Contains(err.Error(), "cannot be reached") {
		t.Errorf("scaleForPeak beyond all jobs at once: %v", err)
	}
}

func TestChanges(t *testing.T) {
	nodes := []Node{
		{Name: "g-1", Model: "G2", GPUs: 8, CPU: 96000}, {Name: "g-2", Model: "G2", GPUs: 8, CPU: 96000},
		{Name: "g-3", Model: "G2", GPUs: 4, CPU: 48000}, {Name: "t-1", Model: "T4", GPUs: 2},
	}
	c, err := ParseChange("+20xG2")
	if err != nil || c != (Change{Flavor: "g2", GPUs: 20}) {
		t.Fatalf("ParseChange = %+v, %v", c, err)
	}
	got, note, err := ApplyChanges(nodes, []Change{c, {Flavor: "g2", GPUs: -9}})
	if err != nil {
		t.Fatal(err)
	}
	// 20 GPUs as the usual 8-GPU node: 8, 8 and a last one of 4. Removing
	// 9 takes whole nodes, last by name: g2-added-003 (4) and
	// g2-added-002 (8).
	want := []Node{nodes[0], nodes[1], nodes[2], nodes[3],
		{Name: "g2-added-001", Model: "G2", GPUs: 8, CPU: 96000, Block: "g2-added"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if note != "added 20 g2 GPUs as 3 nodes; removed 2 nodes of g2 (12 GPUs, last by name)" {
		t.Errorf("note = %q", note)
	}
	for _, bad := range []string{"16", "x", "0xg2", "ax g2", "16x"} {
		if _, err := ParseChange(bad); err == nil {
			t.Errorf("ParseChange(%q): no error", bad)
		}
	}
	if _, _, err := ApplyChanges(nodes, []Change{{Flavor: "h100", GPUs: 8}}); err == nil {
		t.Error("adding a flavor the cluster does not have: no error")
	}
	if _, _, err := ApplyChanges(nodes, []Change{{Flavor: "t4", GPUs: -4}}); err == nil {
		t.Error("removing more GPUs than there are: no error")
	}
}
