package commands

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpubot/gpubot/records"
)

// What a sweep says and does about zombies, and how a zombie ends.

// zombieFound records a new zombie, then asks its owner (or, without
// one, tells the team's leads).
func (s *Service) zombieFound(c *call, sub subject, f finding) {
	z := records.Zombie{
		Team: sub.team, Owner: sub.owner, Flavor: sub.flavor, GPUs: sub.gpus,
		Kind: f.kind, Detail: f.detail, Since: f.since, FoundAt: c.now,
	}
	if sub.req != nil {
		z.Request = sub.req.ID
	} else {
		z.Workload = sub.key
	}
	// Work gpubot does not follow has no thread to ask in: its leads (and
	// owner, if known) are told at once.
	direct := sub.owner != "" && sub.req != nil
	if sub.owner != "" {
		z.OwnerToldAt = c.now
	}
	if !direct {
		z.LeadsToldAt = c.now
	}
	z, err := s.putZombie(c, z)
	if err != nil {
		s.log.Error("saving a zombie finding", "work", sub.key, "kind", string(f.kind), "err", err)
		return
	}
	s.zombieAudit(c, "gpubot", "zombie-found", z, "ok", f.detail)
	if !direct {
		s.tellLeads(c, z, sub)
		return
	}
	plan := s.plan(z, sub)
	text := fmt.Sprintf("%s holds %d GPUs but looks unused: %s. Are you still using it? %s", s.what(sub), sub.gpus, f.detail, plan)
	buttons := s.zombieButtons(z, sub, false)
	c.emit(s.dm(sub.owner, plain("Your request "+text, buttons)))
	c.emit(thread(sub.req.ID, plain(fmt.Sprintf("Zombie check %s: %s. Asked %s whether it is still in use. %s", z.ID, f.detail, sub.owner, plan), buttons)))
}

// escalate moves an open zombie one step along its timeline, if its time
// has come: tell the leads, then (Release policy) release it.
func (s *Service) escalate(c *call, z records.Zombie, sub subject) {
	pol := s.set.Zombies
	if z.LeadsToldAt.IsZero() {
		if c.now.Before(z.OwnerToldAt.Add(pol.LeadsGrace)) {
			return
		}
		z.LeadsToldAt = c.now
		if _, err := s.putZombie(c, z); err != nil {
			s.log.Error("saving a zombie", "zombie", z.ID, "err", err)
			return
		}
		s.zombieAudit(c, "gpubot", "zombie-leads-told", z, "ok", strings.Join(s.leadsOf(z), ", "))
		s.tellLeads(c, z, sub)
		return
	}
	if !pol.Release || c.now.Before(z.LeadsToldAt.Add(pol.ReleaseGrace)) || s.whyNotRelease(z, sub) != "" {
		return
	}
	unlock, free := s.tryRequest(c, sub.req.ID)
	if !free {
		return // someone is acting on it: the next sweep looks again
	}
	defer unlock()
	r, err := s.getRequest(c, sub.req.ID)
	if err != nil || r.State != records.StateRunning {
		return
	}
	who := c.who
	c.who = &Person{Name: "gpubot"}
	s.stop(c, r, VerbRelease) // resolves z as auto-released
	c.who = who
	if got, err := s.getZombie(c, z.ID); err == nil && got.Outcome == records.ZombieAutoReleased {
		c.emit(s.dm(sub.owner, plain(fmt.Sprintf("gpubot released your request %s: %s, and nobody answered since %s (zombie check %s). Request again if you still need GPUs.",
			r.ID, z.Detail, s.clock(z.FoundAt), z.ID))))
	}
}

// tellLeads tells the team's leads (the admins, when the owner is the
// only lead) about z, with the buttons to release or keep it, and says
// so in the request's thread (or, for work gpubot does not follow, in
// the team's channel).
func (s *Service) tellLeads(c *call, z records.Zombie, sub subject) {
	leads := s.leadsOf(z)
	plan := ""
	if why := s.whyNotRelease(z, sub); s.set.Zombies.Release && why == "" {
		plan = fmt.Sprintf(" gpubot releases it at %s unless someone answers.", s.clock(c.now.Add(s.set.Zombies.ReleaseGrace)))
	} else if s.set.Zombies.Release {
		plan = " gpubot will not release it: " + why + "."
	}
	owner := "It has no owner gpubot knows."
	switch {
	case z.Owner != "" && sub.req == nil:
		owner = fmt.Sprintf("Its owner, %s, is told too.", z.Owner)
	case z.Owner != "":
		owner = fmt.Sprintf("%s did not answer within %s.", z.Owner, fmtDuration(c.now.Sub(z.OwnerToldAt)))
	}
	text := fmt.Sprintf("%s holds %d GPUs without using them: %s. %s%s", s.what(sub), z.GPUs, z.Detail, owner, plan)
	if sub.req == nil {
		text += fmt.Sprintf(" /gpu track %s lets gpubot follow it.", sub.key)
	}
	buttons := s.zombieButtons(z, sub, true)
	for _, l := range leads {
		c.emit(s.dm(l, plain(text, buttons)))
	}
	if z.Owner != "" && sub.req == nil {
		c.emit(s.dm(z.Owner, plain(text, buttons)))
	}
	told := "Told " + orNone(leads) + "."
	if sub.req != nil {
		c.emit(thread(sub.req.ID, plain(fmt.Sprintf("Zombie check %s: %s %s%s", z.ID, owner, told, plan))))
		return
	}
	c.emit(Output{To: Destination{Kind: ToChannel, Channel: s.channelOf(z.Team), Request: z.ID},
		Reply: plain(fmt.Sprintf("Zombie check %s: %s %s", z.ID, text, told), buttons)})
}

// plan says what happens if the owner does not answer.
func (s *Service) plan(z records.Zombie, sub subject) string {
	pol := s.set.Zombies
	leadsAt := z.OwnerToldAt.Add(pol.LeadsGrace)
	t := fmt.Sprintf("If nobody answers, %s %s told at %s", orList(s.leadsOf(z)), isAre(len(s.leadsOf(z))), s.clock(leadsAt))
	switch why := s.whyNotRelease(z, sub); {
	case !pol.Release:
	case why == "":
		t += fmt.Sprintf(" and gpubot releases it at %s", s.clock(leadsAt.Add(pol.ReleaseGrace)))
	default:
		t += "; gpubot will not release it: " + why
	}
	return t + "."
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// whyNotRelease says why gpubot may not release z's work itself, or "".
func (s *Service) whyNotRelease(z records.Zombie, sub subject) string {
	switch {
	case sub.req == nil:
		return "gpubot does not follow it"
	case z.Owner == "":
		return "it has no owner gpubot knows"
	case z.Kind == records.ZombiePastEnd && sub.enforced:
		return "Kueue's maximum execution time stops it"
	}
	return ""
}

// zombieButtons: Still using it and Release (for the leads, Release
// first). Work gpubot does not follow gets no Release.
func (s *Service) zombieButtons(z records.Zombie, sub subject, leads bool) Block {
	keep := Button{Label: "Still using it", Action: Action{Name: VerbKeep, Request: sub.name(), Arg: z.ID}}
	if sub.req == nil {
		keep.Label = "Still in use"
		keep.Action = Action{Name: VerbKeep, Request: z.ID}
		return actions(keep)
	}
	release := Button{Label: "Release", Action: Action{Name: VerbRelease, Request: sub.req.ID}, Style: "danger"}
	if leads {
		return actions(release, keep)
	}
	keep.Style = "primary"
	return actions(keep, release)
}

// leadsOf names who is told when the owner does not answer: the team's
// leads other than the owner, else the admins other than the owner.
func (s *Service) leadsOf(z records.Zombie) []string {
	var out []string
	if t, ok := s.teams[z.Team]; ok {
		for _, l := range t.Leads {
			if !strings.EqualFold(l, z.Owner) {
				out = append(out, l)
			}
		}
	}
	if len(out) == 0 {
		for _, a := range s.admins() {
			if !strings.EqualFold(a, z.Owner) {
				out = append(out, a)
			}
		}
	}
	return out
}

// what describes the work: "r5 (6× h100, speech)" or "nlp/llama-eval (8× h100, nlp)".
func (s *Service) what(sub subject) string {
	f := sub.flavor
	if f == "" {
		f = "GPUs"
	}
	return fmt.Sprintf("%s (%d× %s, %s)", sub.name(), sub.gpus, f, sub.team)
}

// resolveZombie ends z with outcome, audits it, and says text (if any)
// where z was discussed.
func (s *Service) resolveZombie(c *call, z records.Zombie, outcome records.ZombieOutcome, by, text string) {
	z.Outcome, z.ResolvedAt, z.ResolvedBy = outcome, c.now, by
	if _, err := s.putZombie(c, z); err != nil {
		s.log.Error("saving a zombie", "zombie", z.ID, "outcome", string(outcome), "err", err)
		return
	}
	s.zombieAudit(c, by, "zombie-"+string(outcome), z, "ok", text)
	if text == "" {
		return
	}
	if z.Request != "" {
		c.emit(thread(z.Request, plain(text)))
	} else {
		c.emit(thread(z.ID, plain(text)))
	}
}

// zombieGone ends an open zombie whose work no longer runs, when the
// event that ended it did not (a missed event, or other work that
// finished).
func (s *Service) zombieGone(c *call, z records.Zombie) {
	outcome, text := records.ZombieFinished, fmt.Sprintf("It no longer holds GPUs; zombie check %s closed.", z.ID)
	if z.Request == "" {
		// Work gpubot did not follow has ended, or is tracked now (and a
		// new check, if still wasted, is about the request).
		text = fmt.Sprintf("It is no longer admitted work outside gpubot (it ended, or is tracked now); zombie check %s closed.", z.ID)
	} else {
		if r, err := s.getRequest(c, z.Request); err == nil && r.State == records.StateQueued {
			outcome = records.ZombieEvicted
		}
	}
	s.resolveZombie(c, z, outcome, "gpubot", text)
}

// openZombiesOf returns the open zombies of request id.
func (s *Service) openZombiesOf(c *call, id string) []records.Zombie {
	if s.zombies == nil {
		return nil
	}
	zs, err := s.listZombies(c, c.now, c.now.AddDate(1000, 0, 0))
	if err != nil {
		s.log.Error("listing zombies", "request", id, "err", err)
		return nil
	}
	return slices.DeleteFunc(zs, func(z records.Zombie) bool { return z.Outcome != records.ZombieOpen || z.Request != id })
}

// zombieEnded ends the open zombies of request r, which the cluster just
// stopped: preempted, or finished (detail says how, "" when its time was
// up).
func (s *Service) zombieEnded(c *call, r records.Request, preempted bool, detail string) {
	for _, z := range s.openZombiesOf(c, r.ID) {
		switch {
		case preempted:
			s.resolveZombie(c, z, records.ZombieEvicted, "kueue", fmt.Sprintf("It was preempted, so its GPUs are free; zombie check %s closed.", z.ID))
		case detail == "" && z.Kind == records.ZombiePastEnd:
			s.resolveZombie(c, z, records.ZombieEvicted, "kueue", fmt.Sprintf("The cluster stopped it at its maximum execution time; gpubot did not act (zombie check %s closed).", z.ID))
		case detail == "":
			s.resolveZombie(c, z, records.ZombieEvicted, "kueue", fmt.Sprintf("It reached its requested time and the cluster stopped it; zombie check %s closed.", z.ID))
		default:
			s.resolveZombie(c, z, records.ZombieFinished, "gpubot", fmt.Sprintf("It ended (%s); zombie check %s closed.", detail, z.ID))
		}
	}
}

// zombieReleased ends the open zombies of request r, which c.who just
// released or cancelled.
func (s *Service) zombieReleased(c *call, r records.Request) {
	outcome := records.ZombieReleasedManually
	switch {
	case c.who.Name == "gpubot":
		outcome = records.ZombieAutoReleased
	case strings.EqualFold(c.who.Name, r.Requester):
		outcome = records.ZombieReleasedByOwner
	}
	for _, z := range s.openZombiesOf(c, r.ID) {
		s.resolveZombie(c, z, outcome, c.who.Name, "")
	}
}

// keep handles Still using it (and /gpu keep): the zombie is kept, and
// the same kind of waste is not asked about again for KeepFor.
func (s *Service) keep(c *call, a Action) {
	if s.zombies == nil {
		s.audit(c, c.who.Name, "keep", a.Request, "invalid", "zombie sweeps are off")
		c.private(plain("gpubot is not checking for unused GPUs here, so there is nothing to answer."))
		return
	}
	z, ok := s.zombieOf(c, a)
	if !ok {
		s.audit(c, c.who.Name, "keep", a.Request, "invalid", "no open zombie check")
		c.private(plain(fmt.Sprintf("There is no open zombie check for %s, so there is nothing to answer. Nothing was changed.", a.Request)))
		return
	}
	if !c.who.Admin && !s.isLead(c.who, z.Team) && !(z.Owner != "" && strings.EqualFold(c.who.Name, z.Owner)) {
		who := orList(s.approvers(z.Team))
		if z.Owner != "" {
			who = z.Owner + " (whose it is), " + who
		}
		s.zombieAudit(c, c.who.Name, "keep", z, "refused", "not the owner, a lead or an admin")
		c.private(plain(fmt.Sprintf("Only %s can answer zombie check %s. Nothing was changed.", who, z.ID)))
		return
	}
	if z.Outcome != records.ZombieOpen {
		s.zombieAudit(c, c.who.Name, "keep", z, "refused", "stale: already "+string(z.Outcome))
		c.private(plain(fmt.Sprintf("Zombie check %s is already closed (%s by %s, %s). Nothing was changed.", z.ID, z.Outcome, z.ResolvedBy, s.clock(z.ResolvedAt))))
		return
	}
	name := zombieKey(z)
	until := s.clock(c.now.Add(s.set.Zombies.KeepFor))
	text := fmt.Sprintf("%s says %s is still in use; gpubot will not ask about its %s again before %s (zombie check %s closed).", c.who.Name, name, kindWords(z.Kind), until, z.ID)
	s.resolveZombie(c, z, records.ZombieKept, c.who.Name, text)
	c.private(plain(fmt.Sprintf("Noted: %s stays. gpubot will not ask about its %s again before %s.", name, kindWords(z.Kind), until)))
}

// zombieOf finds the zombie an action is about: the zombie check named
// by Arg (buttons) or Request (/gpu keep z3), else the newest open one of
// request Request (/gpu keep r12).
func (s *Service) zombieOf(c *call, a Action) (records.Zombie, bool) {
	id := a.Arg
	if id == "" && strings.HasPrefix(a.Request, "z") {
		id = a.Request
	}
	if id != "" {
		z, err := s.getZombie(c, id)
		return z, err == nil
	}
	zs := s.openZombiesOf(c, a.Request)
	if len(zs) == 0 {
		return records.Zombie{}, false
	}
	return zs[len(zs)-1], true
}

// kindWords: "pods not running", "running past its end", "idle GPUs".
func kindWords(k records.ZombieKind) string {
	switch k {
	case records.ZombiePodsNotReady:
		return "pods not running"
	case records.ZombiePastEnd:
		return "running past its end"
	}
	return "idle GPUs"
}

// zombieAudit audits a step of z's timeline against its work.
func (s *Service) zombieAudit(c *call, actor, action string, z records.Zombie, outcome, detail string) {
	s.audit(c, actor, action, zombieKey(z), outcome, strings.TrimSpace(z.ID+" "+string(z.Kind)+": "+detail))
}
