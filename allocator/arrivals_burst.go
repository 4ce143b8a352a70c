package allocator

import (
	"math"
	"slices"
	"time"
)

// burstEvidence is how much more likely (in nats of log-likelihood) the
// arrivals must be under a rate that rose at one moment than under one
// steady rate for that moment to count as the start of a burst (see
// burstStart): 3 nats, a likelihood ratio of about 20.
const burstEvidence = 3.0

// burstStart is when the current burst of arrivals at times (sorted,
// all in [from, now]) began: the change point of a Poisson process with
// one rate up to it and a higher one after it, the arrival that, as the
// last of the slower stretch, makes the arrivals most likely, if that is
// more likely than one steady rate over (from, now] by burstEvidence;
// otherwise the first arrival (the work has been arriving as it does
// since then). How long the work has been
// arriving (ArrivalRate.Over) is counted from there, so that a burst is
// taken to last as long again as it has since it began, not since some
// earlier, slower arrival of the same work.
func burstStart(times []time.Time, from, now time.Time) time.Time {
	n := len(times)
	if n < 2 {
		if n == 1 {
			return times[0]
		}
		return now
	}
	sec := func(d time.Duration) float64 { return max(1, d.Seconds()) }
	total := sec(now.Sub(from))
	ll := func(k int, t float64) float64 {
		if k == 0 {
			return 0
		}
		return float64(k) * math.Log(float64(k)/t)
	}
	steady := ll(n, total)
	best, at := burstEvidence, times[0]
	for i := 1; i < n; i++ {
		if times[i].Equal(times[i-1]) {
			continue
		}
		// The arrival at the change point ends the slow stretch: the
		// burst is what came after it (else the latest arrival alone,
		// an instant ago, would always read as one).
		before, after := sec(times[i].Sub(from)), sec(now.Sub(times[i]))
		k1, k2 := i+1, n-i-1
		if k2 == 0 {
			break
		}
		if float64(k2)/after <= float64(k1)/before {
			continue // the rate fell: not a burst
		}
		if g := ll(k1, before) + ll(k2, after) - steady; g > best {
			best, at = g, times[i]
		}
	}
	return at
}

// sortTimes sorts ts in place and returns it.
func sortTimes(ts []time.Time) []time.Time {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}
