package simulate

import (
	"math"
	"slices"
	"time"
)

// Percentile is the nearest-rank percentile p (0 < p <= 100) of xs: the
// smallest value with at least p % of the values at or below it. It is 0
// for no values. xs need not be sorted and is not changed.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// Jain is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all are
// equal, 1/n when one has everything. It is 1 for no values or all zeros.
func Jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if len(xs) == 0 || sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// SlowdownBound is the runtime below which slowdown counts a job as
// running this long, so that jobs of a few seconds do not dominate.
const SlowdownBound = time.Minute

// Slowdown is the bounded slowdown of a job that waited wait and ran
// run: (wait + max(run, SlowdownBound)) / max(run, SlowdownBound).
func Slowdown(wait, run time.Duration) float64 {
	r := max(run, SlowdownBound)
	return float64(wait+r) / float64(r)
}

// WaitStats summarises waits, in seconds.
type WaitStats struct {
	Jobs int `json:"jobs"`
	// NeverStarted counts jobs still waiting when the replay ended; their
	// waits count up to then (a lower bound).
	NeverStarted int     `json:"neverStarted"`
	Mean         float64 `json:"meanSeconds"`
	P50          float64 `json:"p50Seconds"`
	P95          float64 `json:"p95Seconds"`
	Max          float64 `json:"maxSeconds"`
}

func waitStats(waits []float64, never int) WaitStats {
	w := WaitStats{Jobs: len(waits), NeverStarted: never}
	if len(waits) == 0 {
		return w
	}
	s := slices.Clone(waits)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	w.Mean = sum / float64(len(s))
	w.P50 = percentileSorted(s, 50)
	w.P95 = percentileSorted(s, 95)
	w.Max = s[len(s)-1]
	return w
}
