package commands

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/records"
)

// Zombie sweeps.
//
// A zombie is admitted work that holds GPUs without using them. A sweep
// looks at every running request (gpubot's own, tracked and adopted
// ones) and, with ZombiePolicy.All, at every other admitted workload in
// the teams' namespaces, for three kinds of waste, in this order:
//
//	pods-not-ready  its pods have not all been ready for PodsReadyTimeout
//	                (as the cluster last reported them)
//	past-end        it runs more than pastEndSlack past its requested end
//	idle            its busiest GPU stayed below IdleThreshold for the whole
//	                IdleWindow (with a Utilization source; only once its pods
//	                have been ready for the window)
//
// and keeps at most one open zombie per workload. Then the timeline:
//
//	found          the owner is asked by direct message and in the request's
//	               thread, with Still using it / Release; work without a
//	               known owner goes straight to the leads
//	+LeadsGrace    no answer: the team's leads are told (the admins, when the
//	               owner is the only lead), with Release / Still using it
//	+ReleaseGrace  no answer, Release policy, a request with an owner, and
//	               not left to Kueue: gpubot releases it
//
// A zombie ends when someone presses Still using it (kept; the same kind
// of waste is not asked about again for KeepFor), when the waste stops
// (recovered), when it is released (by its owner, by a lead or admin, or
// by gpubot), or when the cluster ends it (evicted: Kueue's maximum
// execution time or a preemption; finished: its Job ended on its own).
// Work past its end whose workload has a maximum execution time is left
// to Kueue: gpubot tells people but never releases it itself. Every step
// is audited.

// pastEndSlack is how long past its requested end work may run before it
// counts: Kueue's maximum execution time normally stops it within seconds.
const pastEndSlack = 5 * time.Minute

// minCoverage is the share of the idle window that must have utilization
// samples for the work to be judged idle (or busy again).
const minCoverage = 0.9

// subject is admitted work a sweep looks at.
type subject struct {
	key    string           // request ID, or the other workload's namespace/name
	utilID string           // its ID for Utilization
	req    *records.Request // nil for work gpubot does not follow
	other  *Other
	team   string
	owner  string // person name; "" when nobody is known
	flavor string
	gpus   int
	// end is the requested end (zero: none known); enforced says the
	// cluster stops the work then by itself (Kueue's maximum execution
	// time).
	end      time.Time
	enforced bool
	// podsSince is set while its pods are not all ready; idleFrom is the
	// earliest start of an idle window (its pods ready, or its admission).
	podsSince  time.Time
	podsDetail string
	idleFrom   time.Time
}

// name is how people see the subject: "r5" or "nlp/llama-eval".
func (sub subject) name() string {
	if sub.req != nil {
		return sub.req.ID
	}
	return sub.key
}

// finding is one kind of waste found on a subject.
type finding struct {
	kind   records.ZombieKind
	since  time.Time
	detail string // what is wrong, as a clause: "its GPUs have been idle …"
}

// still is what a sweep finds about an open zombie's waste.
type still int

const (
	stillWasting still = iota
	stillUnknown       // cannot tell (no utilization samples): neither recover nor escalate
	stillCleared
)

// Sweep looks for zombies at now and moves the open ones along their
// timeline. It is the body of the zombie sweep (zombies.schedule); the
// outputs are for the bot runtime to deliver. Without WithZombies it does
// nothing.
func (s *Service) Sweep(ctx context.Context, now time.Time) []Output {
	if s.zombies == nil {
		return nil
	}
	s.zmu.Lock()
	defer s.zmu.Unlock()
	c := &call{ctx: ctx, now: now, who: &Person{Name: "gpubot"}}
	chain(s.sweepZombies, s.recovering("sweeping for zombies", nil))(c)
	// A sweep has no sender to answer.
	return slices.DeleteFunc(slices.Clone(c.unsent()), func(o Output) bool { return o.To.Kind == ToSender })
}

// sweepZombies measures GPU use outside the write section (a Prometheus
// query), then decides in it, on the requests as they are then.
func (s *Service) sweepZombies(c *call) {
	pol := s.set.Zombies
	subjects, _, ok := s.subjects(c)
	if !ok {
		return
	}
	util, utilOK := s.measure(c, subjects)
	defer s.enter(c)()
	subjects, othersOK, ok := s.subjects(c)
	if !ok {
		return
	}
	recent, err := s.listZombies(c, c.now.Add(-pol.KeepFor), c.now.Add(time.Nanosecond))
	if err != nil {
		s.log.Error("listing zombies", "err", err)
		return
	}
	open := map[string]records.Zombie{}
	for _, z := range recent {
		if z.Outcome == records.ZombieOpen {
			open[zombieKey(z)] = z
		}
	}
	// Open zombies first: ended, recovered, or a step further.
	for _, key := range sortedKeys(open) {
		z := open[key]
		sub, alive := subjects[key]
		switch {
		case !alive && z.Request == "" && !othersOK:
			continue // cannot see other work this time
		case !alive:
			s.zombieGone(c, z)
			delete(open, key)
			continue
		}
		switch s.stillWasting(c, z, sub, util, utilOK) {
		case stillCleared:
			s.resolveZombie(c, z, records.ZombieRecovered, "gpubot", s.recoveredText(z, sub, util[key]))
			delete(open, key)
		case stillWasting:
			s.escalate(c, z, sub)
		}
	}
	// Then new findings.
	for _, key := range sortedKeys(subjects) {
		if _, ok := open[key]; ok {
			continue
		}
		sub := subjects[key]
		f, ok := s.find(c, sub, util)
		if !ok || kept(recent, key, f.kind) {
			continue
		}
		s.zombieFound(c, sub, f)
	}
}

// zombieKey is the key of the work a zombie is about.
func zombieKey(z records.Zombie) string { return cmp.Or(z.Request, z.Workload) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareIDs)
	return keys
}

// kept reports whether someone said "Still using it" about key's waste of
// this kind within the keep period (recent holds the zombies of that
// period).
func kept(recent []records.Zombie, key string, kind records.ZombieKind) bool {
	return slices.ContainsFunc(recent, func(z records.Zombie) bool {
		return z.Outcome == records.ZombieKept && z.Kind == kind && zombieKey(z) == key
	})
}

// subjects collects the admitted work to look at, by key. othersOK is
// false when work gpubot does not follow should have been looked at but
// could not be listed; ok is false when nothing can be looked at.
func (s *Service) subjects(c *call) (out map[string]subject, othersOK, ok bool) {
	running, err := s.listRequests(c, func(r records.Request) bool { return r.State == records.StateRunning })
	if err != nil {
		s.log.Error("listing running requests for the zombie sweep", "err", err)
		return nil, false, false
	}
	snap, err := s.snapshot(c)
	if err != nil {
		s.log.Error("reading the cluster for the zombie sweep", "err", err)
		return nil, false, false
	}
	out = map[string]subject{}
	for i := range running {
		r := &running[i]
		sub := subject{key: r.ID, utilID: r.ID, req: r, team: r.Team, flavor: r.AdmittedFlavor, gpus: r.GPUs, idleFrom: r.AdmittedAt}
		if _, known := s.people[strings.ToLower(r.Requester)]; known {
			sub.owner = s.person(r.Requester).Name
		}
		if r.Duration > 0 {
			sub.end = r.AdmittedAt.Add(r.Duration)
		}
		if w, ok := snap.Workload(r.ID); ok && w.Admission != nil && w.Duration > 0 {
			sub.enforced = true
		}
		if !r.PodsNotReadySince.IsZero() && !r.PodsNotReadySince.Before(r.AdmittedAt) {
			sub.podsSince, sub.podsDetail = r.PodsNotReadySince, r.PodsDetail
		}
		if r.PodsReadyAt.After(r.AdmittedAt) {
			sub.idleFrom = r.PodsReadyAt
		}
		out[sub.key] = sub
	}
	if !s.set.Zombies.All || s.others == nil {
		return out, true, true
	}
	others, err := s.others.Others(c.ctx)
	if err != nil {
		s.log.Warn("listing the work gpubot does not follow, for the zombie sweep", "err", err)
		return out, false, true
	}
	for i := range others {
		o := &others[i]
		if _, ours := s.teams[o.Team]; !ours || o.Workload == "" {
			continue
		}
		sub := subject{key: o.Workload, utilID: o.ID, other: o, team: o.Team, flavor: o.Flavor, gpus: o.GPUs,
			podsSince: o.PodsNotReadySince, podsDetail: o.PodsDetail, idleFrom: o.AdmittedAt}
		if _, known := s.people[strings.ToLower(o.Owner)]; known && o.Owner != "" {
			sub.owner = s.person(o.Owner).Name
		}
		if o.Duration > 0 {
			sub.end, sub.enforced = o.AdmittedAt.Add(o.Duration), true
		}
		out[sub.key] = sub
	}
	return out, true, true
}

// measure asks the utilization source about the work that could be idle:
// its pods ready (or not reported) for the whole window. ok is false when
// there is no source or it failed: idle work can then be neither found
// nor cleared.
func (s *Service) measure(c *call, subjects map[string]subject) (map[string]Utilized, bool) {
	if s.util == nil {
		return nil, false
	}
	window := s.set.Zombies.IdleWindow
	var ids []string
	byID := map[string]string{}
	for _, key := range sortedKeys(subjects) {
		sub := subjects[key]
		if sub.podsSince.IsZero() && !sub.idleFrom.After(c.now.Add(-window)) {
			ids = append(ids, sub.utilID)
			byID[sub.utilID] = key
		}
	}
	if len(ids) == 0 {
		return map[string]Utilized{}, true
	}
	got, err := s.util.GPUUtilization(c.ctx, ids, window, c.now)
	if err != nil {
		s.log.Warn("measuring GPU utilization for the zombie sweep; idle GPUs are not judged this time", "err", err, "workloads", len(ids))
		return nil, false
	}
	out := map[string]Utilized{}
	for id, u := range got {
		if key, ok := byID[id]; ok {
			out[key] = u
		}
	}
	return out, true
}

// find returns the first kind of waste sub shows, if any.
func (s *Service) find(c *call, sub subject, util map[string]Utilized) (finding, bool) {
	pol := s.set.Zombies
	if !sub.podsSince.IsZero() && c.now.Sub(sub.podsSince) >= pol.PodsReadyTimeout {
		return finding{kind: records.ZombiePodsNotReady, since: sub.podsSince, detail: s.podsText(c, sub)}, true
	}
	if !sub.end.IsZero() && c.now.Sub(sub.end) > pastEndSlack {
		return finding{kind: records.ZombiePastEnd, since: sub.end, detail: s.pastEndText(c, sub)}, true
	}
	if u, ok := util[sub.key]; ok && u.Coverage >= minCoverage && u.Peak < pol.IdleThreshold {
		since := c.now.Add(-pol.IdleWindow)
		return finding{kind: records.ZombieIdle, since: since, detail: s.idleText(u, since)}, true
	}
	return finding{}, false
}

// stillWasting checks whether an open zombie's waste goes on.
func (s *Service) stillWasting(c *call, z records.Zombie, sub subject, util map[string]Utilized, utilOK bool) still {
	switch z.Kind {
	case records.ZombiePodsNotReady:
		if sub.podsSince.IsZero() {
			return stillCleared
		}
	case records.ZombiePastEnd:
		if sub.end.IsZero() || c.now.Sub(sub.end) <= pastEndSlack {
			return stillCleared
		}
	case records.ZombieIdle:
		u, ok := util[sub.key]
		if !utilOK || !ok || u.Coverage < minCoverage {
			return stillUnknown
		}
		if u.Peak >= s.set.Zombies.IdleThreshold {
			return stillCleared
		}
	}
	return stillWasting
}

func (s *Service) podsText(c *call, sub subject) string {
	t := fmt.Sprintf("its pods have not all been running since %s", s.clock(sub.podsSince))
	if sub.podsDetail != "" {
		t += " (" + sub.podsDetail + ")"
	}
	return t
}

func (s *Service) pastEndText(c *call, sub subject) string {
	t := fmt.Sprintf("it has run past its requested end (%s)", s.clock(sub.end))
	if sub.enforced {
		t += "; Kueue's maximum execution time should stop it"
	}
	return t
}

func (s *Service) idleText(u Utilized, since time.Time) string {
	return fmt.Sprintf("its GPUs have been idle since %s: the busiest was at %s (below %s; %s)",
		s.clock(since), percent(u.Peak), percent(s.set.Zombies.IdleThreshold), cmp.Or(u.Source, "GPU metrics"))
}

func (s *Service) recoveredText(z records.Zombie, sub subject, u Utilized) string {
	switch z.Kind {
	case records.ZombiePodsNotReady:
		return fmt.Sprintf("Its pods are all running now; zombie check %s closed.", z.ID)
	case records.ZombiePastEnd:
		if sub.end.IsZero() {
			return fmt.Sprintf("It has no end any more; zombie check %s closed.", z.ID)
		}
		return fmt.Sprintf("Its end is now %s; zombie check %s closed.", s.clock(sub.end), z.ID)
	}
	return fmt.Sprintf("Its GPUs are in use again (the busiest at %s in the last %s); zombie check %s closed.", percent(u.Peak), fmtDuration(s.set.Zombies.IdleWindow), z.ID)
}

// percent shows a utilization: "0%", "3%", "0.4%".
func percent(p float64) string {
	if p > 0 && p < 1 {
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", p)
}
