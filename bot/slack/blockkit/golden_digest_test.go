package blockkit_test

import (
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
)

// TestGoldenDigests renders the daily digests and the weekly report
// after a day and a half of work on the bundled example, sampled every
// 10 minutes as the scheduler does: within Slack's limits.
func TestGoldenDigests(t *testing.T) {
	e := newEnv(t)
	sample := func() {
		if err := e.eng.Sample(e.ctx, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	e.do("dave", `/gpu request 8xh100 for 4h reason "detector ablation"`)
	e.do("alice", "/gpu request 8xh100 for 6h")
	e.press("bob", commands.VerbApprove, "r11", "")
	e.do("grace", "/gpu request 16xa100 for 3h")
	e.do("alice", "/gpu request 32xh100 for 1d priority high")
	for range 6 * 15 { // to Wednesday 00:00
		sample()
		e.advance(10 * time.Minute)
	}
	e.press("carol", commands.VerbApprove, "r13", "") // 15h late: a manual intervention
	e.advance(9 * time.Hour)                          // Wednesday 09:00
	got := map[string]commands.Reply{
		"digest-cluster": find(t, e.do("carol", "/gpu digest"), commands.ToSender, "", "Daily digest for the cluster"),
		"digest-team":    find(t, e.do("alice", "/gpu digest nlp"), commands.ToSender, "", "Daily digest for nlp"),
		"report":         find(t, e.do("carol", "/gpu report"), commands.ToSender, "", "Weekly report"),
	}
	for name, r := range got {
		t.Run(name, func(t *testing.T) { golden(t, "reply-"+name, message(t, r)) })
	}
}
