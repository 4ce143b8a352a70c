package allocator

import (
	"slices"
	"time"
)

// IntervalAlpha is the α of the interval score: ranges are meant to hold
// 1−α = 80 % of starts.
const IntervalAlpha = 0.2

// EstimateOutcome is a posted range and when the workload then started.
type EstimateOutcome struct {
	Earliest, Latest, Start time.Time
}

// EstimateScore says how good posted ranges were, over N outcomes.
type EstimateScore struct {
	N int
	// Inside counts starts in [Earliest−tolerance, Latest+tolerance];
	// Coverage = Inside/N (goal 1−IntervalAlpha). InsideExactly and
	// CoverageExactly are the same without the tolerance.
	Inside, InsideExactly     int
	Coverage, CoverageExactly float64
	// Medians of the range's width and of the start's distance from the
	// range's middle; the 90th percentile of the latter.
	MedianWidth, MedianAbsError, P90AbsError time.Duration
	// IntervalScore is the mean interval score, a proper scoring rule
	// for a range meant to hold 1−α of outcomes (lower is better):
	// width + (2/α)·(how far the start fell outside the range).
	IntervalScore time.Duration
}

// ScoreEstimates scores outcomes (nearest-rank percentiles). Ranges with
// Latest before Earliest are taken the other way round.
func ScoreEstimates(outcomes []EstimateOutcome, tolerance time.Duration) EstimateScore {
	sc := EstimateScore{N: len(outcomes)}
	if len(outcomes) == 0 {
		return sc
	}
	widths := make([]time.Duration, 0, len(outcomes))
	errs := make([]time.Duration, 0, len(outcomes))
	total := 0.0
	for _, o := range outcomes {
		lo, hi := o.Earliest, o.Latest
		if hi.Before(lo) {
			lo, hi = hi, lo
		}
		if !o.Start.Before(lo.Add(-tolerance)) && !o.Start.After(hi.Add(tolerance)) {
			sc.Inside++
		}
		if !o.Start.Before(lo) && !o.Start.After(hi) {
			sc.InsideExactly++
		}
		w := hi.Sub(lo)
		widths = append(widths, w)
		errs = append(errs, absDuration(o.Start.Sub(lo.Add(w/2))))
		s := float64(w)
		switch {
		case o.Start.Before(lo):
			s += 2 / IntervalAlpha * float64(lo.Sub(o.Start))
		case o.Start.After(hi):
			s += 2 / IntervalAlpha * float64(o.Start.Sub(hi))
		}
		total += s
	}
	sc.Coverage = float64(sc.Inside) / float64(sc.N)
	sc.CoverageExactly = float64(sc.InsideExactly) / float64(sc.N)
	slices.Sort(widths)
	slices.Sort(errs)
	sc.MedianWidth = nearestRank(widths, 50)
	sc.MedianAbsError = nearestRank(errs, 50)
	sc.P90AbsError = nearestRank(errs, 90)
	sc.IntervalScore = time.Duration(total / float64(sc.N))
	return sc
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// nearestRank is the p-th percentile of sorted, by nearest rank.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	k := (p*len(sorted)+99)/100 - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}
