package commands

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpubot/gpubot/records"
)

// target reads the request an action is about, answering if it cannot.
func (s *Service) target(c *call, a Action) (records.Request, bool) {
	r, err := s.getRequest(c, a.Request)
	switch {
	case errors.Is(err, ErrNotFound):
		s.audit(c, c.who.Name, string(a.Name), a.Request, "invalid", "no such request")
		c.private(plain(fmt.Sprintf("There is no request %s. /gpu status lists yours.", a.Request)))
		return r, false
	case err != nil:
		s.audit(c, c.who.Name, string(a.Name), a.Request, "error", err.Error())
		s.failed(c, "reading "+a.Request, err)
		return r, false
	}
	return r, true
}

// act carries out an action on request r, typed or pressed, once the
// middleware has authorized it (see middleware.go).
func (s *Service) act(c *call, a Action, r records.Request) {
	verb := string(a.Name)
	switch a.Name {
	case VerbApprove:
		if s.decideSwitch(c, r, true, "") {
			return
		}
		s.approve(c, r)
	case VerbSwitch:
		s.switchTo(c, r, a.Arg)
	case VerbDeny:
		if n := utf8.RuneCountInString(a.Arg); n > MaxReason {
			s.audit(c, c.who.Name, verb, r.ID, "invalid", fmt.Sprintf("reason of %d characters", n))
			c.private(plain(fmt.Sprintf("The reason is %d characters long; keep it to %d. Nothing was changed.", n, MaxReason)))
			return
		}
		if s.decideSwitch(c, r, false, a.Arg) {
			return
		}
		s.deny(c, r, a.Arg)
	case VerbCancel, VerbRelease:
		s.stop(c, r, a.Name)
	case VerbExtend:
		d, err := ParseDuration(a.Arg)
		if err != nil {
			s.audit(c, c.who.Name, verb, r.ID, "invalid", err.Error())
			c.private(plain(fmt.Sprintf("Cannot extend %s: %s. Example: /gpu extend %s 2h", r.ID, err, r.ID)))
			return
		}
		s.extend(c, r, d)
	case VerbPreempt:
		s.preempt(c, r)
	}
}

// stale explains why an action no longer applies to r in its state, or "".
func (s *Service) stale(v Verb, r records.Request) string {
	if r.State.Final() {
		return fmt.Sprintf("%s is already %s%s.", r.ID, r.State, s.when(r.EndedAt))
	}
	switch v {
	case VerbApprove, VerbDeny:
		if r.State == records.StateQueued && r.Elastic != nil && r.Elastic.PendingSwitch != "" {
			return "" // a switch to elastic capacity waits for a lead
		}
		if r.State != records.StateAwaitingApproval {
			if r.ApprovedBy != "" {
				return fmt.Sprintf("%s was already approved by %s; it is %s.", r.ID, r.ApprovedBy, r.State)
			}
			return fmt.Sprintf("%s does not need approval; it is %s.", r.ID, r.State)
		}
	case VerbPreempt:
		switch r.State {
		case records.StateAwaitingApproval:
			return fmt.Sprintf("%s is waiting for approval; approve it first.", r.ID)
		case records.StateRunning:
			return fmt.Sprintf("%s is already running.", r.ID)
		}
	}
	return ""
}

func (s *Service) when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " (" + s.clock(t) + ")"
}

func (s *Service) approve(c *call, r records.Request) {
	r.ApprovedBy = c.who.Name
	s.audit(c, c.who.Name, "approve", r.ID, "ok", s.role(c.who, r.Team))
	c.emit(thread(r.ID, plain(fmt.Sprintf("Approved by %s.", c.who.Name))))
	if c.who.Name != r.Requester {
		c.emit(s.dm(r.Requester, plain(fmt.Sprintf("%s approved your request %s (%s).", c.who.Name, r.ID, describe(r)))))
	}
	s.submit(c, r)
	// submit posts a card; for an existing request it is an update.
	for i := range c.outs {
		if c.outs[i].To.Kind == ToChannel && c.outs[i].To.Request == r.ID {
			c.outs[i].To = Destination{Kind: UpdateCard, Request: r.ID}
		}
	}
	c.private(plain(fmt.Sprintf("Approved %s.", r.ID)))
}

func (s *Service) deny(c *call, r records.Request, reason string) {
	r.State = records.StateDenied
	r.DeniedBy = c.who.Name
	r.DenyReason = reason
	r.EndedAt = c.now
	r.EndReason = "denied by " + c.who.Name
	if err := s.putRequest(c, r); err != nil {
		s.failed(c, "saving "+r.ID, err)
		return
	}
	s.audit(c, c.who.Name, "deny", r.ID, "ok", reason)
	msg := fmt.Sprintf("Denied by %s.", c.who.Name)
	if reason != "" {
		msg = fmt.Sprintf("Denied by %s: %s", c.who.Name, reason)
	}
	c.emit(thread(r.ID, plain(msg)), s.updateCard(c, r))
	if c.who.Name != r.Requester {
		c.emit(s.dm(r.Requester, plain(fmt.Sprintf("Your request %s (%s) was denied by %s%s.", r.ID, describe(r), c.who.Name, suffix(": ", reason)))))
	}
	c.private(plain(fmt.Sprintf("Denied %s.", r.ID)))
}

// stop cancels a request that has not started or releases a running one.
func (s *Service) stop(c *call, r records.Request, verb Verb) {
	inCluster := r.State == records.StateQueued || r.State == records.StateRunning
	if inCluster {
		events, err := s.apply(c, Op{Kind: OpRemove, ID: r.ID})
		if err != nil {
			s.audit(c, c.who.Name, string(verb), r.ID, "error", err.Error())
			s.failed(c, "stopping "+r.ID, err)
			return
		}
		defer s.observe(c, events, "")
		var ok bool
		if r, ok = s.reread(c, r); !ok {
			return
		}
	}
	running := r.State == records.StateRunning
	r.EndedAt = c.now
	var msg, note string
	if running {
		r.State = records.StateFinished
		r.EndReason = "released by " + c.who.Name
		s.recordUsage(c, r)
		msg = fmt.Sprintf("Released by %s after %s; its %d GPUs are free again.", c.who.Name, fmtDuration(c.now.Sub(r.AdmittedAt)), r.GPUs)
		if verb == VerbCancel {
			note = " It was running, so it was released."
		}
	} else {
		r.State = records.StateCancelled
		r.EndReason = "cancelled by " + c.who.Name
		msg = fmt.Sprintf("Cancelled by %s before it started.", c.who.Name)
		if verb == VerbRelease {
			note = " It had not started, so it was cancelled."
		}
	}
	if err := s.putRequest(c, r); err != nil {
		s.failed(c, "saving "+r.ID, err)
		return
	}
	s.audit(c, c.who.Name, string(verb), r.ID, "ok", r.EndReason)
	if inCluster {
		s.zombieReleased(c, r)
	}
	c.emit(thread(r.ID, plain(msg)), s.updateCard(c, r))
	c.private(plain(fmt.Sprintf("%s: %s%s", r.ID, lowerFirst(msg), note)))
}

func (s *Service) extend(c *call, r records.Request, d time.Duration) {
	total := r.Duration + d
	if s.set.MaxDuration > 0 && total > s.set.MaxDuration {
		s.audit(c, c.who.Name, "extend", r.ID, "refused", "beyond max duration")
		c.private(plain(fmt.Sprintf("%s would then run %s, longer than the %s allowed. Nothing was changed.", r.ID, fmtDuration(total), fmtDuration(s.set.MaxDuration))))
		return
	}
	if r.State == records.StateQueued || r.State == records.StateRunning {
		events, err := s.apply(c, Op{Kind: OpExtend, ID: r.ID, Duration: total})
		if refusal := (*Refusal)(nil); errors.As(err, &refusal) {
			s.audit(c, c.who.Name, "extend", r.ID, "refused", refusal.Reason)
			c.private(plain(fmt.Sprintf("%s cannot be extended: %s. Nothing was changed.", r.ID, refusal.Reason)))
			return
		}
		if err != nil {
			if _, ok := s.reread(c, r); !ok {
				return // it ended while the cluster was asked
			}
			s.audit(c, c.who.Name, "extend", r.ID, "error", err.Error())
			s.failed(c, "extending "+r.ID, err)
			return
		}
		defer s.observe(c, events, "")
		var ok bool
		if r, ok = s.reread(c, r); !ok {
			return
		}
	}
	r.Duration = total
	r.EndWarned = false
	if err := s.putRequest(c, r); err != nil {
		s.failed(c, "saving "+r.ID, err)
		return
	}
	s.audit(c, c.who.Name, "extend", r.ID, "ok", "by "+fmtDuration(d)+" to "+fmtDuration(total))
	msg := fmt.Sprintf("Extended by %s by %s; now %s in all.", fmtDuration(d), c.who.Name, fmtDuration(total))
	if r.State == records.StateRunning {
		msg = fmt.Sprintf("Extended by %s by %s; now ends %s.", fmtDuration(d), c.who.Name, s.clock(r.AdmittedAt.Add(total)))
	}
	c.emit(thread(r.ID, plain(msg)), s.updateCard(c, r))
	c.private(plain(fmt.Sprintf("%s: %s", r.ID, lowerFirst(msg))))
}

func (s *Service) preempt(c *call, r records.Request) {
	snap, err := s.snapshot(c)
	if err != nil {
		s.failed(c, "reading the cluster", err)
		return
	}
	w, ok := snap.Workload(r.ID)
	if !ok {
		w = s.workload(r)
	}
	if word, never := s.neverStarts(c, r.ID); never {
		s.audit(c, c.who.Name, "preempt", r.ID, "refused", "Kueue cannot admit it as it is: "+word.Why)
		c.private(plain(fmt.Sprintf("Preempting would not help %s: Kueue cannot admit it as it is (%s). Nothing was changed.", r.ID, strings.TrimRight(word.Why, "."))))
		return
	}
	victims, _, ok := snap.ProposeVictims(w)
	if ok && len(victims) == 0 {
		s.audit(c, c.who.Name, "preempt", r.ID, "refused", "fits without preemption")
		c.private(plain(fmt.Sprintf("%s fits now without preempting anything; it starts at the next admission cycle. Nothing was changed.", r.ID)))
		return
	}
	if !ok {
		reason := snap.Diagnose(r.ID)
		s.audit(c, c.who.Name, "preempt", r.ID, "refused", "no victims; waits for "+string(reason))
		c.private(plain(fmt.Sprintf("No lower-priority work can make room for %s now: it waits for %s, which preemption does not solve. Nothing was changed.", r.ID, reason)))
		return
	}
	events, err := s.apply(c, Op{Kind: OpPreempt, ID: r.ID, Victims: victims})
	if err != nil {
		s.audit(c, c.who.Name, "preempt", r.ID, "error", err.Error())
		s.failed(c, "preempting for "+r.ID, err)
		return
	}
	s.audit(c, c.who.Name, "preempt", r.ID, "ok", "victims: "+strings.Join(victims, ", "))
	c.emit(thread(r.ID, plain(fmt.Sprintf("%s preempted %s to start this now.", c.who.Name, strings.Join(victims, ", ")))))
	c.manualVictims = victims
	s.observe(c, events, "")
	c.manualVictims = nil
	c.private(plain(fmt.Sprintf("Preempted %s; %s is starting.", strings.Join(victims, ", "), r.ID)))
}

// reread reads r again after a cluster operation, during which (on a
// real cluster, whose API calls are made outside the write section) the
// cluster's events may have moved it on. If it ended meanwhile, the
// sender is told and ok is false.
func (s *Service) reread(c *call, r records.Request) (records.Request, bool) {
	fresh, err := s.getRequest(c, r.ID)
	if err != nil {
		s.failed(c, "reading "+r.ID, err)
		return r, false
	}
	if fresh.State.Final() {
		s.audit(c, c.who.Name, "", r.ID, "refused", "stale: ended meanwhile")
		c.private(plain(fmt.Sprintf("%s ended meanwhile: it is %s%s.", r.ID, fresh.State, s.when(fresh.EndedAt))))
		return fresh, false
	}
	return fresh, true
}

// recordUsage appends r's latest stretch of GPU use, until now, to the
// usage log.
func (s *Service) recordUsage(c *call, r records.Request) { s.recordUsageUntil(c, r, c.now) }

// recordUsageUntil appends r's latest stretch of GPU use, until end.
func (s *Service) recordUsageUntil(c *call, r records.Request, end time.Time) {
	if r.AdmittedAt.IsZero() || !end.After(r.AdmittedAt) {
		return
	}
	u := records.UsageRecord{Request: r.ID, Team: r.Team, Requester: r.Requester, Flavor: r.AdmittedFlavor, GPUs: r.GPUs, Start: r.AdmittedAt, End: end}
	c.w.usage = append(c.w.usage, u)
}

func thread(id string, r Reply) Output {
	return Output{To: Destination{Kind: ToThread, Request: id}, Reply: r}
}

func (s *Service) dm(person string, r Reply) Output {
	p := s.person(person)
	return Output{To: Destination{Kind: ToPerson, Person: p.Name, ChatID: p.ChatID}, Reply: r}
}

func (s *Service) updateCard(c *call, r records.Request) Output {
	return Output{To: Destination{Kind: UpdateCard, Request: r.ID}, Reply: s.card(c, r, nil)}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func suffix(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}
