package config

import (
	"errors"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpubot/gpubot/digest"
)

// Digests returns the scheduled daily digests (the digests list), in
// file order: a team's into its channel (or the one given), the
// cluster-wide ones into theirs.
func (c *Config) Digests() []digest.Posting { return slices.Clone(c.digests) }

// Report returns the weekly report's channel, schedule and zone; the
// schedule is zero when the config has no report section.
func (c *Config) Report() digest.Posting { return c.report }

// digestList reads the top-level digests list. It runs after the teams.
func (p *parser) digestList(n *yaml.Node) {
	if n == nil {
		return
	}
	seen := map[string]int{} // team+channel → line
	for i, e := range p.list(n, "digests") {
		path := index("digests", i)
		f := p.mapping(e, path, "team", "channel", "schedule", "timezone")
		post := digest.Posting{}
		ok := true
		if v := f.get("team"); v != nil {
			if s, okT := p.str(v, field(path, "team")); okT && p.teams.ref(p.decoder, word{s, v, field(path, "team")}) {
				post.Team = s
			} else {
				ok = false
			}
		}
		if v := f.get("channel"); v != nil {
			if s, okC := p.channel(v, field(path, "channel")); okC {
				post.Channel = s
			} else {
				ok = false
			}
		}
		switch {
		case !ok:
		case post.Team == "" && post.Channel == "":
			p.errorf(e, path, "needs a team (its digest goes to the team's channel) or a channel (the cluster-wide digest goes there), or both")
			ok = false
		case post.Channel == "":
			post.Channel = p.teamChannel(post.Team)
		}
		sch, loc, okS := p.schedule(f, path)
		if !ok || !okS {
			continue
		}
		post.Schedule, post.Location = sch, loc
		key := post.Team + "\x00" + post.Channel
		if line, dup := seen[key]; dup {
			p.errorf(e, path, "the same digest (%s) is already listed at line %d", describePosting(post), line)
			continue
		}
		seen[key] = e.Line
		p.cfg.digests = append(p.cfg.digests, post)
	}
}

// reportSection reads the top-level report section.
func (p *parser) reportSection(n *yaml.Node) {
	if n == nil {
		return
	}
	f := p.mapping(n, "report", "channel", "schedule", "timezone")
	report := digest.Posting{Channel: p.cfg.settings.DefaultChannel}
	if v := f.get("channel"); v != nil {
		if s, ok := p.channel(v, "report.channel"); ok {
			report.Channel = s
		}
	}
	if sch, loc, ok := p.schedule(f, "report"); ok {
		report.Schedule, report.Location = sch, loc
		p.cfg.report = report
	}
}

// schedule reads a required schedule key in the zone of the timezone key,
// if any, else the config's, and returns that zone too.
func (p *parser) schedule(f *fields, path string) (digest.Schedule, *time.Location, bool) {
	loc := p.cfg.settings.Location
	zoneOK := true
	if v := f.get("timezone"); v != nil {
		s, ok := p.str(v, field(path, "timezone"))
		if ok {
			l, err := time.LoadLocation(s)
			if err != nil || s == "" {
				p.errorf(v, field(path, "timezone"), "unknown time zone %q; use an IANA name like Europe/Berlin or America/New_York", s)
				ok = false
			} else {
				loc = l
			}
		}
		zoneOK = ok
	}
	v := p.required(f, "schedule")
	if v == nil || !zoneOK {
		return digest.Schedule{}, nil, false
	}
	sch, ok := p.cronSchedule(v, field(path, "schedule"), loc)
	if !ok {
		return digest.Schedule{}, nil, false
	}
	return sch, loc, true
}

// cronSchedule reads the cron spec at v, in zone loc, as the scheduler
// will run it.
func (p *parser) cronSchedule(v *yaml.Node, path string, loc *time.Location) (digest.Schedule, bool) {
	spec, ok := p.str(v, path)
	if !ok {
		return digest.Schedule{}, false
	}
	// checkSchedule explains a mistake field by field; ParseSchedule is
	// the scheduler's own word.
	if msg := checkSchedule(spec); msg != "" {
		p.errorf(v, path, "%s", msg)
		return digest.Schedule{}, false
	}
	sch, err := digest.ParseSchedule(spec, loc)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, digest.ErrBadSchedule) {
			msg = strings.TrimPrefix(msg, digest.ErrBadSchedule.Error()+": ")
		}
		p.errorf(v, path, "%s; use a cron spec of minute, hour, day of month, month and day of week, like \"0 9 * * 1-5\" (09:00 on weekdays)", msg)
		return digest.Schedule{}, false
	}
	return sch, true
}

// teamChannel is where team's cards go.
func (p *parser) teamChannel(team string) string {
	for _, t := range p.cfg.settings.Teams {
		if t.Name == team {
			return t.Channel
		}
	}
	return p.cfg.settings.DefaultChannel
}

func describePosting(post digest.Posting) string {
	if post.Team == "" {
		return "the cluster's in " + post.Channel
	}
	return post.Team + "'s in " + post.Channel
}
