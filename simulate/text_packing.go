package simulate

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// packingRows are the arrival points the text report shows.
var packingRows = []int{50, 80, 90, 95, 100, 105, 110, 115, 120, 125, 130}

func writePackingText(b *strings.Builder, rep *Report) {
	pr := rep.Packing
	t := rep.Trace
	fmt.Fprintf(b, "gpubot simulate --mode packing: %s on %s\n\n", filepath.Base(t.Name), clusterLine(rep.Cluster))
	how := "packed as shares of a GPU"
	if pr.Fractional == string(FractionalRoundUp) {
		how = "rounded up to a whole GPU"
	}
	fmt.Fprintf(b, "%d pods (%d CPU-only, %d asking for a share of a GPU, %s); %d arrival orders (seeds %d–%d);\n",
		t.Jobs, t.CPUOnly, t.Fractional, how, len(pr.Seeds), pr.Seeds[0], pr.Seeds[len(pr.Seeds)-1])
	fmt.Fprintf(b, "pods arrive and never leave until the demand reaches %d%% of the GPUs; a pod must fit the node's %s.\n\n",
		pr.Arrived[len(pr.Arrived)-1], strings.ReplaceAll(pr.Resources, ",", ", "))
	rows := rowsUpTo(pr.Arrived[len(pr.Arrived)-1])
	section := func(title string, get func(PackingPoint) Spread) {
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "arrived\t")
		for _, p := range pr.Placements {
			fmt.Fprintf(tw, "%s\t", p)
		}
		fmt.Fprintln(tw)
		for _, a := range rows {
			fmt.Fprintf(tw, "%d%%\t", a)
			for _, p := range pr.Placements {
				s := get(pr.Curves[p][a])
				fmt.Fprintf(tw, "%.1f (%.1f–%.1f)\t", s.Mean, s.Min, s.Max)
			}
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(b, "%s, mean (min–max) over the seeds\n", title)
		tw.Flush()
		b.WriteString("\n")
	}
	section("Unallocated GPUs, % of all GPUs", func(p PackingPoint) Spread { return p.Unallocated })
	section("Fragmentation, % of all GPUs", func(p PackingPoint) Spread { return p.FragAll })
	section("Fragmentation, % of free GPUs", func(p PackingPoint) Spread { return p.FragFree })
	if slices.Contains(pr.Placements, "fgd") {
		for _, other := range pr.Placements {
			if other == "fgd" {
				continue
			}
			best, at := 0.0, 0
			for _, a := range rows {
				o, f := pr.Curves[other][a].Unallocated.Mean, pr.Curves["fgd"][a].Unallocated.Mean
				if o > 0 && (o-f)/o > best {
					best, at = (o-f)/o, a
				}
			}
			if best <= 0 {
				fmt.Fprintf(b, "fgd never leaves fewer GPUs unallocated than %s.\n", other)
				continue
			}
			fmt.Fprintf(b, "fgd leaves up to %.0f%% fewer GPUs unallocated than %s (at %d%% arrived).\n", 100*best, other, at)
		}
		b.WriteString("\n")
	}
	if ref := pr.Reference; ref != nil {
		names := []string{"Random", "DotProd", "Clustering", "Packing", "BestFit", "FGD"}
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "arrived\t%s\t\n", strings.Join(names, "\t"))
		for i, a := range ref.Arrived {
			if a > pr.Arrived[len(pr.Arrived)-1] {
				break
			}
			fmt.Fprintf(tw, "%d%%\t", a)
			for _, n := range names {
				fmt.Fprintf(tw, "%.1f\t", ref.Unallocated[n][i])
			}
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(b, "The paper on this trace: unallocated GPUs, %% of all (%s)\n", ref.Source)
		tw.Flush()
		for _, other := range []string{"Random", "BestFit", "DotProd"} {
			best, at := 0.0, 0
			for i, a := range ref.Arrived {
				if a > pr.Arrived[len(pr.Arrived)-1] {
					break
				}
				if o, f := ref.Unallocated[other][i], ref.Unallocated["FGD"][i]; o > 0 && (o-f)/o > best {
					best, at = (o-f)/o, a
				}
			}
			fmt.Fprintf(b, "The paper's FGD leaves up to %.0f%% fewer GPUs unallocated than its %s (at %d%% arrived).\n", 100*best, other, at)
		}
		for _, p := range pr.Placements {
			pn, ok := paperNames[p]
			if !ok {
				continue
			}
			var diffs []string
			for i, a := range ref.Arrived {
				if a > pr.Arrived[len(pr.Arrived)-1] {
					break
				}
				diffs = append(diffs, fmt.Sprintf("%+.2f", pr.Curves[p][a].Unallocated.Mean-ref.Unallocated[pn][i]))
			}
			fmt.Fprintf(b, "%s minus the paper's %s, points: %s\n", p, pn, strings.Join(diffs, " "))
		}
	}
}

func rowsUpTo(maxArr int) []int {
	var out []int
	for _, a := range packingRows {
		if a <= maxArr {
			out = append(out, a)
		}
	}
	if len(out) == 0 || out[len(out)-1] != maxArr {
		out = append(out, maxArr)
	}
	return out
}
