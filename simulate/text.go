package simulate

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteText writes the report as plain-text tables.
func WriteText(w io.Writer, rep *Report) error {
	b := &strings.Builder{}
	if rep.Mode == "packing" {
		writePackingText(b, rep)
	} else {
		writeReplayText(b, rep)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeReplayText(b *strings.Builder, rep *Report) {
	t := rep.Trace
	fmt.Fprintf(b, "gpubot simulate: %s on %s\n\n", filepath.Base(t.Name), clusterLine(rep.Cluster))
	fmt.Fprintf(b, "Trace: %d GPU jobs of %d rows", t.Jobs, t.Rows)
	var notes []string
	if t.Skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d bad rows skipped", t.Skipped))
	}
	if t.CPUOnly > 0 {
		notes = append(notes, fmt.Sprintf("%d CPU-only left out", t.CPUOnly))
	}
	if t.Fractional > 0 {
		verb := "left out"
		if t.FractionalMode != string(FractionalSkip) {
			verb = fmt.Sprintf("rounded up to a whole GPU, %.0f GPU-hours more than their shares", t.FractionalGPUHours-t.ShareGPUHours)
		}
		notes = append(notes, fmt.Sprintf("%d asking for a share of a GPU %s", t.Fractional, verb))
	}
	if t.Unrunnable > 0 {
		notes = append(notes, fmt.Sprintf("%d for GPU models the cluster lacks left out", t.Unrunnable))
	}
	if len(notes) > 0 {
		fmt.Fprintf(b, " (%s)", strings.Join(notes, "; "))
	}
	fmt.Fprintf(b, ", %s, arrivals over %s.\n", plural(t.Teams, "team"), fmtHours(t.SpanHours))
	fmt.Fprintf(b, "Load: %s: arrivals %.4gx as fast as recorded; had nothing waited, the jobs would ask for %.1f%% of the GPUs\n",
		t.Load, t.ArrivalRate, 100*t.MeanDemand)
	fmt.Fprintf(b, "      on average over the arrivals and %.1f%% at the busiest moment (recorded: %.2f%% and %.1f%%).\n",
		100*t.PeakDemand, 100*t.RecordedMeanDemand, 100*t.RecordedPeakDemand)
	if t.PeakDemand < 0.8 {
		b.WriteString("      At this load little waits: --load 110% speeds arrivals up until the busiest moment asks for 110% of the GPUs.\n")
	}
	if t.History != "" {
		fmt.Fprintf(b, "History: the estimates learned runtimes from %s of %s before the replay.\n", plural(t.HistoryRuns, "run"), filepath.Base(t.History))
	}
	fmt.Fprintf(b, "Placement: %s.", rep.Placement)
	if len(rep.Resources) > 1 {
		fmt.Fprintf(b, " Counted: %s (on the nodes and in the teams' quotas).", strings.Join(rep.Resources, ", "))
	}
	if rep.Changed != nil {
		fmt.Fprintf(b, " What-if %q: %s: %s.", rep.Changed.Name, clusterLine(*rep.Changed), rep.Changed.Note)
	}
	b.WriteString("\n\n")

	prios := replayPriorities(rep)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "Wait to start\t")
	for _, p := range prios {
		fmt.Fprintf(tw, "%s p50 / p95 / max\t", p)
	}
	fmt.Fprint(tw, "all mean\tnever started\n")
	for _, r := range rep.Runs {
		fmt.Fprintf(tw, "%s\t", r.Name)
		for _, p := range prios {
			ws, ok := r.Waits[p]
			if !ok {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%s / %s / %s\t", fmtSeconds(ws.P50), fmtSeconds(ws.P95), fmtSeconds(ws.Max))
		}
		fmt.Fprintf(tw, "%s\t%d\n", fmtSeconds(r.AllWaits.Mean), r.AllWaits.NeverStarted)
	}
	tw.Flush()
	b.WriteString("\n")

	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "Cluster\thigh waited >1h\tGPUs in use: mean / peak\tfragmented, of all / of free: mean; at peak\tJain (teams)\tpreemptions (GPU-h lost)\n")
	for _, r := range rep.Runs {
		fmt.Fprintf(tw, "%s\t%s of %d\t%.1f%% / %.1f%%\t%.1f%% / %.1f%%; %.1f%% / %.1f%%\t%.3f\t%d (%.1f)\n", r.Name, pct(r.Starvation), r.HighJobs,
			100*r.Utilisation, 100*r.PeakUse, r.FragPctAll, r.FragPctFree, r.PeakFragPctAll, r.PeakFragPctFree, r.Jain, r.Preemptions, r.LostGPUHours)
	}
	tw.Flush()
	b.WriteString("\n")

	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "Why work waited\t")
	for _, reason := range reasonOrder {
		fmt.Fprintf(tw, "%s\t", reason)
	}
	fmt.Fprint(tw, "job-hours waited\n")
	for _, r := range rep.Runs {
		fmt.Fprintf(tw, "%s\t", r.Name)
		total := 0.0
		for _, reason := range reasonOrder {
			fmt.Fprintf(tw, "%s\t", pct(r.WaitShare[string(reason)]))
			total += r.WaitHours[string(reason)]
		}
		fmt.Fprintf(tw, "%.1f\n", total)
	}
	tw.Flush()
	b.WriteString("(the reason given when the job was submitted, or priority if a later job of higher priority and at least its size\n" +
		" started first; weighted by how long it waited)\n\n")

	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "Estimates\tposted\tstart inside the range\texactly\tmedian width\tmedian |error|\tp90 |error|\tinterval score\n")
	for _, r := range rep.Runs {
		c := r.Calibration
		if c.Stride == 0 {
			fmt.Fprintf(tw, "%s\toff\t\t\t\t\t\t\n", r.Name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s of %d\t%s\t%s\t%s\t%s\t%s\n", r.Name, c.Estimated, pct(c.InsideShare), c.Started, pct(c.InsideExactlyShare),
			fmtSeconds(c.MedianWidth), fmtSeconds(c.MedianAbsErr), fmtSeconds(c.P90AbsErr), fmtSeconds(c.IntervalScore))
	}
	tw.Flush()
	b.WriteString("(inside: give or take a minute, as the card shows minutes; exactly: without the minute; interval score: width + 10 × how far outside the range the start fell, mean, lower is better)\n")
	if len(rep.Runs) > 0 && rep.Runs[0].Calibration.Stride > 1 {
		fmt.Fprintf(b, "(every %d%s job in arrival order was sampled; an estimate is posted only for a job that waits)\n",
			rep.Runs[0].Calibration.Stride, ordinalSuffix(rep.Runs[0].Calibration.Stride))
	}
	if rep.Changed != nil {
		b.WriteString("\n")
		writeWhatIf(b, rep)
	}
}

// writeWhatIf compares each policy's run on the changed cluster with its
// run on the cluster as given.
func writeWhatIf(b *strings.Builder, rep *Report) {
	base := map[string]*Run{}
	for _, r := range rep.Runs {
		if r.Capacity == "as given" {
			base[r.Policy] = r
		}
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "What if %s\tmean wait\tp95 wait\thigh waited >1h\tGPU utilisation\n", rep.Changed.Name)
	for _, r := range rep.Runs {
		o := base[r.Policy]
		if r.Capacity == "as given" || o == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s → %s\t%s → %s\t%s → %s\t%.1f%% → %.1f%%\n", r.Policy,
			fmtSeconds(o.AllWaits.Mean), fmtSeconds(r.AllWaits.Mean), fmtSeconds(o.AllWaits.P95), fmtSeconds(r.AllWaits.P95),
			pct(o.Starvation), pct(r.Starvation), 100*o.Utilisation, 100*r.Utilisation)
	}
	tw.Flush()
	for _, r := range rep.Runs {
		if line := elasticLine(r); line != "" {
			b.WriteString(line + ".\n")
		}
	}
}

func clusterLine(c ClusterSummary) string {
	flavors := make([]string, 0, len(c.Flavors))
	for f := range c.Flavors {
		flavors = append(flavors, f)
	}
	slices.SortFunc(flavors, func(a, b string) int {
		if c.Flavors[a] != c.Flavors[b] {
			return c.Flavors[b] - c.Flavors[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(flavors))
	for i, f := range flavors {
		parts[i] = fmt.Sprintf("%s %d", f, c.Flavors[f])
	}
	return fmt.Sprintf("%s, %d GPUs (%s)", plural(c.Nodes, "node"), c.GPUs, strings.Join(parts, ", "))
}

// replayPriorities lists the priority classes that have jobs, highest
// value first.
func replayPriorities(rep *Report) []string {
	seen := map[string]bool{}
	for _, r := range rep.Runs {
		for p := range r.Waits {
			seen[p] = true
		}
	}
	classes := slices.Clone(rep.Priorities)
	slices.SortStableFunc(classes, func(a, b PriorityClass) int { return int(b.Value) - int(a.Value) })
	var out []string
	for _, c := range classes {
		if seen[c.Name] {
			out = append(out, c.Name)
			delete(seen, c.Name)
		}
	}
	var rest []string
	for p := range seen {
		rest = append(rest, p)
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// fmtSeconds writes a duration compactly: 0s, 45s, 12m, 3.2h, 2.1d.
func fmtSeconds(s float64) string {
	switch {
	case s < 59.5:
		return fmt.Sprintf("%.0fs", s)
	case s < 3600-30:
		return fmt.Sprintf("%.0fm", s/60)
	case s < 48*3600:
		return fmt.Sprintf("%.1fh", s/3600)
	}
	return fmt.Sprintf("%.1fd", s/86400)
}

func fmtHours(h float64) string { return fmtSeconds(h * 3600) }

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func ordinalSuffix(n int) string {
	if n%100 >= 11 && n%100 <= 13 {
		return "th"
	}
	switch n % 10 {
	case 1:
		return "st"
	case 2:
		return "nd"
	case 3:
		return "rd"
	}
	return "th"
}
