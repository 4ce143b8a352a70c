package commands_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// stubDigests answers /gpu digest and /gpu report.
type stubDigests struct {
	asked []string
	fail  error
}

func (s *stubDigests) Digest(_ context.Context, team string, now time.Time) (commands.Reply, error) {
	s.asked = append(s.asked, "digest "+team+" "+now.UTC().Format("15:04"))
	return commands.Reply{Text: "Daily digest for " + team + "."}, s.fail
}

func (s *stubDigests) Report(_ context.Context, now time.Time) (commands.Reply, error) {
	s.asked = append(s.asked, "report "+now.UTC().Format("15:04"))
	return commands.Reply{Text: "Weekly report."}, s.fail
}

func TestParseDigestAndReport(t *testing.T) {
	v := commands.Vocabulary{Teams: []string{"nlp", "vision"}, Flavors: []string{"h100"}}
	for in, want := range map[string]commands.Command{
		"/gpu digest":          {Verb: commands.VerbDigest},
		"digest NLP":           {Verb: commands.VerbDigest, Team: "nlp"},
		"/gpu digest team=nlp": {Verb: commands.VerbDigest, Team: "nlp"},
		"report":               {Verb: commands.VerbReport},
	} {
		got, err := commands.Parse(in, v)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		diff(t, "Parse("+in+")", want, got)
	}
	for in, msg := range map[string]string{
		"digest nlpp":       `unknown team 'nlpp'; did you mean nlp?`,
		"digest nlp vision": `unexpected word 'vision'`,
		"report weekly":     `unexpected word 'weekly'`,
		"digest team":       "missing value for team",
	} {
		_, err := commands.Parse(in, v)
		var pe *commands.ParseError
		if !errors.As(err, &pe) || !strings.Contains(strings.ToLower(pe.Error()), strings.ToLower(msg)) {
			t.Errorf("Parse(%q) = %v, want a ParseError with %q", in, err, msg)
		}
	}
}

func TestDigestAndReportCommands(t *testing.T) {
	d := &stubDigests{}
	e := newEnv(t, parse(t, small), withDigests(d))
	outs := e.do("alice", "/gpu digest nlp")
	if len(outs) != 1 || outs[0].To.Kind != commands.ToSender || outs[0].Reply.Text != "Daily digest for nlp." {
		t.Fatalf("/gpu digest nlp = %s", show(outs))
	}
	e.do("dave", "/gpu digest")
	e.do("dave", "/gpu report")
	diff(t, "asked", []string{"digest nlp 08:00", "digest  08:00", "report 08:00"}, d.asked)

	d.fail = errors.New("store is closed")
	outs = e.do("dave", "/gpu report")
	if got := text(outs[0].Reply); !strings.Contains(got, "building the report failed on gpubot's side: store is closed") {
		t.Errorf("a failing report answers %q", got)
	}

	off := newEnv(t, parse(t, small))
	if got := off.do("alice", "/gpu digest")[0].Reply.Text; got != "Digests and reports are not set up in this gpubot." {
		t.Errorf("without digests: %q", got)
	}
	if got := text(off.do("alice", "/gpu help digest")[0].Reply); !strings.Contains(got, "/gpu digest [<team>]") || !strings.Contains(got, "shown only to you") {
		t.Errorf("help digest: %q", got)
	}
}

// TestWaitsAndWhoPreempted: each wait for GPUs is kept on the request
// (from the request, then from each requeue, to the admission); Kueue's
// preemptions are audited as gpubot's, an admin's as the admin's; button
// presses are audited as such.
func TestWaitsAndWhoPreempted(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("bob", "/gpu request 16xh100 for 4h priority low") // r1 fills nlp at once (a lead approves his own)
	e.advance(time.Hour)
	e.do("alice", "/gpu request 8xh100 for 1h") // r2 preempts r1 (nlp preempts its own lower priority)
	e.advance(2 * time.Hour)
	r1 := e.req("r1")
	want := []records.Wait{{From: t0, To: t0}, {From: t0.Add(time.Hour), To: t0.Add(2 * time.Hour)}}
	diff(t, "r1's waits", want, r1.Waits)
	if got := r1.WaitingSince(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("r1 waiting since %s, want its requeue", got)
	}
	diff(t, "r2's waits", []records.Wait{{From: t0.Add(time.Hour), To: t0.Add(time.Hour)}}, e.req("r2").Waits)
	if got := e.audit("r1"); !containsAll(got, "gpubot preempted r1 ok") {
		t.Errorf("r1's audit = %q, want its preemption by gpubot", got)
	}

	// vision never preempts: an admin does it for r4.
	e.do("erin", "/gpu request 16xh100 for 4h priority low") // r3
	e.do("dave", "/gpu request 8xh100 for 2h")               // r4 waits for vision's quota
	e.press("carol", commands.VerbPreempt, "r4", "")
	if got := e.audit("r3"); !containsAll(got, "carol preempted r3 ok") {
		t.Errorf("r3's audit = %q, want its preemption by carol", got)
	}
	var preempt records.AuditEntry
	for _, a := range e.auditEntries("r4") {
		if a.Action == "preempt" {
			preempt = a
		}
	}
	if preempt.Actor != "carol" || preempt.Via != "button" {
		t.Errorf("the admin's preemption is audited as %+v, want carol's, by button", preempt)
	}
	for _, a := range e.auditEntries("r1") {
		if a.Action == "request" && a.Via != "" || a.Action == "preempted" && a.Via != "" {
			t.Errorf("a typed request is audited via %q", a.Via)
		}
	}
}

func containsAll(got []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			return false
		}
	}
	return true
}
