package commands_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// TestHome: App Home shows the person's requests with state and
// estimate, their team's usage and standing, and capacity per flavor,
// using the same views as the commands; it changes nothing.
func TestHome(t *testing.T) {
	e := newEnv(t, exampleConfig(t), seeded)
	e.do("dave", "request 8xh100 for 4h")                         // r10 runs, preempting r5
	e.do("alice", `request 8xh100 for 4h reason "eval run"`)      // r11 needs approval
	e.do("carol", "request 16xh100 for 2h team nlp priority low") // r12 queued
	before, audit := e.requests(), e.audit("")

	home := e.svc.Home(e.ctx, "U0ALICE")
	got := text(home)
	for _, want := range []string{
		"gpubot for alice",
		"Your GPU requests", "alice, you have",
		"r11 | 8× h100 | 4h | nlp | normal | awaiting-approval | asked 09:00",
		"r5 | 4× h100 | 1h30m | nlp | low | queued | ",
		"Team nlp", "GPU usage over the last 7 days, nlp",
		"Team | GPU-hours | Share | GPUs now / nominal | Borrowed | Pending | Fair-share usage", "\nnlp | ",
		"Capacity", "Capacity now, per flavor.", "\nh100 | 16 | 128 | ", "\na100 | 8 | 64 | ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("home lacks %q:\n%s", want, got)
		}
	}
	var headers []string
	for _, b := range home.Blocks {
		if b.Kind == commands.BlockHeader {
			headers = append(headers, b.Text)
		}
	}
	diff(t, "home's headers", []string{"Your GPU requests", "Team nlp", "Capacity"}, headers)
	if strings.Contains(got, "r12 |") {
		t.Errorf("home shows carol's request r12 to alice:\n%s", got)
	}
	if r5 := e.req("r5"); r5.Estimate == nil || !strings.Contains(got, "r5 | 4× h100 | 1h30m | nlp | low | queued | starts ") {
		t.Errorf("a queued request shows its estimate; got:\n%s", got)
	}
	diff(t, "requests after Home", before, e.requests())
	diff(t, "audit after Home", audit, e.audit(""))

	admin := text(e.svc.Home(e.ctx, "carol"))
	for _, want := range []string{"Usage, all teams", "\nnlp | ", "\nvision | ", "\nspeech | "} {
		if !strings.Contains(admin, want) {
			t.Errorf("an admin in no team sees every team's usage; lacks %q:\n%s", want, admin)
		}
	}
}

// TestHomeUnknownUser: someone gpubot does not know gets a helpful page,
// not an error.
func TestHomeUnknownUser(t *testing.T) {
	e := newEnv(t, exampleConfig(t))
	home := e.svc.Home(e.ctx, "U0NOBODY")
	got := text(home)
	for _, want := range []string{"gpubot does not know you yet.", "(U0NOBODY)", "add your Slack user ID", "/gpu help"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if len(e.audit("")) != 0 {
		t.Errorf("Home wrote to the audit log: %v", e.audit(""))
	}
}

// TestHomePanic: a failure while building the page is a reply, not a
// crash.
func TestHomePanic(t *testing.T) {
	u := &panickingUsage{}
	e := newEnv(t, exampleConfig(t), func(o *envOptions) {
		o.usage = func(l commands.UsageLog) commands.UsageLog { u.UsageLog = l; return u }
	})
	u.armed = true
	home := e.svc.Home(e.ctx, "U0ALICE")
	if !strings.HasPrefix(home.Text, "Something went wrong on gpubot's side while building this page (ref E") {
		t.Errorf("got %q", home.Text)
	}
	if !strings.Contains(e.log.String(), "panic building the home view") {
		t.Errorf("the panic was not logged:\n%s", e.log.String())
	}
}

// TestFormDefaults: the form offers a person their teams and those teams'
// flavors, preselects their first team and the default priority, and
// every word it offers passes the parser.
func TestFormDefaults(t *testing.T) {
	e := newEnv(t, exampleConfig(t))
	prios := []string{"low", "normal", "high", "urgent"}
	topo := []string{"host", "rack", "block"}
	cases := map[string]commands.FormDefaults{
		"U0DAVE":   {Known: true, Teams: []string{"vision"}, Flavors: []string{"h100", "a100", "h100-spot", "h100-dws"}, Priorities: prios, Topologies: topo, Team: "vision", Priority: "normal"},
		"grace":    {Known: true, Teams: []string{"speech"}, Flavors: []string{"a100", "h100", "h100-spot", "h100-dws"}, Priorities: prios, Topologies: topo, Team: "speech", Priority: "normal"},
		"U0CAROL":  {Known: true, Teams: []string{"nlp", "vision", "speech"}, Flavors: []string{"h100", "a100", "h100-spot", "h100-dws"}, Priorities: prios, Topologies: topo, Team: "nlp", Priority: "normal"},
		"U0NOBODY": {},
	}
	for user, want := range cases {
		got := e.svc.FormDefaults(user)
		diff(t, "form defaults for "+user, want, got)
		for _, team := range got.Teams {
			for _, f := range got.Flavors {
				for _, p := range got.Priorities {
					for _, tp := range got.Topologies {
						text := fmt.Sprintf("request 8x%s for 4h team %s priority %s topology %s", f, team, p, tp)
						if _, err := commands.Parse(text, e.svc.Vocabulary()); err != nil {
							t.Errorf("%q: %v", text, err)
						}
					}
				}
			}
		}
	}
}

// panickingUsage is a UsageLog whose Usage panics once armed.
type panickingUsage struct {
	commands.UsageLog
	armed bool
}

func (p *panickingUsage) Usage(ctx context.Context, from, to time.Time) ([]records.UsageRecord, error) {
	if p.armed {
		panic("usage exploded")
	}
	return p.UsageLog.Usage(ctx, from, to)
}
