package simcluster

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// The provisioning lifecycle and spot reclaims, on the clock (see the
// notes in elastic.go).

// dueElastic is the next elastic happening after s.Now() and at or before
// to: a provisioning attempt that ends, held work whose back-off is over,
// or a spot workload to reclaim.
func (c *Cluster) dueElastic(s *allocator.Snapshot, e *elasticState, to time.Time) (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if t.IsZero() || t.After(to) {
			return
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, h := range e.Held {
		consider(h.Until)
	}
	for id, ch := range e.Checks {
		if w, ok := s.Workload(id); ok && ch.State == commands.CheckPending && c.reserving(e, w) {
			consider(ch.Due)
		}
	}
	for name, f := range c.elastic {
		if f.ReclaimAfter <= 0 {
			continue // never reclaimed: no need to look at its work
		}
		for _, w := range s.AdmittedOn(name) {
			if t, ok := c.reclaimAt(w); ok {
				consider(t)
			}
		}
	}
	if next.Before(s.Now()) && !next.IsZero() {
		next = s.Now()
	}
	return next, !next.IsZero()
}

// advance moves s to now: provisioning attempts end, held work is queued
// again, spot nodes are reclaimed, in time order with the admissions and
// ends Advance makes.
func (c *Cluster) advance(s *tracked, e *elasticState, now time.Time) []allocator.Event {
	var events []allocator.Event
	for {
		at, ok := c.dueElastic(s.Snapshot, e, now)
		if !ok {
			break
		}
		events = append(events, c.reserve(e, s.Advance(at, c.endOf(e)))...)
		events = append(events, c.endAttempts(s, e, at)...)
		for i := 0; i < len(e.Held); {
			h := e.Held[i]
			if h.Until.IsZero() || h.Until.After(at) {
				i++
				continue
			}
			e.Held = slices.Delete(e.Held, i, i+1)
			_, _ = s.Add(h.Workload) // back in the queue: its next attempt starts when it gets quota
		}
		for _, w := range s.Workloads() {
			if t, ok := c.reclaimAt(w); ok && !t.After(at) {
				nodes := w.Admission.Nodes
				if _, err := s.Evict(w.ID); err == nil {
					events = append(events, allocator.Event{Kind: allocator.EventPreempted, ID: w.ID, At: at,
						Detail: fmt.Sprintf("spot node %s reclaimed (simulated)", firstOr(nodes, w.Admission.Flavor))})
				}
			}
		}
		events = append(events, c.reserve(e, s.Schedule())...)
	}
	return append(events, c.reserve(e, s.Advance(now, c.endOf(e)))...)
}

// reserve takes the admissions onto provisioned flavors out of evs: they
// reserve quota and start a provisioning attempt, reported when it
// succeeds. A reservation preempted before that was never an admission
// either.
func (c *Cluster) reserve(e *elasticState, evs []allocator.Event) []allocator.Event {
	out := evs[:0:0]
	for _, ev := range evs {
		switch ev.Kind {
		case allocator.EventAdmitted:
			f, ok := c.elastic[admissionFlavor(ev)]
			ch := e.Checks[ev.ID]
			if !ok || f.Check == "" || (ch.State == commands.CheckReady && ch.Since.Equal(ev.At)) {
				break
			}
			ch.Attempt++
			ch.State, ch.Since, ch.Due, ch.Message = commands.CheckPending, ev.At, ev.At.Add(f.Provisioning), ""
			ch.Fails = f.fails(ev.ID, ch.Attempt)
			e.Checks[ev.ID] = ch
			continue
		case allocator.EventPreempted, allocator.EventFinished:
			if ch, ok := e.Checks[ev.ID]; ok && ch.State == commands.CheckPending {
				// Its quota went before its nodes came: it waits for quota
				// again, and this attempt does not count.
				ch.State, ch.Attempt = "", ch.Attempt-1
				if ch.Attempt == 0 {
					delete(e.Checks, ev.ID)
				} else {
					e.Checks[ev.ID] = ch
				}
				continue
			}
		}
		out = append(out, ev)
	}
	return out
}

func admissionFlavor(ev allocator.Event) string {
	if ev.Admission == nil {
		return ""
	}
	return ev.Admission.Flavor
}

// endAttempts ends the provisioning attempts due at or before at: the
// work is admitted onto its nodes, as of the attempt's end, or it gives
// its quota back and is held for Kueue's back-off (or for good once the
// retries are spent).
func (c *Cluster) endAttempts(s *tracked, e *elasticState, at time.Time) []allocator.Event {
	var ids []string
	for id, ch := range e.Checks {
		if ch.State == commands.CheckPending && !ch.Due.After(at) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []allocator.Event
	for _, id := range ids {
		w, ok := s.Workload(id)
		if !ok || !c.reserving(e, w) {
			continue
		}
		f, _ := c.checkOf(w)
		ch := e.Checks[id]
		due := ch.Due
		if !ch.Fails {
			a := *w.Admission
			a.At = due
			if _, err := s.Evict(id); err != nil {
				continue
			}
			ch.State, ch.Since, ch.Message = commands.CheckReady, due, "simulated provisioning done"
			e.Checks[id] = ch
			if _, err := s.Reserve(id, a); err != nil {
				// Cannot happen: the reservation held the quota and nodes.
				ch.State = ""
				e.Checks[id] = ch
				continue
			}
			out = append(out, allocator.Event{Kind: allocator.EventAdmitted, ID: id, At: due, Admission: &a})
			continue
		}
		msg := fmt.Sprintf("no capacity for %d nodes of %s in the zone (simulated)", len(w.Admission.Nodes), w.Admission.Flavor)
		if _, err := s.Release(id); err != nil {
			continue
		}
		w.Admission = nil
		ch.Failed = append(ch.Failed, commands.CheckFailure{Attempt: ch.Attempt, Message: msg})
		ch.Since, ch.Due, ch.Fails = due, time.Time{}, false
		h := held{Workload: w}
		if r := f.retry(); ch.Attempt <= r.Limit {
			ch.State, ch.Message = commands.CheckRetry, "Retrying after failure: "+msg
			h.Until = due.Add(r.After(ch.Attempt))
		} else {
			ch.State, ch.Message = commands.CheckRejected, msg
		}
		e.Checks[id] = ch
		e.Held = append(e.Held, h)
	}
	return out
}

func firstOr(xs []string, def string) string {
	if len(xs) > 0 {
		return xs[0]
	}
	return def
}
