package digest

import (
	"math"
	"slices"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// Pure computations over gpubot's records: the numbers the digest and the
// report show. None of them reads the clock or the store.

// period is the half-open interval [from, to).
type period struct{ from, to time.Time }

func (p period) has(t time.Time) bool { return !t.Before(p.from) && t.Before(p.to) }

func (p period) hours() float64 { return p.to.Sub(p.from).Hours() }

// midnight is the start of t's day in loc.
func midnight(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// days is the n calendar days in loc that end at the start of t's day:
// days(t, 1) is "yesterday". Days are calendar days, so one with a
// daylight-saving change has 23 or 25 hours.
func days(t time.Time, loc *time.Location, n int) period {
	end := midnight(t, loc)
	return period{from: end.AddDate(0, 0, -n), to: end}
}

// before is the n-day period just before p.from.
func (p period) before(n int, loc *time.Location) period {
	return days(p.from, loc, n)
}

// episode is one wait of a request for GPUs: from its creation or requeue
// to its admission (admitted), or to when it stopped waiting without one
// (denied, cancelled), or still going (open, To zero).
type episode struct {
	req      *records.Request
	from, to time.Time
	admitted bool
}

// episodes lists r's waits. Seeded work (already running when the
// simulated cluster started) never waited.
func episodes(r *records.Request) []episode {
	if r.Origin == "seed" {
		return nil
	}
	var out []episode
	for _, w := range r.Waits {
		out = append(out, episode{req: r, from: w.From, to: w.To, admitted: true})
	}
	if len(r.Waits) == 0 && !r.AdmittedAt.IsZero() {
		// Recorded before gpubot kept Waits: the last admission only.
		from := r.QueuedAt
		if r.Preemptions == 0 || from.IsZero() {
			from = r.CreatedAt
		}
		out = append(out, episode{req: r, from: from, to: r.AdmittedAt, admitted: true})
	}
	since := r.WaitingSince()
	switch r.State {
	case records.StateQueued, records.StateAwaitingApproval:
		out = append(out, episode{req: r, from: since})
	case records.StateCancelled, records.StateDenied:
		out = append(out, episode{req: r, from: since, to: r.EndedAt})
	}
	return out
}

// waitSample is one wait counted in a period: one that ended with an
// admission in it, or one still going at its end (censored: counted with
// its length so far).
type waitSample struct {
	req      *records.Request
	d        time.Duration
	censored bool
}

// waitsIn counts each wait separately (a request preempted and requeued
// waits again, and that wait counts too), in the period where it ended
// with an admission; a wait still going at the period's end counts there
// with its length so far.
func waitsIn(reqs []records.Request, p period) []waitSample {
	var out []waitSample
	for i := range reqs {
		for _, e := range episodes(&reqs[i]) {
			switch {
			case !e.from.Before(p.to):
			case e.admitted && p.has(e.to):
				out = append(out, waitSample{req: e.req, d: e.to.Sub(e.from)})
			case e.to.IsZero() || !e.to.Before(p.to):
				out = append(out, waitSample{req: e.req, d: p.to.Sub(e.from), censored: true})
			}
		}
	}
	return out
}

// waitStats summarises waits: how many, nearest-rank p50 and p95, the
// longest, and how many were still going.
type waitStats struct {
	n, censored   int
	p50, p95, max time.Duration
}

func summarise(ws []waitSample) waitStats {
	if len(ws) == 0 {
		return waitStats{}
	}
	ds := make([]time.Duration, len(ws))
	st := waitStats{n: len(ws)}
	for i, w := range ws {
		ds[i] = w.d
		if w.censored {
			st.censored++
		}
	}
	slices.Sort(ds)
	st.p50, st.p95, st.max = rank(ds, 0.5), rank(ds, 0.95), ds[len(ds)-1]
	return st
}

// rank is the nearest-rank q-quantile of sorted xs (not empty).
func rank[T any](xs []T, q float64) T {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// highPriorities are the priorities the success metrics call high: those
// at or above the one named "high", or the highest one if none is.
func highPriorities(set commands.Settings) map[string]bool {
	out := map[string]bool{}
	ps := set.Priorities
	if len(ps) == 0 {
		return out
	}
	floor := ps[len(ps)-1].Value
	for _, p := range ps {
		if p.Name == "high" {
			floor = p.Value
		}
	}
	for _, p := range ps {
		if p.Value >= floor {
			out[p.Name] = true
		}
	}
	return out
}

// gpuHours adds up GPU-hours within p by key: usage records, plus
// requests still running (counted up to now).
func gpuHours(use []records.UsageRecord, running []records.Request, now time.Time, p period, key func(team, person string) string) map[string]float64 {
	out := map[string]float64{}
	for _, u := range use {
		if h := u.GPUHours(p.from, p.to); h > 0 {
			out[key(u.Team, u.Requester)] += h
		}
	}
	for _, r := range running {
		if r.State != records.StateRunning || r.AdmittedAt.IsZero() {
			continue
		}
		u := records.UsageRecord{GPUs: r.GPUs, Start: r.AdmittedAt, End: now}
		if h := u.GPUHours(p.from, p.to); h > 0 {
			out[key(r.Team, r.Requester)] += h
		}
	}
	return out
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// counts are what happened to requests in a period.
type counts struct {
	requested, started, finished, expired, preempted, denied, cancelled int
}

func (c counts) zero() bool { return c == counts{} }

// countIn counts requests of keep in p: requested (created), started
// (admissions, re-admissions included), finished (released, or their Job
// ended), expired (ran until their requested time was up), preempted
// (audited preemptions), denied and cancelled.
func countIn(reqs []records.Request, audit []records.AuditEntry, p period, keep func(*records.Request) bool) counts {
	var c counts
	byID := map[string]*records.Request{}
	for i := range reqs {
		r := &reqs[i]
		byID[r.ID] = r
		if !keep(r) {
			continue
		}
		if r.Origin != "seed" && p.has(r.CreatedAt) {
			c.requested++
		}
		for _, e := range episodes(r) {
			if e.admitted && p.has(e.to) {
				c.started++
			}
		}
		if !p.has(r.EndedAt) {
			continue
		}
		switch {
		case r.State == records.StateFinished && r.EndReason == commands.EndTimeUp:
			c.expired++
		case r.State == records.StateFinished:
			c.finished++
		case r.State == records.StateDenied:
			c.denied++
		case r.State == records.StateCancelled:
			c.cancelled++
		}
	}
	for _, a := range audit {
		if a.Action == "preempted" && a.Outcome == "ok" && p.has(a.At) {
			if r, ok := byID[a.Target]; ok && keep(r) {
				c.preempted++
			}
		}
	}
	return c
}

// calibration scores first estimates against first admissions in p.
type calibration struct {
	// inside counts starts within the range give or take a minute (as
	// the card shows minutes), exactly those within it without the slack.
	n, inside, exactly int
	medianError        time.Duration
	medianWidth        time.Duration
}

// calibrate takes the requests whose first admission was in p and whose
// first posted estimate was a known range made before it: how many
// started inside it (a minute's slack at each end), the median distance
// of the start from the range's middle, and the median width of the
// range (a range that is always right because it is huge is not good).
func calibrate(reqs []records.Request, p period, keep func(*records.Request) bool) calibration {
	var errs, widths []time.Duration
	inside, exactly := 0, 0
	for i := range reqs {
		r := &reqs[i]
		e := r.FirstEstimate
		if !keep(r) || e == nil || !e.Known {
			continue
		}
		var first time.Time
		switch {
		case len(r.Waits) > 0:
			first = r.Waits[0].To
		case r.Preemptions == 0:
			first = r.AdmittedAt
		}
		if first.IsZero() || !p.has(first) || e.At.After(first) {
			continue
		}
		if !first.Before(e.Earliest.Add(-time.Minute)) && !first.After(e.Latest.Add(time.Minute)) {
			inside++
		}
		if !first.Before(e.Earliest) && !first.After(e.Latest) {
			exactly++
		}
		mid := e.Earliest.Add(e.Latest.Sub(e.Earliest) / 2)
		errs = append(errs, absDur(first.Sub(mid)))
		widths = append(widths, e.Latest.Sub(e.Earliest))
	}
	if len(errs) == 0 {
		return calibration{}
	}
	slices.Sort(errs)
	slices.Sort(widths)
	return calibration{n: len(errs), inside: inside, exactly: exactly, medianError: rank(errs, 0.5), medianWidth: rank(widths, 0.5)}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// fragStats averages the samples of a period: measure (a) as % of all
// GPUs, and per flavor the smallest and median largest fit.
type fragStats struct {
	samples int
	pctAll  float64
	flavors map[string]fitRange
}

type fitRange struct{ min, median int }

func fragmentation(samples []records.Sample) fragStats {
	st := fragStats{samples: len(samples), flavors: map[string]fitRange{}}
	if len(samples) == 0 {
		return st
	}
	largest := map[string][]int{}
	for _, s := range samples {
		st.pctAll += s.FragPctAll()
		for _, f := range s.Flavors {
			largest[f.Flavor] = append(largest[f.Flavor], f.Largest)
		}
	}
	st.pctAll /= float64(len(samples))
	for f, xs := range largest {
		slices.Sort(xs)
		st.flavors[f] = fitRange{min: xs[0], median: rank(xs, 0.5)}
	}
	return st
}

// boundStats says what the queue waited for over a period's samples: in
// how many samples something waited, and in how many of those each
// reason was the most common one.
type boundStats struct {
	samples, waiting int
	by               map[string]int
}

// reasonOrder breaks ties between reasons, most fundamental first.
var reasonOrder = []string{"quota", "cohort", "capacity", "fragmentation", "topology", "priority"}

func bound(samples []records.Sample) boundStats {
	st := boundStats{samples: len(samples), by: map[string]int{}}
	for _, s := range samples {
		if s.Pending == 0 {
			continue
		}
		st.waiting++
		best, n := "", 0
		for _, r := range reasonOrder {
			if s.Waiting[r] > n {
				best, n = r, s.Waiting[r]
			}
		}
		if best != "" {
			st.by[best]++
		}
	}
	return st
}

// top is the most frequent reason and its share of the waiting samples.
func (b boundStats) top() (string, float64) {
	best, n := "", 0
	for _, r := range reasonOrder {
		if b.by[r] > n {
			best, n = r, b.by[r]
		}
	}
	if b.waiting == 0 {
		return "", 0
	}
	return best, float64(n) / float64(b.waiting)
}
