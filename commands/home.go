package commands

import (
	"context"
	"fmt"
	"slices"
)

// FormDefaults is what a request form offers a person: the words they may
// choose and what to preselect. Every list uses the parser's spelling, so
// a choice from them passes Parse with the service's Vocabulary.
type FormDefaults struct {
	// Known is false for a person gpubot does not know; the lists are
	// then empty and no form should be offered.
	Known bool
	// Teams the person may request for: their own teams first, then,
	// for an admin, every other team.
	Teams []string
	// Flavors the teams have quota on, in the order the teams try them.
	Flavors    []string
	Priorities []string // lowest first
	Topologies []string // host, rack, block
	Team       string   // preselected: the person's first team
	Priority   string   // preselected: the default priority
}

// FormDefaults returns what a request form should offer user (a chat user
// ID or a person's name).
func (s *Service) FormDefaults(user string) FormDefaults {
	p, ok := s.who(user)
	if !ok {
		return FormDefaults{}
	}
	teams := s.teamsOf(p)
	if p.Admin {
		for _, t := range s.set.Teams {
			if !slices.Contains(teams, t.Name) {
				teams = append(teams, t.Name)
			}
		}
	}
	var flavors []string
	for _, t := range teams {
		q, _ := s.queue(t)
		for _, f := range q.Flavors {
			if !slices.Contains(flavors, f) {
				flavors = append(flavors, f)
			}
		}
	}
	d := FormDefaults{
		Known:      true,
		Teams:      teams,
		Flavors:    flavors,
		Priorities: slices.Clone(s.vocab.Priorities),
		Topologies: slices.Clone(topologies),
		Priority:   s.set.DefaultPriority,
	}
	if len(teams) > 0 {
		d.Team = teams[0]
	}
	return d
}

// Home is the App Home content for user (a chat user ID or a person's
// name): their open and recent requests with state and estimate
// (/gpu status), each of their teams' usage and fair-share standing
// (/gpu usage <team>; all teams for an admin in none), and capacity per
// flavor (/gpu capacity). An unknown user gets a reply saying how to be
// added. Home changes nothing and writes no audit entry; like every read,
// it answers from the latest view without waiting for writes.
func (s *Service) Home(ctx context.Context, user string) Reply {
	c := &call{ctx: ctx, now: s.deps.Clock.Now(), in: Input{User: user}}
	var home Reply
	chain(func(c *call) { home = s.home(c, user) }, s.recovering("building the home view", func(_ *call, ref string) {
		home = plain(fmt.Sprintf("Something went wrong on gpubot's side while building this page (ref %s). Open it again in a moment.", ref))
	}))(c)
	return home
}

func (s *Service) home(c *call, user string) Reply {
	who, ok := s.who(user)
	if !ok {
		return plain("gpubot does not know you yet.",
			section(fmt.Sprintf("I don't know who you are (%s). Ask a gpubot admin to add your Slack user ID to the people in gpubot's config; then this page shows your GPU requests, your team's usage and the cluster's capacity.", user)),
			contextBlock("/gpu help lists the commands."))
	}
	c.who = who
	blocks := []Block{header("Your GPU requests")}
	blocks = append(blocks, s.homePart(c, func() { s.status(c, "") })...)
	teams := s.teamsOf(who)
	if len(teams) == 0 {
		blocks = append(blocks, header("Usage, all teams"))
		blocks = append(blocks, s.homePart(c, func() { s.usage(c, "", 0) })...)
	}
	for _, t := range teams {
		blocks = append(blocks, header("Team "+t))
		blocks = append(blocks, s.homePart(c, func() { s.usage(c, t, 0) })...)
	}
	blocks = append(blocks, header("Capacity"))
	blocks = append(blocks, s.homePart(c, func() { s.capacity(c) })...)
	blocks = append(blocks, contextBlock(fmt.Sprintf("As of %s. /gpu request asks for GPUs; /gpu help lists the commands.", s.clock(c.now))))
	return Reply{Text: fmt.Sprintf("gpubot for %s: your requests, your team's usage and the cluster's capacity.", who.Name), Blocks: blocks}
}

// homePart runs a view and returns what it said as blocks: its headline
// as a section, then its blocks.
func (s *Service) homePart(c *call, view func()) []Block {
	c.outs = nil
	view()
	var out []Block
	for _, o := range c.outs {
		if o.Reply.Text != "" {
			out = append(out, section(o.Reply.Text))
		}
		out = append(out, o.Reply.Blocks...)
	}
	c.outs = nil
	return out
}
