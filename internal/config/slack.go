package config

import (
	"net/url"

	"go.yaml.in/yaml/v3"
)

// Slack is the optional slack section: how gpubot talks to Slack. The
// tokens are never here: they come from SLACK_BOT_TOKEN and
// SLACK_APP_TOKEN (or the files SLACK_BOT_TOKEN_FILE and
// SLACK_APP_TOKEN_FILE name).
type Slack struct {
	// APIURL is the Web API base URL, e.g. https://slack-gov.com/api/ for
	// GovSlack; "" is Slack's own. SLACK_API_URL overrides it.
	APIURL string
	// MessagesPerSecond is the most messages gpubot posts per second in
	// one channel, after a burst of Burst; 0 means the default (1 and 3).
	MessagesPerSecond float64
	Burst             int
	// MatchByEmail finds people who have an email but no slackID by their
	// Slack profile's e-mail address (the app then needs the users:read
	// and users:read.email scopes).
	MatchByEmail bool
}

// Slack returns the slack section (zero values where not given).
func (c *Config) Slack() Slack { return c.slack }

// slackSection reads the top-level slack section.
func (p *parser) slackSection(n *yaml.Node) {
	if n == nil {
		return
	}
	f := p.mapping(n, "slack", "apiURL", "messagesPerSecond", "burst", "matchByEmail")
	s := &p.cfg.slack
	if v := f.get("apiURL"); v != nil {
		if u, ok := p.str(v, "slack.apiURL"); ok {
			if pu, err := url.Parse(u); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" || pu.RawQuery != "" || pu.Fragment != "" {
				p.errorf(v, "slack.apiURL", "%q is not a Web API base URL; use one like https://slack.com/api/", u)
			} else {
				s.APIURL = u
			}
		}
	}
	if v := f.get("messagesPerSecond"); v != nil {
		if r, ok := p.positive(v, "slack.messagesPerSecond"); ok {
			if r > 100 {
				p.errorf(v, "slack.messagesPerSecond", "must be at most 100 (Slack allows about 1 message per second per channel)")
			} else {
				s.MessagesPerSecond = r
			}
		}
	}
	if v := f.get("matchByEmail"); v != nil {
		s.MatchByEmail, _ = p.boolean(v, "slack.matchByEmail")
	}
	if v := f.get("burst"); v != nil {
		if b, ok := p.integer(v, "slack.burst", 1, 100); ok {
			s.Burst = b
		}
	}
}
