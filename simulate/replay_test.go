package simulate

import (
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/allocator"
)

// Small hand-made traces whose answers are worked out below by hand.

// replayCSV reads the node list and the trace and replays them.
func replayCSV(t *testing.T, nodes, jobs string, s Setup) *Report {
	t.Helper()
	nl, err := ReadNodes(strings.NewReader(nodes), "nodes.csv", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadTrace(strings.NewReader(jobs), "jobs.csv", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Nodes, s.Trace = nl.Nodes, tr
	rep, err := Replay(s)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func runNamed(t *testing.T, rep *Report, name string) *Run {
	t.Helper()
	for _, r := range rep.Runs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no run %q", name)
	return nil
}

func waitsOf(r *Run) map[string]float64 {
	out := map[string]float64{}
	for _, j := range r.Jobs {
		out[j.ID] = j.Wait
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

var kueueOnly = []Policy{{Name: "kueue", Mode: "BestEffortFIFO"}}

// TestReplayWaitsByHand: one 4-GPU node. j1 (4 GPUs, 1h) and j2 (2 GPUs,
// 1h) arrive at 0, j3 (2 GPUs, 30m) at 30m. j1 runs 0–1h; at 1h j2 and j3
// start together. Waits 0, 1h, 30m.
func TestReplayWaitsByHand(t *testing.T) {
	rep := replayCSV(t, "name,flavor,gpus\nn1,x,4\n",
		"id,submit,duration,gpus,requested\nj1,0,1h,4,1h\nj2,0,1h,2,1h\nj3,1800,30m,2,1h\n",
		Setup{Policies: kueueOnly, Calibrate: -1})
	r := runNamed(t, rep, "kueue")
	if diff := cmp.Diff(map[string]float64{"j1": 0, "j2": 3600, "j3": 1800}, waitsOf(r)); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	// Nearest rank: p50 of (0, 1800, 3600) is the 2nd, p95 the 3rd.
	want := WaitStats{Jobs: 3, Mean: 1800, P50: 1800, P95: 3600, Max: 3600}
	if diff := cmp.Diff(want, r.AllWaits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]WaitStats{"normal": want}, r.Waits); diff != "" {
		t.Errorf("waits by priority (-want +got):\n%s", diff)
	}
	// The arrival window is 0–30m, all 4 GPUs busy: 100 %. To the end
	// (j2 ends at 2h): 4 GPU-h to 1h, 2 to 1h30m, 1 to 2h: 7 of 8.
	if r.Utilisation != 1 || r.UtilisationToEnd != 0.875 || r.MakespanHours != 2 || r.PeakUse != 1 {
		t.Errorf("utilisation %v, to the end %v over %vh, peak %v; want 1, 0.875 over 2h, 1", r.Utilisation, r.UtilisationToEnd, r.MakespanHours, r.PeakUse)
	}
	// Both waiters were short of GPUs: 1h + 30m of waiting, all capacity
	// (the cohort's pool is the cluster, so the allocator's "cohort" is
	// capacity here).
	if diff := cmp.Diff(map[string]float64{"capacity": 1.5}, r.WaitHours); diff != "" {
		t.Errorf("wait hours by reason (-want +got):\n%s", diff)
	}
	if r.WaitShare["capacity"] != 1 || r.Jain != 1 || r.Preemptions != 0 || r.Starvation != 0 {
		t.Errorf("share %v, Jain %v, preemptions %d, starvation %v", r.WaitShare, r.Jain, r.Preemptions, r.Starvation)
	}
	// Calibration: with nothing learned, running jobs end at half to all
	// of their 1h: j2's estimate at 0 is 30m–1h, j3's at 30m is 30m–1h
	// (j1 could end at once). Both start at 1h: inside, 15m from the
	// middle.
	// Widths 30m, both inside: the interval score is the width.
	wantCal := Calibration{Stride: 1, Estimated: 2, Known: 2, Started: 2, Inside: 2, InsideShare: 1, InsideExactly: 2, InsideExactlyShare: 1, MedianAbsErr: 900, P90AbsErr: 900,
		MedianWidth: 1800, IntervalScore: 1800}
	if diff := cmp.Diff(wantCal, r.Calibration); diff != "" {
		t.Errorf("calibration (-want +got):\n%s", diff)
	}
}

// TestReplayPoliciesByHand: one 4-GPU node and three 4-GPU jobs of an
// hour: low at 0, normal at 10m, high at 20m.
//
//   - fcfs: in arrival order: starts 0, 1h, 2h; waits 0, 50m, 1h40m.
//   - kueue: at 1h the high one goes first: starts 0, 2h (normal), 1h
//     (high); waits 0, 1h50m, 40m.
//   - gpubot: normal preempts low at 10m, high preempts normal at 20m:
//     every job starts on arrival; two preemptions lose 10m of 4 GPUs
//     each (1h20m of GPU time); normal restarts at 1h20m, low at 2h20m
//     and ends at 3h20m.
func TestReplayPoliciesByHand(t *testing.T) {
	rep := replayCSV(t, "name,flavor,gpus\nn1,x,4\n",
		"id,submit,duration,gpus,priority\nlow,0,1h,4,low\nnormal,600,1h,4,normal\nhigh,1200,1h,4,high\n",
		Setup{})
	// Why they waited: for capacity at submission; but under kueue the
	// normal job was overtaken by the later, higher-priority one of the
	// same size: its 1h50m count as waiting for priority.
	cases := map[string]struct {
		waits       map[string]float64
		starvation  float64
		preemptions int
		lost        float64
		makespan    float64
		reasons     map[string]float64
	}{
		"fcfs":   {map[string]float64{"low": 0, "normal": 3000, "high": 6000}, 1, 0, 0, 3, map[string]float64{"capacity": 2.5}},
		"kueue":  {map[string]float64{"low": 0, "normal": 6600, "high": 2400}, 0, 0, 0, 3, map[string]float64{"priority": 11.0 / 6, "capacity": 4.0 / 6}},
		"gpubot": {map[string]float64{"low": 0, "normal": 0, "high": 0}, 0, 2, 4.0 / 3, 10.0 / 3, map[string]float64{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := runNamed(t, rep, name)
			if diff := cmp.Diff(tc.waits, waitsOf(r)); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if r.HighJobs != 1 || r.Starvation != tc.starvation {
				t.Errorf("starvation %v of %d high jobs, want %v of 1", r.Starvation, r.HighJobs, tc.starvation)
			}
			if r.Preemptions != tc.preemptions || !near(r.LostGPUHours, tc.lost) || !near(r.MakespanHours, tc.makespan) {
				t.Errorf("preemptions %d, lost %v GPU-h, makespan %vh; want %d, %v, %v", r.Preemptions, r.LostGPUHours, r.MakespanHours, tc.preemptions, tc.lost, tc.makespan)
			}
			if r.Utilisation != 1 {
				t.Errorf("utilisation %v, want 1 (the node is busy from 0 to the last arrival)", r.Utilisation)
			}
			if diff := cmp.Diff(tc.reasons, r.WaitHours, cmp.Comparer(near)); diff != "" {
				t.Errorf("wait hours by reason (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReplayFairnessByHand: a 2-GPU node shared by teams a and b (a
// nominal GPU each). At 0, a submits a1, a2, a3 and b submits b1, each a
// GPU for an hour.
//
//   - fcfs: by arrival, then name: a1 and a2 run first, a3 and b1 wait
//     an hour. Mean bounded slowdowns: a (1+1+2)/3 = 4/3, b 2; Jain
//     (10/3)² / (2·(16/9 + 4)) = 100/104.
//   - kueue: Kueue's cycle takes one head per ClusterQueue (scheduler.go,
//     schedule; Heads), so the first cycle admits a1 and b1, each within
//     its nominal quota; a2 would borrow b's GPU, which b uses. a2 and
//     a3 wait: a (1+2+2)/3 = 5/3, b 1; Jain (8/3)² / (2·(25/9 + 1)) =
//     16/17.
//   - gpubot: after a1, a's usage (the entry penalty) puts b1 before a2:
//     a1 and b1 run first, a2 and a3 wait, as with kueue.
func TestReplayFairnessByHand(t *testing.T) {
	rep := replayCSV(t, "name,flavor,gpus\nn1,x,2\n",
		"id,submit,duration,gpus,team\na1,0,1h,1,a\na2,0,1h,1,a\na3,0,1h,1,a\nb1,0,1h,1,b\n", Setup{})
	for name, want := range map[string]struct {
		waits map[string]float64
		slow  map[string]float64
		jain  float64
	}{
		"fcfs":   {map[string]float64{"a1": 0, "a2": 0, "a3": 3600, "b1": 3600}, map[string]float64{"a": 4.0 / 3, "b": 2}, 100.0 / 104},
		"kueue":  {map[string]float64{"a1": 0, "b1": 0, "a2": 3600, "a3": 3600}, map[string]float64{"a": 5.0 / 3, "b": 1}, 16.0 / 17},
		"gpubot": {map[string]float64{"a1": 0, "b1": 0, "a2": 3600, "a3": 3600}, map[string]float64{"a": 5.0 / 3, "b": 1}, 16.0 / 17},
	} {
		r := runNamed(t, rep, name)
		if diff := cmp.Diff(want.waits, waitsOf(r)); diff != "" {
			t.Errorf("%s waits (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(want.slow, r.TeamSlowdown, cmp.Comparer(near)); diff != "" {
			t.Errorf("%s slowdowns (-want +got):\n%s", name, diff)
		}
		if !near(r.Jain, want.jain) {
			t.Errorf("%s: Jain %v, want %v", name, r.Jain, want.jain)
		}
	}
}

// TestReplayFragmentationByHand: two 4-GPU nodes a and b; a 3-GPU and a
// 2-GPU job arrive at 0. Fragmentation-aware placement puts the 3 on a
// and the 2 on b (a fresh node: it keeps no hole of 1 next to a 3).
// Measure (a) with the trace's mix (half 3s, half 2s): a's free GPU fits
// neither (1·1), b's 2 fit only the 2s (2·½): 2 GPUs, 25 % of all, 2/3 of
// the 3 free.
func TestReplayFragmentationByHand(t *testing.T) {
	rep := replayCSV(t, "name,flavor,gpus\na,x,4\nb,x,4\n", "id,submit,duration,gpus\nj1,0,2h,3\nj2,0,2h,2\n", Setup{Policies: kueueOnly})
	r := runNamed(t, rep, "kueue")
	if len(r.Timeline) == 0 {
		t.Fatal("no samples")
	}
	s := r.Timeline[0]
	if s.UsedGPUs != 5 || s.FreeGPUs != 3 || !near(s.Fragmented, 2) || !near(s.FragPctAll, 25) || !near(s.FragPctFree, 200.0/3) {
		t.Errorf("first sample %+v; want 5 used, 3 free, 2 fragmented (25%% / 66.7%%)", s)
	}
	if !near(r.FragPctAll, 25) || !near(r.FragPctFree, 200.0/3) {
		t.Errorf("mean fragmentation %v / %v", r.FragPctAll, r.FragPctFree)
	}
}

// TestReplayNeverStarted: a job asking for 8 GPUs on one host of a
// cluster of 4-GPU nodes never starts; its wait counts up to the last
// event (the other job's end at 1h).
func TestReplayNeverStarted(t *testing.T) {
	rep := replayCSV(t, "name,flavor,gpus\na,x,4\nb,x,4\n", "id,submit,duration,gpus,topology\nbig,0,1h,8,host\nsmall,600,1h,1,\n", Setup{Policies: kueueOnly})
	r := runNamed(t, rep, "kueue")
	if r.AllWaits.NeverStarted != 1 || waitsOf(r)["big"] != 4200 {
		t.Errorf("never started %d, big waited %v; want 1, 4200 (to 1h10m)", r.AllWaits.NeverStarted, waitsOf(r)["big"])
	}
}

// TestReplayWhatIf replays the first hand trace again with 4 more GPUs:
// nothing waits.
func TestReplayWhatIf(t *testing.T) {
	rep := replayCSV(t, "name,flavor,gpus\nn1,x,4\n",
		"id,submit,duration,gpus\nj1,0,1h,4\nj2,0,1h,2\nj3,1800,30m,2\n",
		Setup{Policies: kueueOnly, Changes: []Change{{Flavor: "x", GPUs: 4}}})
	if len(rep.Runs) != 2 || rep.Changed == nil || rep.Changed.GPUs != 8 || rep.Changed.Note != "added 4 x GPUs as 1 node" {
		t.Fatalf("runs %d, changed %+v", len(rep.Runs), rep.Changed)
	}
	if r := runNamed(t, rep, "kueue +4xx"); r.AllWaits.Max != 0 || r.Capacity != "+4xx" {
		t.Errorf("with +4 GPUs: %+v", r.AllWaits)
	}
	if r := runNamed(t, rep, "kueue"); r.AllWaits.Max != 3600 {
		t.Errorf("as given: %+v", r.AllWaits)
	}
	var b strings.Builder
	if err := WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "What if +4xx") || !strings.Contains(b.String(), "kueue         30m → 0s") {
		t.Errorf("text:\n%s", b.String())
	}
}

// TestReplayFractional: the openb mapping's shares of a GPU are rounded up
// or left out.
func TestReplayFractional(t *testing.T) {
	pods := openBPodHeader + "p0,1,1,1,500,,LS,Running,0,3600,0\np1,1,1,1,1000,,BE,Running,60,3660,60\np2,1,1,0,0,,BE,Running,60,3660,60\n"
	for mode, want := range map[Fractional]int{FractionalRoundUp: 2, FractionalSkip: 1} {
		rep := replayCSV(t, "sn,gpu,model\nn1,1,T4\nn2,1,T4\n", pods, Setup{Policies: kueueOnly, Fractional: mode})
		tr := rep.Trace
		if tr.Jobs != want || tr.Fractional != 1 || tr.CPUOnly != 1 || tr.FractionalMode != string(mode) {
			t.Errorf("%s: %+v", mode, tr)
		}
	}
}

// TestTraceSummaryJSON: CPU-only pods are counted as "cpuOnly" (the
// packing mode places them; only the replay leaves them out).
func TestTraceSummaryJSON(t *testing.T) {
	data, err := json.Marshal(TraceSummary{CPUOnly: 3})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m["cpuOnly"] != 3.0 {
		t.Errorf("cpuOnly = %v in %s", m["cpuOnly"], data)
	}
	if _, ok := m["cpuOnlyLeftOut"]; ok {
		t.Errorf("the old misleading key is still there: %s", data)
	}
}

// TestReplayProgressAnnouncesRuns: every run reports done 0 before any
// reports progress, and no run's done goes back, so a combined bar never
// goes backwards.
func TestReplayProgressAnnouncesRuns(t *testing.T) {
	nl, tr := readSample(t, "nodes_sample.csv", "jobs_sample.csv", ReadOptions{})
	var mu sync.Mutex
	type call struct {
		run         string
		done, total int
	}
	var calls []call
	_, err := Replay(Setup{Nodes: nl.Nodes, Trace: tr, Changes: []Change{{Flavor: "h100", GPUs: 8}},
		Progress: func(run string, done, total int) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, call{run, done, total})
		}})
	if err != nil {
		t.Fatal(err)
	}
	const runs = 6 // three policies, twice
	if len(calls) < runs {
		t.Fatalf("%d progress calls", len(calls))
	}
	seen := map[string]int{}
	for i, c := range calls {
		if i < runs {
			if c.done != 0 {
				t.Errorf("call %d %+v: want every run announced with 0 first", i, c)
			}
			seen[c.run] = 0
			continue
		}
		last, ok := seen[c.run]
		if !ok || c.done < last || c.total != len(tr.Jobs) {
			t.Errorf("call %d %+v: unannounced, backwards (last %d) or another total", i, c, last)
		}
		seen[c.run] = c.done
	}
	if len(seen) != runs {
		t.Errorf("runs seen: %v", seen)
	}
}

// TestReplayCPUByHand: one node with 8 GPUs, 8 CPUs and 64 GiB; j1 and
// j2 ask for 4 GPUs, 6 CPUs and 1 GiB each, j3 (at 30m) for 2 GPUs, 1
// CPU and 65 000 MiB. Counting CPU and memory, only j1 starts at 0 (6+6
// CPUs > 8); j3 does not fit beside j1 or j2 either (1 024 + 65 000 MiB >
// 64 GiB), so at 1h j2 starts and j3 waits on until 2h: waits 0, 1h,
// 1h30m. Counting CPU only, j3 starts beside j1 at 30m. Counting
// GPUs only, j1 and j2 start at 0 and j3 at 1h. A node list without the
// CPU and memory columns counts GPUs only whatever Setup says.
func TestReplayCPUByHand(t *testing.T) {
	const nodes = "name,flavor,gpus,cpu_milli,memory_mib\nn1,x,8,8000,65536\n"
	const jobs = "id,submit,duration,gpus,cpu_milli,memory_mib\n" +
		"j1,0,1h,4,6000,1024\nj2,0,1h,4,6000,1024\nj3,1800,30m,2,1000,65000\n"
	for _, tc := range []struct {
		name        string
		nodes       string
		cpu, memory bool
		want        map[string]float64
		resources   []string
	}{
		{"cpu and memory", nodes, true, true, map[string]float64{"j1": 0, "j2": 3600, "j3": 5400}, []string{"gpu", "cpu", "memory"}},
		{"cpu only", nodes, true, false, map[string]float64{"j1": 0, "j2": 3600, "j3": 0}, []string{"gpu", "cpu"}},
		{"gpus only", nodes, false, false, map[string]float64{"j1": 0, "j2": 0, "j3": 1800}, []string{"gpu"}},
		{"nodes do not say", "name,flavor,gpus\nn1,x,8\n", true, true, map[string]float64{"j1": 0, "j2": 0, "j3": 1800}, []string{"gpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := replayCSV(t, tc.nodes, jobs, Setup{Policies: kueueOnly, Calibrate: -1, CPU: tc.cpu, Memory: tc.memory})
			if diff := cmp.Diff(tc.want, waitsOf(runNamed(t, rep, "kueue"))); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.resources, rep.Resources); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReplayKueueFairSharingByHand: one 6-GPU node, teams a, b and l
// with a nominal quota of 2 GPUs each in one cohort (6 lendable). At 0,
// a0 (a, 3 GPUs, 10h) and l0 (l, 3 GPUs, 1h) start, each borrowing one.
// a2 (a, 2 GPUs) arrives at 60 s and b1 (b, 3 GPUs) at 120 s; both wait
// for l0's end at 1h, when 3 GPUs are free, room for one of them, and
// both would borrow. Kueue's classical order takes the older a2 (b1
// starts when a2 ends, at 2h); Kueue's Fair Sharing takes the head whose
// queue's dominant resource share would be lower (fair_sharing_iterator.go):
// a would borrow 3 of 6 (500), b 1 of 6 (167): b1 at 1h, a2 at 2h.
func TestReplayKueueFairSharingByHand(t *testing.T) {
	rep := replayCSV(t, "name,flavor,gpus\nn1,x,6\n",
		"id,submit,duration,gpus,team\na0,0,10h,3,a\nl0,0,1h,3,l\na2,60,1h,2,a\nb1,120,1h,3,b\n",
		Setup{Calibrate: -1, Policies: []Policy{
			{Name: "kueue", Mode: allocator.BestEffortFIFO},
			{Name: "kueue-fs", Mode: allocator.BestEffortFIFO, FairSharing: &allocator.KueueFairSharing{}},
		}})
	for name, want := range map[string]map[string]float64{
		"kueue":    {"a0": 0, "l0": 0, "a2": 3540, "b1": 7080},
		"kueue-fs": {"a0": 0, "l0": 0, "a2": 7140, "b1": 3480},
	} {
		if diff := cmp.Diff(want, waitsOf(runNamed(t, rep, name))); diff != "" {
			t.Errorf("%s: waits (-want +got):\n%s", name, diff)
		}
	}
}
