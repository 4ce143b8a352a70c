package simulate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// Elastic capacity in the replay: a change "16xh100:spot" (or
// ":provisioned") adds an elastic pool of that many GPUs of the flavor's
// usual node, a flavor of its own (h100-spot) that only switched jobs
// use. A job that has waited Setup.OfferAfter (default 1 h) on reserved
// capacity, and would start at once on the pool, is switched there, as a
// requester who takes the bot's offer; on a provisioned pool it starts
// ProvisioningTime later (default 20 min: its nodes are provisioned). The
// run reports how many jobs switched, their GPU-hours on the pool and, at
// Setup.ElasticPrice a GPU-hour, what they cost.
//
// Caveats: spot nodes are never reclaimed in the replay; a provisioned
// job's hold is released at the replay's next step (an arrival or a
// sample), not at the exact minute; switching is checked at those steps
// too.

// Capacity kinds of a change.
const (
	CapacitySpot        = "spot"
	CapacityProvisioned = "provisioned"
)

// ElasticRun is what the elastic pool did in one run.
type ElasticRun struct {
	Flavor   string  `json:"flavor"`
	Capacity string  `json:"capacity"`
	Switched int     `json:"switchedJobs"`
	GPUHours float64 `json:"gpuHours"`
	// Cost is GPUHours × Setup.ElasticPrice (0 without a price).
	Cost     float64 `json:"cost"`
	Price    float64 `json:"pricePerGPUHour"`
	Currency string  `json:"currency,omitempty"`
}

// DefaultOfferAfter is how long a job waits before it is switched.
const DefaultOfferAfter = time.Hour

// DefaultProvisioningTime is how long a provisioned pool takes.
const DefaultProvisioningTime = 20 * time.Minute

// elasticName is the flavor an elastic change adds.
func elasticName(c Change) string { return c.Flavor + "-" + c.Capacity }

// elasticSim is a run's elastic pool.
type elasticSim struct {
	flavor, capacity    string
	base                string // the flavor the pool adds to
	offerAfter, provide time.Duration
	price               float64
	held                []heldJob
	on                  map[int]time.Time // job index → when it started on the pool (running)
	out                 ElasticRun
}

type heldJob struct {
	idx   int
	ready time.Time
}

// elasticOf finds the elastic change among changes, if any.
func elasticOf(changes []Change) (Change, bool) {
	i := slices.IndexFunc(changes, func(c Change) bool { return c.Capacity != "" })
	if i < 0 {
		return Change{}, false
	}
	return changes[i], true
}

func newElasticSim(s *Setup, c Change) *elasticSim {
	es := &elasticSim{flavor: elasticName(c), capacity: c.Capacity, offerAfter: s.OfferAfter, provide: s.ProvisioningTime,
		price: s.ElasticPrice, on: map[int]time.Time{}}
	if es.offerAfter <= 0 {
		es.offerAfter = DefaultOfferAfter
	}
	if es.provide <= 0 {
		es.provide = DefaultProvisioningTime
	}
	es.out = ElasticRun{Flavor: es.flavor, Capacity: c.Capacity, Price: es.price, Currency: s.Currency}
	return es
}

// switchWaiting moves jobs that waited long enough and fit the pool now
// onto it (held first if it is provisioned), and releases held jobs
// whose nodes are ready. It returns the events of the cycle it runs.
func (e *engine) switchWaiting(drv *allocator.Runner) ([]allocator.Event, error) {
	es := e.elastic
	if es == nil {
		return nil, nil
	}
	now := e.snap.Now()
	changed := false
	for i := 0; i < len(es.held); {
		h := es.held[i]
		if h.ready.After(now) {
			i++
			continue
		}
		es.held = slices.Delete(es.held, i, i+1)
		if err := drv.Add(e.elasticWorkload(h.idx)); err != nil {
			return nil, err
		}
		changed = true
	}
	for _, i := range slices.Clone(e.pending) {
		s := &e.st[i]
		j := e.p.jobs[i]
		if s.switched || s.started || now.Sub(j.submit) < es.offerAfter || (j.Flavor != "" && j.Flavor != es.base) {
			continue
		}
		w := e.elasticWorkload(i)
		w.ID = j.ID + "~probe"
		if _, why := e.snap.Fit(w); why != allocator.ReasonNone {
			continue
		}
		if err := drv.Release(j.ID); err != nil {
			return nil, err
		}
		s.switched = true
		es.out.Switched++
		changed = true
		if es.capacity == CapacityProvisioned {
			es.held = append(es.held, heldJob{idx: i, ready: now.Add(es.provide)})
			continue
		}
		if err := drv.Add(e.elasticWorkload(i)); err != nil {
			return nil, err
		}
	}
	if !changed {
		return nil, nil
	}
	return drv.Schedule(), nil
}

// elasticWorkload is job i pinned to the pool.
func (e *engine) elasticWorkload(i int) allocator.Workload {
	return e.workload(i, e.elastic.flavor)
}

// noteElastic accounts the pool's GPU-hours from a job's events.
func (e *engine) noteElastic(ev allocator.Event, idx, gpus int) {
	es := e.elastic
	if es == nil {
		return
	}
	switch ev.Kind {
	case allocator.EventAdmitted:
		if ev.Admission != nil && ev.Admission.Flavor == es.flavor {
			es.on[idx] = ev.At
		}
	case allocator.EventPreempted, allocator.EventFinished:
		if at, ok := es.on[idx]; ok {
			es.out.GPUHours += float64(gpus) * ev.At.Sub(at).Hours()
			delete(es.on, idx)
		}
	}
}

func (e *engine) finishElastic() {
	if es := e.elastic; es != nil {
		es.out.Cost = es.out.GPUHours * es.price
		out := es.out
		e.run.Elastic = &out
	}
}

// elasticLine says what the pool did in run r.
func elasticLine(r *Run) string {
	x := r.Elastic
	if x == nil {
		return ""
	}
	s := fmt.Sprintf("%s: %s switched to %s (%s) after waiting; %.0f GPU-hours there", r.Name, plural(x.Switched, "job"), x.Flavor, x.Capacity, x.GPUHours)
	if x.Price > 0 {
		s += fmt.Sprintf(" ≈ %s%s at %s%.2f a GPU-hour", x.Currency, money(x.Cost), x.Currency, x.Price)
	}
	return s
}

func money(v float64) string {
	n := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, d := range n {
		if i > 0 && (len(n)-i)%3 == 0 && n[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}

// stepElastic switches waiting jobs and releases held ones, then takes in
// the cycle's events.
func (e *engine) stepElastic(drv *allocator.Runner) error {
	evs, err := e.switchWaiting(drv)
	if err != nil {
		return err
	}
	return e.step(evs)
}
