package simulate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Load scales a trace's arrival times; runtimes are kept. The zero Load
// replays arrivals as recorded.
//
// A trace that lists long-running services with short jobs (as openb
// does) has a demand that is nothing like stationary: the services pile
// up, and no speed-up of the arrivals gets the average demand over the
// arrival window near the cluster's size. Target therefore aims at the
// busiest moment instead: arrivals are sped up until, had nothing waited,
// the GPUs the jobs then ask for are Target times the cluster's.
type Load struct {
	// Target, if > 0, is the peak demand to reach (1.1: 10 % more GPUs
	// than the cluster has at the busiest moment).
	Target float64
	// Factor, if > 0 and Target is 0, multiplies the arrival rate.
	Factor float64
}

// ParseLoad reads "1.1" or "110%" (a target peak demand) or "50x" (50
// times the arrival rate). "" and "1x" mean as recorded.
func ParseLoad(s string) (Load, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Load{}, nil
	case strings.HasSuffix(s, "x"):
		f, err := strconv.ParseFloat(strings.TrimSuffix(s, "x"), 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return Load{}, fmt.Errorf("--load %q: want a positive factor like 50x", s)
		}
		return Load{Factor: f}, nil
	case strings.HasSuffix(s, "%"):
		f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil || !(f > 0) || f > 1000 {
			return Load{}, fmt.Errorf("--load %q: want a percentage above 0 like 110%%", s)
		}
		return Load{Target: f / 100}, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || f > 10 {
		return Load{}, fmt.Errorf("--load %q: want a peak demand like 1.1 or 110%%, or an arrival-rate factor like 50x", s)
	}
	return Load{Target: f}, nil
}

func (l Load) String() string {
	switch {
	case l.Target > 0:
		return fmt.Sprintf("peak demand %.4g%% of the GPUs", l.Target*100)
	case l.Factor > 0 && l.Factor != 1:
		return fmt.Sprintf("%gx the recorded arrival rate", l.Factor)
	}
	return "as recorded"
}

// scale returns the factor arrival offsets are multiplied by.
func (l Load) scale(jobs []*job, capacity float64) (float64, error) {
	switch {
	case l.Target > 0:
		return scaleForPeak(jobs, l.Target*capacity, capacity)
	case l.Factor > 0:
		return 1 / l.Factor, nil
	}
	return 1, nil
}

// demand returns the GPUs jobs (in submission order) would use, had none
// waited, with arrival offsets multiplied by c: the mean over the arrival
// window (first to last submission) and the peak.
func demand(jobs []*job, c float64) (mean, peak float64) {
	if len(jobs) == 0 {
		return 0, 0
	}
	first, last := jobs[0].Submit, jobs[len(jobs)-1].Submit
	w := c * float64(last-first)
	area := 0.0
	// Sweep the starts in order with the running jobs' ends in a heap; a
	// job ending exactly when another starts has left.
	var h endsHeap
	cur := 0
	for _, j := range jobs {
		s := c * float64(j.Submit-first)
		r := float64(j.Runtime)
		area += float64(j.gpus) * min(r, w-s)
		for len(h) > 0 && h[0].t <= s {
			cur -= h[0].gpus
			h.pop()
		}
		h.push(end{s + r, j.gpus})
		cur += j.gpus
		peak = max(peak, float64(cur))
	}
	if w > 0 {
		mean = area / w
	}
	return mean, peak
}

type end struct {
	t    float64
	gpus int
}

// endsHeap is a min-heap of ends by time.
type endsHeap []end

func (h *endsHeap) push(e end) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].t <= a[i].t {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *endsHeap) pop() {
	a := *h
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && a[l].t < a[m].t {
			m = l
		}
		if r := l + 1; r < n && a[r].t < a[m].t {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
}

// scaleForPeak finds the largest arrival scale (the least speed-up, at
// most none) at which the peak demand reaches want GPUs.
func scaleForPeak(jobs []*job, want, capacity float64) (float64, error) {
	if _, p := demand(jobs, 1); p >= want {
		return 1, nil
	}
	total := 0.0
	for _, j := range jobs {
		total += float64(j.gpus)
	}
	if want > total {
		return 0, fmt.Errorf("a peak demand of %.0f%% of the GPUs cannot be reached: even arriving all at once the jobs ask for %.0f%% (%.0f GPUs)",
			100*want/capacity, 100*total/capacity, total)
	}
	// The peak grows, not quite monotonically, as arrivals are sped up:
	// take the first step of a logarithmic scan (ten steps a decade, down
	// to a billionth) that reaches it, then bisect between it and the step
	// before.
	hi := 1.0 // peak below want
	lo := 0.0
	for k := 1; k <= 10*9; k++ {
		c := math.Pow(10, -float64(k)/10)
		if _, p := demand(jobs, c); p >= want {
			lo = c
			break
		}
		hi = c
	}
	if lo == 0 {
		lo = 1e-9 // about everything at once
	}
	for range 40 {
		mid := (lo + hi) / 2
		if _, p := demand(jobs, mid); p >= want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}
