package allocator

import (
	"math"
	"slices"
	"time"
)

// The arrival stretch of a range's later end (EstimateOptions.Arrivals):
// what of the arrivals goes before a workload, and how much later its
// wait ends because of it.

// arrivalLoad is what of arrivals goes before slot's workload: its load
// over the workload's flavors' GPUs (rho) and the longest it has been
// arriving (over; 0: for ever); held and heldOver the same of the part
// that goes first by order (priority, fair share) rather than by
// backfilling gaps the workload cannot use.
type arrivalLoad struct {
	rho, held      float64
	over, heldOver time.Duration
}

// arrivalDelay is how much later than w a wait of w ends under the
// arrivals going first (EstimateOptions.Arrivals).
func arrivalDelay(w time.Duration, a arrivalLoad) time.Duration {
	if !(a.rho > 0) || w <= 0 {
		return 0
	}
	r := min(a.rho, MaxArrivalShare)
	steady := r / (1 - r) * float64(w)
	if a.over <= 0 {
		return time.Duration(steady)
	}
	if a.held >= 1 && a.heldOver > 0 {
		return a.heldOver
	}
	return time.Duration(min(steady, min(a.rho, 1)*float64(a.over)))
}

// MaxArrivalShare caps the share of the GPUs that a steady load of
// arriving work going first is taken to claim (EstimateOptions.Arrivals):
// a wait is stretched by at most 1/(1−MaxArrivalShare), about 6.7 times,
// where 1/(1−ρ) would grow without bound as ρ nears 1. (Chosen on the
// simulator's traces, see BENCHMARKS.md.) Work going first by order
// that asks for more than the GPUs is a burst instead, waited out.
const MaxArrivalShare = 0.85

// arrivalLoad is the load of the arrivals that go before slot's
// workload (see EstimateOptions.Arrivals).
func (s *Snapshot) arrivalLoad(slot int32, arrivals []ArrivalRate) arrivalLoad {
	if len(arrivals) == 0 {
		return arrivalLoad{}
	}
	x := &s.ws[slot]
	mine := s.share(int(x.q))
	gpus, all := 0, 0
	for _, c := range s.classes[x.cls].cands {
		gpus += s.ix.flavors[c.f].total
	}
	for _, f := range s.ix.flavors {
		if !f.elastic {
			all += f.total
		}
	}
	if gpus == 0 {
		return arrivalLoad{}
	}
	var rho, held float64
	var over, heldOver time.Duration
	forever, heldForever := false, false
	for _, a := range arrivals {
		if !(a.GPUs > 0) || math.IsInf(a.GPUs, 0) {
			continue
		}
		before := a.Priority > x.w.Priority && !s.ix.fcfs
		if !before && s.ix.fair && a.Priority == x.w.Priority {
			if q, ok := s.ix.queueIdx[a.Queue]; ok && q != int(x.q) && s.share(q) < mine {
				before = true
			}
		}
		gap := !before && a.Size > 0 && a.Size < x.w.GPUs
		if !before && !gap {
			continue
		}
		var r float64
		switch f, ok := s.ix.flavorIdx[a.Flavor]; {
		case a.Flavor == "" && all > 0:
			r = a.GPUs / float64(all)
		case ok && slices.ContainsFunc(s.classes[x.cls].cands, func(c cand) bool { return int(c.f) == f }):
			r = a.GPUs / float64(gpus)
		default:
			continue
		}
		rho += r
		forever = forever || a.Over <= 0
		over = max(over, a.Over)
		if before {
			held += r
			heldForever = heldForever || a.Over <= 0
			heldOver = max(heldOver, a.Over)
		}
	}
	if rho <= 0 {
		return arrivalLoad{}
	}
	if forever {
		over = 0
	}
	if heldForever {
		heldOver = 0
	}
	return arrivalLoad{rho: rho, held: held, over: over, heldOver: heldOver}
}
