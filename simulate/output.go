package simulate

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// WriteFiles writes the report into dir (created if needed):
// results.json, CSV files and, unless plots is false, PNG plots. It
// returns the names of the files written. Same report, same bytes.
//
// Replay: summary.csv (one row per run), waits.csv (per run and
// priority), jobs-<run>.csv (per job), timeline-<run>.csv (the samples),
// wait-cdf.png and fragmentation.png. Packing: packing.csv (every seed
// and point), packing-summary.csv (mean, min and max), packing.png.
func WriteFiles(dir string, rep *Report, plots bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	files := map[string][]byte{}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding results.json: %w", err)
	}
	files["results.json"] = append(js, '\n')
	if rep.Mode == "packing" {
		packingCSVs(rep, files)
	} else {
		replayCSVs(rep, files)
	}
	if plots {
		if err := drawPlots(rep, files); err != nil {
			return nil, err
		}
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return names, nil
}

// fileName turns a run name into a file name part: "gpubot +16xg2" →
// "gpubot_+16xg2".
func fileName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '+', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func f4(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }

func writeCSV(rows [][]string) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.WriteAll(rows) // a bytes.Buffer does not fail
	return buf.Bytes()
}

func replayCSVs(rep *Report, files map[string][]byte) {
	prios := replayPriorities(rep)
	sum := [][]string{{"run", "policy", "capacity", "jobs", "mean_wait_s", "p50_wait_s", "p95_wait_s", "max_wait_s", "never_started",
		"high_waited_over_1h", "utilisation", "utilisation_to_end", "frag_pct_all", "frag_pct_free", "jain", "preemptions",
		"lost_gpu_hours", "estimates", "estimates_inside_share", "estimate_median_abs_err_s", "estimate_p90_abs_err_s", "estimate_median_width_s", "estimate_interval_score_s", "estimates_inside_exactly_share"}}
	waits := [][]string{{"run", "priority", "jobs", "never_started", "mean_s", "p50_s", "p95_s", "max_s"}}
	for _, r := range rep.Runs {
		a, c := r.AllWaits, r.Calibration
		sum = append(sum, []string{r.Name, r.Policy, r.Capacity, strconv.Itoa(a.Jobs), f4(a.Mean), f4(a.P50), f4(a.P95), f4(a.Max),
			strconv.Itoa(a.NeverStarted), f4(r.Starvation), f4(r.Utilisation), f4(r.UtilisationToEnd), f4(r.FragPctAll),
			f4(r.FragPctFree), f4(r.Jain), strconv.Itoa(r.Preemptions), f4(r.LostGPUHours), strconv.Itoa(c.Estimated),
			f4(c.InsideShare), f4(c.MedianAbsErr), f4(c.P90AbsErr), f4(c.MedianWidth), f4(c.IntervalScore), f4(c.InsideExactlyShare)})
		for _, p := range prios {
			w, ok := r.Waits[p]
			if !ok {
				continue
			}
			waits = append(waits, []string{r.Name, p, strconv.Itoa(w.Jobs), strconv.Itoa(w.NeverStarted), f4(w.Mean), f4(w.P50), f4(w.P95), f4(w.Max)})
		}
		jobs := [][]string{{"id", "team", "priority", "gpus", "submit_s", "wait_s", "started", "runtime_s", "preemptions",
			"reason_at_submit", "estimate_earliest_s", "estimate_latest_s", "start_inside_estimate"}}
		for _, j := range r.Jobs {
			e, l := "", ""
			if j.EstKnown {
				e, l = f4(j.EstEarliest), f4(j.EstLatest)
			}
			jobs = append(jobs, []string{j.ID, j.Team, j.Priority, strconv.Itoa(j.GPUs), f4(j.Submit), f4(j.Wait), strconv.FormatBool(j.Started),
				f4(j.Runtime), strconv.Itoa(j.Preemptions), j.Reason, e, l, strconv.FormatBool(j.Inside)})
		}
		files["jobs-"+fileName(r.Name)+".csv"] = writeCSV(jobs)
		tl := [][]string{{"hours", "used_gpus", "free_gpus", "utilisation", "fragmented_gpus", "frag_pct_all", "frag_pct_free", "pending", "running"}}
		for _, s := range r.Timeline {
			tl = append(tl, []string{f4(s.Hours), strconv.Itoa(s.UsedGPUs), strconv.Itoa(s.FreeGPUs), f4(s.Utilisation), f4(s.Fragmented),
				f4(s.FragPctAll), f4(s.FragPctFree), strconv.Itoa(s.Pending), strconv.Itoa(s.Running)})
		}
		files["timeline-"+fileName(r.Name)+".csv"] = writeCSV(tl)
	}
	files["summary.csv"] = writeCSV(sum)
	files["waits.csv"] = writeCSV(waits)
}

func packingCSVs(rep *Report, files map[string][]byte) {
	pr := rep.Packing
	all := [][]string{{"placement", "seed", "arrived_pct", "unallocated_pct", "frag_pct_all", "frag_pct_free", "failed_pods"}}
	sum := [][]string{{"placement", "arrived_pct", "unallocated_mean", "unallocated_min", "unallocated_max",
		"frag_all_mean", "frag_all_min", "frag_all_max", "frag_free_mean", "frag_free_min", "frag_free_max"}}
	for _, p := range pr.Placements {
		for k, run := range pr.PerSeed[p] {
			for a, pt := range run {
				all = append(all, []string{p, strconv.FormatUint(pr.Seeds[k], 10), strconv.Itoa(pr.Arrived[a]), f4(pt.Unallocated.Mean),
					f4(pt.FragAll.Mean), f4(pt.FragFree.Mean), strconv.Itoa(int(pt.Failed.Mean))})
			}
		}
		for a, pt := range pr.Curves[p] {
			sum = append(sum, []string{p, strconv.Itoa(pr.Arrived[a]), f4(pt.Unallocated.Mean), f4(pt.Unallocated.Min), f4(pt.Unallocated.Max),
				f4(pt.FragAll.Mean), f4(pt.FragAll.Min), f4(pt.FragAll.Max), f4(pt.FragFree.Mean), f4(pt.FragFree.Min), f4(pt.FragFree.Max)})
		}
	}
	files["packing.csv"] = writeCSV(all)
	files["packing-summary.csv"] = writeCSV(sum)
}
