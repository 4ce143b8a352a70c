package commands

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// EndTimeUp is the EndReason of a request that ran until its requested
// time was up (as opposed to being released, or its Job ending on its own).
const EndTimeUp = "reached its requested time"

// refreshEvery is how often queued requests' estimates are recomputed when
// nothing happens in the cluster.
const refreshEvery = 15 * time.Minute

// Observe turns what happened in the cluster into state changes and
// thread updates, then does the time-driven work: end-of-time reminders,
// Kueue's word, and bringing requests and the cluster into agreement. A
// cluster that moves with the clock (a Stepper: the simulated one) is
// first caught up to now, in the same write section as the records of
// what happened. events are those a real cluster reported. Estimates are
// marked stale when anything changed, or when they are old.
func (s *Service) Observe(ctx context.Context, events []allocator.Event) []Output {
	c := &call{ctx: ctx, now: s.deps.Clock.Now(), who: &Person{Name: "gpubot"}}
	chain(func(c *call) { s.observeStage(c, events) }, s.recovering("observing the cluster", nil))(c)
	return c.unsent()
}

func (s *Service) observeStage(c *call, events []allocator.Event) {
	defer s.enter(c)()
	c.republish = true
	if s.stepper != nil {
		more, err := s.stepper.Advance(c.ctx)
		if err != nil {
			s.log.Error("advancing the simulated cluster", "err", err)
		}
		events = append(events, more...)
	}
	s.refreshChecks(c)
	s.observe(c, events, "")
	s.sweep(c, len(events) > 0)
	s.estimatesDue(c.now)
}

// observe applies events to requests; skip names a request whose card the
// caller is about to post anyway.
func (s *Service) observe(c *call, events []allocator.Event, skip string) {
	if len(events) > 0 {
		c.changed = true
	}
	for _, ev := range events {
		r, err := s.getRequest(c, ev.ID)
		if err != nil {
			s.log.Warn("cluster event for an unknown request", "id", ev.ID, "event", ev.Kind, "err", err)
			continue
		}
		var msg string
		switch ev.Kind {
		case allocator.EventPodsReady, allocator.EventPodsNotReady:
			s.observePods(c, r, ev, skip)
			continue
		case allocator.EventAdmitted:
			if r.State != records.StateQueued {
				continue
			}
			r.State = records.StateRunning
			r.Waits = append(r.Waits, records.Wait{From: r.WaitingSince(), To: ev.At})
			r.AdmittedAt = ev.At
			if ev.Admission != nil {
				r.AdmittedFlavor = ev.Admission.Flavor
				r.Nodes = slices.Clone(ev.Admission.Nodes)
			}
			r.EndWarned = false
			r.PodsReadyAt, r.PodsNotReadySince, r.PodsDetail = time.Time{}, time.Time{}, ""
			queued := r.QueuedAt
			if queued.IsZero() {
				queued = r.SubmittedAt
			}
			after := "after " + fmtDuration(ev.At.Sub(queued))
			if ev.At.Sub(queued) < time.Minute {
				after = "at once"
			}
			msg = fmt.Sprintf("Admitted %s on %s; ends %s unless extended.", after, placement(r), s.clock(ev.At.Add(r.Duration)))
			if r.Estimate != nil && r.Estimate.Known && r.Preemptions == 0 {
				msg += fmt.Sprintf(" (Estimate was %s.)", s.absWindow(r.Estimate))
			}
		case allocator.EventPreempted:
			if r.State != records.StateRunning {
				continue
			}
			s.recordUsageUntil(c, r, ev.At)
			ran := ev.At.Sub(r.AdmittedAt)
			r.State = records.StateQueued
			r.QueuedAt = ev.At
			r.AdmittedAt = time.Time{}
			r.Preemptions++
			r.Estimate = nil
			by := "" // unknown when a missed preemption is reconciled
			if ev.By != "" {
				by = " by " + ev.By
				if b, err := s.getRequest(c, ev.By); err == nil {
					by = fmt.Sprintf(" by %s (%s, %s)", b.ID, b.Requester, b.Priority)
				}
			}
			msg = fmt.Sprintf("Preempted%s and requeued after running %s. A new estimate follows.", by, fmtDuration(ran))
			dm := fmt.Sprintf("Your request %s was preempted%s and is queued again.", r.ID, by)
			if ev.By == "" && (ev.Detail != "" || s.set.Elastic.terms(r.AdmittedFlavor).Capacity == CapacitySpot) {
				msg, dm = s.evicted(&r, ev.Detail, ran)
			}
			c.emit(s.dm(r.Requester, plain(dm)))
		case allocator.EventFinished:
			if r.State != records.StateRunning {
				continue
			}
			s.recordUsageUntil(c, r, ev.At)
			r.State = records.StateFinished
			r.EndedAt = ev.At
			r.EndReason = cmp.Or(ev.Detail, EndTimeUp)
			msg = fmt.Sprintf("Finished: ran %s and %s; %.0f GPU-hours used.", fmtDuration(ev.At.Sub(r.AdmittedAt)), r.EndReason, float64(r.GPUs)*ev.At.Sub(r.AdmittedAt).Hours())
		default:
			continue
		}
		if err := s.putRequest(c, r); err != nil {
			s.log.Error("saving request after cluster event", "request", r.ID, "event", ev.Kind, "err", err)
			continue
		}
		actor := "gpubot"
		if ev.Kind == allocator.EventPreempted && slices.Contains(c.manualVictims, r.ID) {
			actor = c.who.Name // an admin's /gpu preempt, not Kueue's policy
		}
		s.audit(c, actor, string(ev.Kind), r.ID, "ok", msg)
		if r.ID != skip {
			c.emit(thread(r.ID, plain(msg)), s.updateCard(c, r))
		}
		if ev.Kind == allocator.EventPreempted || ev.Kind == allocator.EventFinished {
			s.zombieEnded(c, r, ev.Kind == allocator.EventPreempted, ev.Detail)
		}
	}
}

// observePods reports on a running request's pods: all running (in the
// thread), or not (in the thread and to the requester, who has GPUs
// reserved that do no work). The cluster reports each change once. The
// request's record keeps what was last said, for the zombie sweep.
func (s *Service) observePods(c *call, r records.Request, ev allocator.Event, skip string) {
	if r.State != records.StateRunning || ev.At.Before(r.AdmittedAt) {
		return // about an earlier admission, or one the service missed
	}
	if ev.Kind == allocator.EventPodsReady {
		r.PodsReadyAt, r.PodsNotReadySince, r.PodsDetail = ev.At, time.Time{}, ""
	} else {
		r.PodsNotReadySince, r.PodsDetail = ev.At, ev.Detail
		if r.PodsReadyAt.IsZero() {
			r.PodsNotReadySince = r.AdmittedAt // never ready since the admission
		}
	}
	if err := s.putRequest(c, r); err != nil {
		s.log.Error("saving the pods' readiness", "request", r.ID, "err", err)
	}
	var msg string
	if ev.Kind == allocator.EventPodsReady {
		switch ev.Pods {
		case 0:
			msg = "Its pods are running."
		case 1:
			msg = "Its pod is running."
		default:
			msg = fmt.Sprintf("All %d pods are running.", ev.Pods)
		}
	} else {
		what := "Not all pods are running"
		if ev.Pods == 1 {
			what = "Its pod is not running"
		}
		if ev.Detail != "" {
			what += ": " + ev.Detail
		}
		msg = what + "."
		c.emit(s.dm(r.Requester, plain(fmt.Sprintf("Your request %s holds %d GPUs, but its pods are not all running: %s. Check its Job, or free the GPUs with /gpu release %s.",
			r.ID, r.GPUs, cmp.Or(ev.Detail, "no details"), r.ID))))
	}
	s.audit(c, "gpubot", string(ev.Kind), r.ID, "ok", msg)
	if r.ID != skip {
		c.emit(thread(r.ID, plain(msg)))
	}
}

// sweep does the time-driven work. changed says whether the cluster just
// changed, which makes estimates worth refreshing.
func (s *Service) sweep(c *call, changed bool) {
	inCluster := func(r records.Request) bool {
		return r.State == records.StateQueued || r.State == records.StateRunning
	}
	active, err := s.listRequests(c, inCluster)
	if err != nil {
		s.log.Error("listing requests", "err", err)
		return
	}
	snap, err := s.snapshot(c)
	if err != nil {
		s.log.Error("reading the cluster", "err", err)
		return
	}
	if s.reconcile(c, snap, active) {
		changed = true
		// Remind from the records as reconciling left them.
		if active, err = s.listRequests(c, inCluster); err != nil {
			s.log.Error("listing requests", "err", err)
			return
		}
	}
	for _, r := range active {
		if r.State != records.StateRunning || r.EndWarned {
			continue
		}
		end := r.AdmittedAt.Add(r.Duration)
		if c.now.Before(end.Add(-s.set.EndWarning)) {
			continue
		}
		r.EndWarned = true
		if err := s.putRequest(c, r); err != nil {
			s.log.Error("saving request", "request", r.ID, "err", err)
			continue
		}
		left := end.Sub(c.now)
		buttons := actions(
			Button{Label: "Extend 1h", Action: Action{Name: VerbExtend, Request: r.ID, Arg: "1h"}, Style: "primary"},
			Button{Label: "Extend 4h", Action: Action{Name: VerbExtend, Request: r.ID, Arg: "4h"}},
			Button{Label: "Release", Action: Action{Name: VerbRelease, Request: r.ID}, Style: "danger"},
		)
		text := fmt.Sprintf("%s ends in %s (%s). Extend it or release the GPUs if you are done.", r.ID, fmtDuration(left), s.clock(end))
		c.emit(Output{To: Destination{Kind: ToThread, Request: r.ID}, Reply: plain(text, buttons)},
			s.dm(r.Requester, plain("Your request "+text, buttons)))
	}
	if s.refreshKueue(c) {
		changed = true
	}
	if changed {
		c.changed = true
	}
}

// refreshKueue shows what Kueue now says about queued requests: a request
// Kueue cannot admit as it is (or no longer says so) gets a thread post
// and its requester a direct message; any other change of Kueue's word
// updates the card. It reports whether a request became (un)startable.
func (s *Service) refreshKueue(c *call) bool {
	if s.kueue == nil {
		return false
	}
	queued, err := s.listRequests(c, func(r records.Request) bool { return r.State == records.StateQueued })
	if err != nil || len(queued) == 0 {
		return false
	}
	moved := false
	for _, r := range queued {
		word, said := s.kueueWord(c, r.ID)
		key := kueueKey(word, said)
		if key == r.KueueSaid || (!said && r.KueueSaid != "" && !strings.HasPrefix(r.KueueSaid, "never: ")) {
			// Unchanged, or Kueue is deciding again: keep what was shown.
			continue
		}
		wasNever := strings.HasPrefix(r.KueueSaid, "never: ")
		r.KueueSaid = key
		if err := s.putRequest(c, r); err != nil {
			s.log.Error("saving request", "request", r.ID, "err", err)
			continue
		}
		switch {
		case said && word.Never && !wasNever:
			moved = true
			msg := fmt.Sprintf("%s Kueue's message: %s", willNotStart(word), word.Raw())
			s.audit(c, "gpubot", "kueue", r.ID, "ok", "will not start as it is: "+word.Why)
			c.emit(thread(r.ID, plain(msg)), s.dm(r.Requester, plain(fmt.Sprintf("Your request %s will not start as it is: %s. Change it, or /gpu cancel %s.", r.ID, strings.TrimRight(word.Why, "."), r.ID))))
		case wasNever && !(said && word.Never):
			moved = true
			msg := "Kueue no longer says it cannot start"
			if said {
				msg += ": " + strings.TrimRight(word.Plain, ".")
			}
			s.audit(c, "gpubot", "kueue", r.ID, "ok", msg)
			c.emit(thread(r.ID, plain(msg+". A new estimate follows.")))
			r.Estimate = nil
			if err := s.putRequest(c, r); err != nil {
				s.log.Error("saving request", "request", r.ID, "err", err)
			}
		}
		c.emit(s.updateCard(c, r))
	}
	return moved
}

// reconcile brings requests and the cluster into agreement: a queued
// request the cluster does not have is submitted again; a running one it
// does not have finished if its requested time is up (gpubot missed the
// end: a crash, a restart) and is marked lost otherwise; one whose
// admission or requeueing was missed is brought up to date. A request
// someone is operating on (its lock is held) is left to that operation.
// It reports whether it changed anything.
func (s *Service) reconcile(c *call, snap *allocator.Snapshot, active []records.Request) bool {
	changed := false
	for _, r := range active {
		w, ok := snap.Workload(r.ID)
		if ok {
			delete(s.unshown, r.ID)
		}
		if ok && (r.State == records.StateQueued) == (w.Admission == nil) {
			continue // they agree
		}
		if at, seen := s.unshown[r.ID]; seen && !ok && r.State == records.StateQueued && c.now.Sub(at) < resubmitEvery {
			continue // resubmitted lately: the cluster took it, its snapshot does not show it
		}
		unlock, free := s.tryRequest(c, r.ID)
		if !free {
			continue // an operation on it is under way: the next sweep looks again
		}
		if fresh, err := s.getRequest(c, r.ID); err != nil || fresh.State != r.State || !fresh.AdmittedAt.Equal(r.AdmittedAt) {
			unlock()
			continue // it moved on since it was listed
		}
		if s.reconcileOne(c, r, w, ok) {
			changed = true
			if fresh, err := s.snapshot(c); err == nil {
				snap = fresh // an API call may have let others change the cluster
			}
		}
		unlock()
	}
	return changed
}

// resubmitEvery is how often reconciling resubmits a queued request that
// the cluster takes but does not show (see Service.unshown).
const resubmitEvery = 15 * time.Minute

// reconcileOne brings r into agreement with the cluster, where its
// workload is w (ok: the cluster has it). It holds r's lock.
func (s *Service) reconcileOne(c *call, r records.Request, w allocator.Workload, ok bool) bool {
	changed := false
	{
		switch {
		case ok && r.State == records.StateQueued && w.Admission != nil && s.awaitingChecks(c, r):
			// Quota reserved, admission checks pending: not admitted yet.
		case ok && r.State == records.StateQueued && w.Admission != nil:
			// The cluster admitted it, and the event was missed.
			s.observe(c, []allocator.Event{{Kind: allocator.EventAdmitted, ID: r.ID, At: w.Admission.At, Admission: w.Admission}}, "")
			changed = true
		case ok && r.State == records.StateRunning && w.Admission == nil:
			// The cluster requeued it, and the event was missed.
			s.observe(c, []allocator.Event{{Kind: allocator.EventPreempted, ID: r.ID, At: c.now, Detail: s.requeueDetail(c, r)}}, "")
			changed = true
		case ok:
		case r.State == records.StateQueued:
			events, err := s.apply(c, Op{Kind: OpSubmit, Workload: s.workload(r)})
			if err != nil {
				s.log.Error("resubmitting request", "request", r.ID, "err", err)
				return changed
			}
			s.audit(c, "gpubot", "submit", r.ID, "ok", "resubmitted: the cluster did not have it")
			s.observe(c, events, "")
			changed = true
			if snap, err := s.snapshot(c); err == nil {
				if _, shown := snap.Workload(r.ID); !shown {
					// The cluster took it (a Kubernetes cluster already had
					// its Job) but cannot show it: resubmitting at every
					// sweep would change nothing.
					if s.unshown == nil {
						s.unshown = map[string]time.Time{}
					}
					s.unshown[r.ID] = c.now
					s.log.Warn("the cluster has the request but its snapshot does not show it; it is not resubmitted again for a while", "request", r.ID, "retryAfter", resubmitEvery.String())
				}
			}
		case r.State == records.StateRunning && r.Duration > 0 && !r.AdmittedAt.Add(r.Duration).After(c.now):
			// Gone after its end: it finished while gpubot was not
			// looking (its time was up), not lost.
			s.observe(c, []allocator.Event{{Kind: allocator.EventFinished, ID: r.ID, At: r.AdmittedAt.Add(r.Duration)}}, "")
			changed = true
		case r.State == records.StateRunning:
			r.State = records.StateLost
			r.EndedAt = c.now
			r.EndReason = "its workload disappeared from the cluster"
			if err := s.putRequest(c, r); err != nil {
				s.log.Error("saving request", "request", r.ID, "err", err)
				return changed
			}
			s.audit(c, "gpubot", "lost", r.ID, "ok", r.EndReason)
			c.emit(thread(r.ID, plain("Its workload disappeared from the cluster without finishing; marked lost. Request again if you still need the GPUs.")), s.updateCard(c, r))
			s.zombieEnded(c, r, false, r.EndReason)
			changed = true
		}
	}
	return changed
}

// material reports whether next differs enough from prev to be posted:
// known-ness changed, or the middle moved by more than 15 minutes and by
// more than a quarter of the remaining wait.
func material(prev, next *records.Estimate, now time.Time) bool {
	if prev == nil {
		return true
	}
	if prev.Known != next.Known {
		return true
	}
	if !next.Known {
		return false
	}
	mid := func(e *records.Estimate) time.Time { return e.Earliest.Add(e.Latest.Sub(e.Earliest) / 2) }
	moved := mid(next).Sub(mid(prev))
	if moved < 0 {
		moved = -moved
	}
	wait := mid(prev).Sub(now)
	return moved > 15*time.Minute && float64(moved) > 0.25*float64(wait)
}

func toRecord(now time.Time, e allocator.Estimate) *records.Estimate {
	return &records.Estimate{At: now, Earliest: e.Earliest, Latest: e.Latest, Known: e.Known, Position: e.Position, Reason: string(e.Reason)}
}

// estimateOptions are the estimate options at c.now, learned from the
// service's own records (EstimateOptions).
func (s *Service) estimateOptions(c *call) allocator.EstimateOptions {
	all := s.readRefs(c, func(r *records.Request) bool { return estimateInput(r, c.now) }, true)
	return estimateOptionsOf(all, c.now, s.horizon, s.prio)
}

// Learnable reports whether r teaches how long requests really run: it
// finished, was never preempted, and asked for a duration.
func Learnable(r records.Request) bool { return learnable(&r) }

func learnable(r *records.Request) bool {
	return r.State == records.StateFinished && !r.AdmittedAt.IsZero() && r.EndedAt.After(r.AdmittedAt) && r.Duration > 0 && r.Preemptions == 0
}

// EstimateInput reports whether EstimateOptions at now uses r: it is
// Learnable, queued or running, or was submitted within the last day.
func EstimateInput(r records.Request, now time.Time) bool { return estimateInput(&r, now) }

func estimateInput(r *records.Request, now time.Time) bool {
	return learnable(r) || r.State == records.StateQueued || r.State == records.StateRunning ||
		(!r.SubmittedAt.IsZero() && r.SubmittedAt.After(now.Add(-arrivalWindow)))
}

// EstimateOptions are the estimate options the service uses at now with
// the given horizon, learned from reqs (allocator.LearnRuntimes,
// LearnArrivals): runtime ranges from the Learnable requests (actual
// against requested, per team and template, with priors for teams and
// templates with little history), given to every queued and running
// request in reqs (a running one among the runs at least as long as it
// has run so far) and, per team, to workloads without a request
// (seeded); and, if prio (priority names to values) is not nil, the load
// of the last day's requests per team, priority, flavor asked for and
// size, with how long each has been arriving. With no Learnable
// request, runtimes are DefaultRange's.
func EstimateOptions(reqs []records.Request, now time.Time, horizon time.Duration, prio map[string]int32) allocator.EstimateOptions {
	return estimateOptionsOf(refsTo(reqs), now, horizon, prio)
}

// refsTo points at each of rs.
func refsTo(rs []records.Request) []*records.Request {
	out := make([]*records.Request, len(rs))
	for i := range rs {
		out[i] = &rs[i]
	}
	return out
}

// estimateOptionsOf is EstimateOptions of the requests reqs points at.
func estimateOptionsOf(reqs []*records.Request, now time.Time, horizon time.Duration, prio map[string]int32) allocator.EstimateOptions {
	opts := allocator.EstimateOptions{Horizon: horizon}
	var samples []allocator.RuntimeSample
	teams := map[string]bool{}
	for _, r := range reqs {
		teams[r.Team] = true
		if learnable(r) {
			samples = append(samples, allocator.RuntimeSample{Team: r.Team, Template: r.Template, Requested: r.Duration, Actual: r.EndedAt.Sub(r.AdmittedAt)})
		}
	}
	if len(samples) == 0 {
		return opts
	}
	m := allocator.LearnRuntimes(samples, allocator.LearnOptions{})
	opts.Factors = map[string]allocator.Range{}
	for t := range teams {
		opts.Factors[t] = m.Range(t, "")
	}
	opts.Workloads = map[string]allocator.Range{}
	var arrivals []allocator.ArrivalSample
	for _, r := range reqs {
		switch {
		case r.Duration <= 0:
		case r.State == records.StateQueued:
			opts.Workloads[r.ID] = m.Range(r.Team, r.Template)
		case r.State == records.StateRunning && !r.AdmittedAt.IsZero():
			opts.Workloads[r.ID] = m.RangeAfter(r.Team, r.Template, now.Sub(r.AdmittedAt).Hours()/r.Duration.Hours())
		}
		if p, ok := prio[r.Priority]; ok && !r.SubmittedAt.IsZero() {
			arrivals = append(arrivals, allocator.ArrivalSample{At: r.SubmittedAt, Queue: r.Team, Priority: p, Flavor: r.Flavor, Size: r.GPUs,
				GPUHours: float64(r.GPUs) * r.Duration.Hours() * m.Median(r.Team, r.Template)})
		}
	}
	opts.Arrivals = allocator.LearnArrivals(arrivals, now, arrivalWindow)
	return opts
}

// arrivalWindow is how far back estimates look for the rate of new
// requests.
const arrivalWindow = 24 * time.Hour

// NextWakeup is the next time after now at which the service has
// time-driven work (an end-of-time reminder), or the zero time.
func (s *Service) NextWakeup(ctx context.Context, now time.Time) time.Time {
	running, err := s.listRequests(&call{ctx: ctx}, func(r records.Request) bool {
		return r.State == records.StateRunning && !r.EndWarned
	})
	if err != nil {
		return time.Time{}
	}
	var next time.Time
	for _, r := range running {
		t := r.AdmittedAt.Add(r.Duration - s.set.EndWarning)
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// Seed records work already running on a fresh simulated cluster and
// returns the request IDs it gave the seeds, in order. It does nothing
// (and returns no IDs) if any request exists already.
func (s *Service) Seed(ctx context.Context, seeds []Seed) ([]string, error) {
	c := &call{ctx: ctx, now: s.deps.Clock.Now(), who: &Person{Name: "gpubot"}}
	defer s.enter(c)()
	defer func() { c.outs = nil }() // seeded work has no card to post about
	existing, err := s.listRequests(c, nil)
	if err != nil {
		return nil, fmt.Errorf("listing requests: %w", err)
	}
	if len(existing) > 0 {
		return nil, nil
	}
	now := c.now
	var ids []string
	for _, sd := range seeds {
		who := s.person(sd.Requester)
		r, problem := s.draft(who, sd.Spec, now.Add(-sd.StartedAgo))
		if problem != "" {
			return ids, fmt.Errorf("seed for %s: %s", sd.Requester, problem)
		}
		id, err := s.deps.IDs.NextRequestID(ctx)
		if err != nil {
			return ids, err
		}
		r.ID, r.Origin, r.Channel = id, "seed", s.channelOf(r.Team)
		r.SubmittedAt = r.CreatedAt
		r.State = records.StateQueued
		if err := s.putRequest(c, r); err != nil {
			return ids, err
		}
		w := s.workload(r)
		w.Admission = &allocator.Admission{At: r.CreatedAt}
		events, err := s.apply(c, Op{Kind: OpSubmit, Workload: w})
		if err != nil {
			return ids, fmt.Errorf("seeding %s: %w", id, err)
		}
		s.audit(c, "gpubot", "seed", id, "ok", describe(r))
		s.observe(c, events, "")
		ids = append(ids, id)
	}
	return ids, nil
}
