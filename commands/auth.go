package commands

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpubot/gpubot/records"
)

// Who may do what:
//
//	request for team T        members and leads of T, admins
//	approve, deny             leads of the request's team, admins
//	preempt                   admins
//	cancel, release, extend   the requester, leads of the request's team, admins
//	whatif ±N x flavor        admins
//	status, queue, capacity,
//	usage, whatif, help       everyone gpubot knows

func (s *Service) isLead(p *Person, team string) bool {
	t, ok := s.teams[team]
	return ok && slices.ContainsFunc(t.Leads, func(l string) bool { return strings.EqualFold(l, p.Name) })
}

func (s *Service) canApprove(p *Person, team string) bool {
	return p.Admin || s.isLead(p, team)
}

// role says in what capacity p acts on team's work.
func (s *Service) role(p *Person, team string) string {
	switch {
	case s.isLead(p, team):
		return p.Name + " is a lead of " + team
	case p.Admin:
		return p.Name + " is an admin"
	}
	return p.Name + " is the requester"
}

// approvers names who may approve team's requests, with their role.
func (s *Service) approvers(team string) []string {
	var out []string
	if t, ok := s.teams[team]; ok {
		for _, l := range t.Leads {
			out = append(out, fmt.Sprintf("%s (lead of %s)", l, team))
		}
	}
	for _, p := range s.set.People {
		if p.Admin && !s.isLead(&p, team) {
			out = append(out, p.Name+" (admin)")
		}
	}
	return out
}

func (s *Service) admins() []string {
	var out []string
	for _, p := range s.set.People {
		if p.Admin {
			out = append(out, p.Name)
		}
	}
	return out
}

// may returns nil if p may do verb to r, else a sentence saying who may.
func (s *Service) may(p *Person, verb Verb, r records.Request) error {
	switch verb {
	case VerbApprove, VerbDeny:
		if s.canApprove(p, r.Team) {
			return nil
		}
		return fmt.Errorf("only %s can %s %s", orList(s.approvers(r.Team)), verb, r.ID)
	case VerbPreempt:
		if p.Admin {
			return nil
		}
		return fmt.Errorf("only admins (%s) can preempt other work for %s", strings.Join(s.admins(), ", "), r.ID)
	case VerbCancel, VerbRelease, VerbExtend, VerbSwitch:
		if p.Admin || s.isLead(p, r.Team) || strings.EqualFold(p.Name, r.Requester) {
			return nil
		}
		return fmt.Errorf("only %s (who asked for it), %s can %s %s", r.Requester, orList(s.approvers(r.Team)), verb, r.ID)
	}
	return fmt.Errorf("%s is not an action on a request", verb)
}
