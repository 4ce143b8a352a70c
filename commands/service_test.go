package commands_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

// decided is the part of a request that the decision on it sets.
type decided struct {
	State      records.State
	ApprovedBy string
	Approval   []string
	Flavor     string
	Nodes      []string
	Estimate   *records.Estimate
}

func decision(r records.Request) decided {
	return decided{State: r.State, ApprovedBy: r.ApprovedBy, Approval: r.Approval, Flavor: r.AdmittedFlavor, Nodes: r.Nodes, Estimate: r.Estimate}
}

// TestRequest: what a new request becomes, what is stored and audited,
// and who is told what.
func TestRequest(t *testing.T) {
	at := func(h float64) time.Time { return t0.Add(time.Duration(h * float64(time.Hour))) }
	tests := map[string]struct {
		cfg     string
		setup   [][2]string // user, command
		user    string
		channel string // where it is typed
		cmd     string
		id      string
		want    decided
		dests   []string
		says    []want
		audit   []string // of id
		checks  func(t *testing.T, e *env)
	}{
		"admitted now": {
			user: "alice", cmd: "request 8xh100 for 2h reason \"eval\"", id: "r1",
			want:  decided{State: records.StateRunning, Flavor: "h100", Nodes: []string{"h100-b1-r1-n1"}},
			dests: []string{"channel #nlp r1", "sender"},
			says: []want{
				{"channel #nlp r1", "r1 running on h100-b1-r1-n1"},
				{"channel #nlp r1", "Reason: eval"},
				{"channel #nlp r1", "[Release]"},
				{"sender", "r1 running on h100-b1-r1-n1. Updates follow in its thread in #nlp."},
			},
			audit: []string{"alice request r1 ok", "gpubot admitted r1 ok"},
			checks: func(t *testing.T, e *env) {
				r := e.req("r1")
				if !r.AdmittedAt.Equal(t0) || !r.SubmittedAt.Equal(t0) || r.Requester != "alice" || r.Team != "nlp" || r.Priority != "normal" || r.Template != "default" || r.Channel != "#nlp" {
					t.Errorf("r1 = %+v; want alice's, for nlp at normal priority with the default template, admitted and submitted at t0", r)
				}
			},
		},
		"queued with an estimate": {
			setup: [][2]string{{"bob", "request 16xh100 for 2h"}},
			user:  "alice", cmd: "request 8xh100 for 1h", id: "r2",
			// bob's 16 GPUs end between 1h and 2h from now (half to all
			// of what he asked for).
			want: decided{State: records.StateQueued, Estimate: &records.Estimate{
				At: t0, Earliest: at(1), Latest: at(2), Known: true, Position: 1, Reason: "quota"}},
			dests: []string{"channel #nlp r2", "sender"},
			says: []want{
				{"channel #nlp r2", "r2 queued: starts in 1h–2h (09:00–10:00), next in line"},
				{"channel #nlp r2", "Waiting for quota: nlp already uses 16 h100 GPUs against a nominal quota of 16"},
				{"channel #nlp r2", "[Cancel]"},
				{"sender", "r2 queued: starts in 1h–2h"},
			},
			audit: []string{"alice request r2 ok"},
			checks: func(t *testing.T, e *env) {
				r := e.req("r2")
				if diff := cmp.Diff(r.Estimate, r.FirstEstimate); diff != "" {
					t.Errorf("first estimate differs from the posted one (-posted +first):\n%s", diff)
				}
			},
		},
		"queued behind others": {
			setup: [][2]string{{"bob", "request 16xh100 for 2h"}, {"alice", "request 8xh100 for 1h"}},
			user:  "alice", cmd: "request 8xh100 for 3h", id: "r3",
			want: decided{State: records.StateQueued, Estimate: &records.Estimate{
				At: t0, Earliest: at(1), Latest: at(2), Known: true, Position: 2, Reason: "quota"}},
			dests: []string{"channel #nlp r3", "sender"},
			says:  []want{{"channel #nlp r3", "1 ahead of it"}},
			audit: []string{"alice request r3 ok"},
		},
		"needs approval: size": {
			user: "alice", cmd: "request 16xh100 for 1h", id: "r1",
			want:  decided{State: records.StateAwaitingApproval, Approval: []string{"more than 8 GPUs"}},
			dests: []string{"channel #nlp r1", "person bob", "sender"},
			says: []want{
				{"person bob", "alice's request r1 (16× h100 for 1h, team nlp, priority normal) needs your approval: more than 8 GPUs. Its card is in #nlp."},
				{"person bob", "[Approve]"},
				{"channel #nlp r1", "r1 needs approval"},
				{"channel #nlp r1", "Bob (lead of nlp) or carol (admin) can approve it; it holds no quota until then. If approved now it starts at once."},
				{"channel #nlp r1", "[Approve]"},
				{"channel #nlp r1", "[Deny]"},
				{"sender", "r1 needs approval (more than 8 GPUs); bob (lead of nlp) or carol (admin) can approve it. I posted it in #nlp"},
			},
			audit: []string{"alice request r1 ok"},
		},
		"needs approval: priority": {
			user: "dave", cmd: "request 8xh100 for 1h priority high", id: "r1",
			want:  decided{State: records.StateAwaitingApproval, Approval: []string{"priority high"}},
			dests: []string{"channel #vision r1", "person erin", "sender"},
			says:  []want{{"sender", "erin (lead of vision) or carol (admin) can approve it"}, {"person erin", "needs your approval: priority high"}},
			audit: []string{"dave request r1 ok"},
		},
		"needs approval: borrowing": {
			cfg:   pooled,
			setup: [][2]string{{"alice", "request 8xh100 for 1h"}},
			user:  "dave", cmd: "request 24xh100 for 1h", id: "r2",
			want:  decided{State: records.StateAwaitingApproval, Approval: []string{"borrows 8 h100 GPUs beyond vision's quota"}},
			dests: []string{"channel #vision r2", "person erin", "sender"},
			says:  []want{{"channel #vision r2", "If approved now it starts at once."}},
			audit: []string{"dave request r2 ok"},
		},
		"borrowing within the quota needs no approval": {
			cfg:  pooled,
			user: "dave", cmd: "request 16xh100 for 1h", id: "r1",
			want:  decided{State: records.StateRunning, Flavor: "h100", Nodes: []string{"h100-b1-r1-n1", "h100-b1-r1-n2"}},
			dests: []string{"channel #vision r1", "sender"},
			audit: []string{"dave request r1 ok", "gpubot admitted r1 ok"},
		},
		"a lead approves their own": {
			user: "bob", cmd: "request 16xh100 for 1h priority high", id: "r1",
			want:  decided{State: records.StateRunning, ApprovedBy: "bob", Approval: []string{"more than 8 GPUs", "priority high"}, Flavor: "h100", Nodes: []string{"h100-b1-r1-n1", "h100-b1-r1-n2"}},
			dests: []string{"channel #nlp r1", "sender"},
			audit: []string{"bob request r1 ok", "bob approve r1 ok", "gpubot admitted r1 ok"},
			checks: func(t *testing.T, e *env) {
				es := e.auditEntries("r1")
				if es[1].Detail != "self-approved: bob is a lead of nlp" {
					t.Errorf("self-approval audited as %q", es[1].Detail)
				}
			},
		},
		"an admin approves their own, for any team": {
			user: "carol", cmd: "request 16xh100 for 1h team vision", id: "r1",
			want:  decided{State: records.StateRunning, ApprovedBy: "carol", Approval: []string{"more than 8 GPUs"}, Flavor: "h100", Nodes: []string{"h100-b1-r1-n1", "h100-b1-r1-n2"}},
			dests: []string{"channel #vision r1", "sender"},
			audit: []string{"carol request r1 ok", "carol approve r1 ok", "gpubot admitted r1 ok"},
		},
		"typed in the team's channel: no private copy": {
			user: "alice", channel: "#nlp", cmd: "request 8xh100 for 1h", id: "r1",
			want:  decided{State: records.StateRunning, Flavor: "h100", Nodes: []string{"h100-b1-r1-n1"}},
			dests: []string{"channel #nlp r1"},
			audit: []string{"alice request r1 ok", "gpubot admitted r1 ok"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := small
			if tc.cfg != "" {
				cfg = tc.cfg
			}
			e := newEnv(t, parse(t, cfg))
			for _, s := range tc.setup {
				e.do(s[0], s[1])
			}
			outs := e.svc.Handle(e.ctx, commands.Input{User: tc.user, Channel: tc.channel, Text: tc.cmd})
			diff(t, "the request", tc.want, decision(e.req(tc.id)), cmpopts.EquateEmpty())
			diff(t, "destinations", tc.dests, dests(outs))
			check(t, outs, tc.says...)
			diff(t, "audit of "+tc.id, tc.audit, e.audit(tc.id))
			if tc.checks != nil {
				tc.checks(t, e)
			}
		})
	}
}

// TestRequestRefused: a request gpubot cannot accept is answered, audited
// as invalid, and leaves no trace in the store or the cluster.
func TestRequestRefused(t *testing.T) {
	tests := map[string]struct {
		user, cmd string
		says      string
	}{
		"not a member":             {"alice", "request 8xh100 for 1h team vision", "You are not a member of vision, so you cannot request GPUs on its quota. Your teams: nlp."},
		"longer than allowed":      {"alice", "request 8xh100 for 3d", "3d is longer than the longest request allowed (2d)"},
		"more than the quota ever": {"alice", "request 24xh100 for 1h", "24× h100 can never be admitted for nlp"},
		"no such topology domain":  {"alice", "request 16xh100 for 1h topology host", "16 GPUs never fit in one host of h100"},
		"no equal pods":            {"alice", "request 9xh100 for 1h", "9 GPUs cannot be split into equal pods"},
		"in no team":               {"carol", "request 8xh100 for 1h", "You are not in any team, so say which one"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, parse(t, small))
			outs := e.do(tc.user, tc.cmd)
			diff(t, "destinations", []string{"sender"}, dests(outs))
			check(t, outs, want{"sender", tc.says})
			// The example can be sent as it is: no empty field, even for
			// someone in no team (the first team is shown).
			if got := show(outs); (strings.Contains(got, "Example:") || name == "in no team") &&
				!regexp.MustCompile(`Example: /gpu request 8xh100 for 4h team (nlp|vision)\n`).MatchString(got) {
				t.Errorf("the reply's example has an empty or missing field:\n%s", got)
			}
			diff(t, "requests", map[string]records.Request{}, e.requests())
			diff(t, "workloads", []string(nil), e.workloads())
			a := e.lastAudit()
			if a.Actor != tc.user || a.Action != "request" || a.Outcome != "invalid" || !strings.Contains(tc.says, strings.TrimSuffix(a.Detail, ".")[:20]) {
				t.Errorf("audited as %+v; want %s request invalid with the reason", a, tc.user)
			}
		})
	}
}

// actor names who acts on a request, relative to it.
type actor string

const (
	requester  actor = "requester"
	member     actor = "another member of the team"
	lead       actor = "lead of the team"
	otherLead  actor = "lead of another team"
	admin      actor = "admin"
	nobodyKnow actor = "unknown user"
)

// TestAuthorization presses every action as every kind of person: those
// allowed change the request, the others change nothing and are audited
// as refused.
func TestAuthorization(t *testing.T) {
	// nlp's only member is alice, so the other member is another team's.
	nlp := map[actor]string{requester: "alice", member: "dave", lead: "bob", otherLead: "erin", admin: "carol", nobodyKnow: "U0NOBODY"}
	vision := map[actor]string{requester: "dave", member: "alice", lead: "erin", otherLead: "bob", admin: "carol", nobodyKnow: "U0NOBODY"}

	type setup struct {
		cmds   [][2]string
		people map[actor]string
		id     string
	}
	awaiting := setup{cmds: [][2]string{{"alice", "request 16xh100 for 1h"}}, people: nlp, id: "r1"}
	running := setup{cmds: [][2]string{{"alice", "request 8xh100 for 1h"}}, people: nlp, id: "r1"}
	queued := setup{cmds: [][2]string{{"bob", "request 16xh100 for 2h"}, {"alice", "request 8xh100 for 1h"}}, people: nlp, id: "r2"}
	// vision never preempts on its own; erin's low-priority work blocks
	// dave's request until an admin preempts it.
	blocked := setup{cmds: [][2]string{{"erin", "request 16xh100 for 4h priority low"}, {"dave", "request 8xh100 for 1h"}}, people: vision, id: "r2"}

	actions := map[commands.Verb]struct {
		setup   setup
		arg     string
		allowed []actor
		after   func(t *testing.T, e *env, who string)
	}{
		commands.VerbApprove: {setup: awaiting, allowed: []actor{lead, admin}, after: func(t *testing.T, e *env, who string) {
			if r := e.req("r1"); r.State != records.StateRunning || r.ApprovedBy != who {
				t.Errorf("r1 is %s approved by %q; want running, approved by %s", r.State, r.ApprovedBy, who)
			}
		}},
		commands.VerbDeny: {setup: awaiting, arg: "too big", allowed: []actor{lead, admin}, after: func(t *testing.T, e *env, who string) {
			r := e.req("r1")
			diff(t, "r1", []string{"denied", who, "too big", "denied by " + who}, []string{string(r.State), r.DeniedBy, r.DenyReason, r.EndReason})
		}},
		commands.VerbCancel: {setup: queued, allowed: []actor{requester, lead, admin}, after: func(t *testing.T, e *env, who string) {
			r := e.req("r2")
			diff(t, "r2", []string{"cancelled", "cancelled by " + who}, []string{string(r.State), r.EndReason})
		}},
		commands.VerbRelease: {setup: running, allowed: []actor{requester, lead, admin}, after: func(t *testing.T, e *env, who string) {
			r := e.req("r1")
			diff(t, "r1", []string{"finished", "released by " + who}, []string{string(r.State), r.EndReason})
		}},
		commands.VerbExtend: {setup: running, arg: "1h", allowed: []actor{requester, lead, admin}, after: func(t *testing.T, e *env, who string) {
			if r := e.req("r1"); r.Duration != 2*time.Hour || r.State != records.StateRunning {
				t.Errorf("r1 is %s for %s; want running for 2h", r.State, r.Duration)
			}
		}},
		commands.VerbPreempt: {setup: blocked, allowed: []actor{admin}, after: func(t *testing.T, e *env, who string) {
			diff(t, "states", []records.State{records.StateQueued, records.StateRunning}, []records.State{e.req("r1").State, e.req("r2").State})
		}},
	}
	for verb, a := range actions {
		for _, who := range []actor{requester, member, lead, otherLead, admin, nobodyKnow} {
			t.Run(string(verb)+" by "+string(who), func(t *testing.T) {
				e := newEnv(t, parse(t, small))
				for _, c := range a.setup.cmds {
					e.do(c[0], c[1])
				}
				user := a.setup.people[who]
				before, workloads, audit := e.requests(), e.workloads(), e.audit("")
				outs := e.press(user, verb, a.setup.id, a.arg)
				if slicesContains(a.allowed, who) {
					a.after(t, e, user)
					if got, want := e.audit(a.setup.id), user+" "+string(verb)+" "+a.setup.id+" ok"; !slicesContains(got, want) {
						t.Errorf("audit of %s = %v; want %q", a.setup.id, got, want)
					}
					return
				}
				diff(t, "requests after a refusal", before, e.requests())
				diff(t, "workloads after a refusal", workloads, e.workloads())
				diff(t, "destinations", []string{"sender"}, dests(outs))
				target := a.setup.id
				wantAudit := append(audit, strings.Join([]string{user, string(verb), target, "refused"}, " "))
				diff(t, "audit", wantAudit, e.audit(""))
				if who == nobodyKnow {
					check(t, outs, want{"sender", "I don't know who you are (U0NOBODY)"})
				} else {
					check(t, outs, want{"sender", "Nothing was changed."}, want{"sender", "Only "})
				}
			})
		}
	}
}

// TestRefusalWording: who is named as allowed.
func TestRefusalWording(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 16xh100 for 1h")
	check(t, e.press("dave", commands.VerbApprove, "r1", ""), want{"sender", "Only bob (lead of nlp) or carol (admin) can approve r1. Nothing was changed."})
	check(t, e.do("erin", "cancel r1"), want{"sender", "Only alice (who asked for it), bob (lead of nlp) or carol (admin) can cancel r1. Nothing was changed."})
	check(t, e.do("bob", "preempt r1"), want{"sender", "Only admins (carol) can preempt other work for r1. Nothing was changed."})
}

// TestActions: what each allowed action tells whom.
func TestActions(t *testing.T) {
	tests := map[string]struct {
		setup [][2]string
		user  string
		press *commands.Action
		cmd   string
		dests []string
		says  []want
	}{
		"approve": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}},
			user:  "bob", press: &commands.Action{Name: commands.VerbApprove, Request: "r1"},
			dests: []string{"thread r1", "person alice", "card r1", "sender"},
			says: []want{
				{"thread r1", "Approved by bob."},
				{"person alice", "bob approved your request r1 (16× h100 for 1h, team nlp, priority normal)."},
				{"card r1", "r1 running on h100-b1-r1-n1, h100-b1-r1-n2"},
				{"sender", "Approved r1."},
			},
		},
		"approve into the queue": {
			setup: [][2]string{{"bob", "request 8xh100 for 2h"}, {"alice", "request 16xh100 for 1h"}},
			user:  "carol", cmd: "approve r2",
			dests: []string{"thread r2", "person alice", "card r2", "sender"},
			says: []want{
				{"card r2", "r2 queued: starts in 1h–2h (09:00–10:00), next in line"},
				{"card r2", "Approved by carol."},
			},
		},
		"deny": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}},
			user:  "bob", cmd: "deny r1 use 8 GPUs",
			dests: []string{"thread r1", "card r1", "person alice", "sender"},
			says: []want{
				{"thread r1", "Denied by bob: use 8 GPUs"},
				{"card r1", "r1 denied"},
				{"person alice", "Your request r1 (16× h100 for 1h, team nlp, priority normal) was denied by bob: use 8 GPUs."},
				{"sender", "Denied r1."},
			},
		},
		"cancel a queued request": {
			setup: [][2]string{{"bob", "request 16xh100 for 2h"}, {"alice", "request 8xh100 for 1h"}},
			user:  "alice", cmd: "cancel r2",
			dests: []string{"thread r2", "card r2", "sender"},
			says: []want{
				{"thread r2", "Cancelled by alice before it started."},
				{"card r2", "r2 cancelled"},
				{"sender", "r2: cancelled by alice before it started."},
			},
		},
		"cancel a request awaiting approval": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}},
			user:  "alice", press: &commands.Action{Name: commands.VerbCancel, Request: "r1"},
			dests: []string{"thread r1", "card r1", "sender"},
			says:  []want{{"sender", "r1: cancelled by alice before it started."}},
		},
		"cancel a running request releases it": {
			setup: [][2]string{{"alice", "request 8xh100 for 2h"}},
			user:  "bob", cmd: "cancel r1",
			dests: []string{"thread r1", "card r1", "sender"},
			says:  []want{{"sender", "r1: released by bob after 0m; its 8 GPUs are free again. It was running, so it was released."}},
		},
		"release admits what waited": {
			setup: [][2]string{{"bob", "request 16xh100 for 2h"}, {"alice", "request 8xh100 for 1h"}},
			user:  "bob", cmd: "release r1",
			dests: []string{"thread r1", "card r1", "sender", "thread r2", "card r2"},
			says: []want{
				{"thread r1", "Released by bob after 0m; its 16 GPUs are free again."},
				{"thread r2", "Admitted at once on h100-b1-r1-n1"},
				{"card r2", "r2 running"},
			},
		},
		"release a request that has not started cancels it": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}},
			user:  "alice", cmd: "release r1",
			dests: []string{"thread r1", "card r1", "sender"},
			says:  []want{{"sender", "r1: cancelled by alice before it started. It had not started, so it was cancelled."}},
		},
		"extend a running request": {
			setup: [][2]string{{"alice", "request 8xh100 for 2h"}},
			user:  "alice", press: &commands.Action{Name: commands.VerbExtend, Request: "r1", Arg: "1h30m"},
			dests: []string{"thread r1", "card r1", "sender"},
			says: []want{
				{"thread r1", "Extended by 1h30m by alice; now ends 11:30."},
				{"sender", "r1: extended by 1h30m by alice; now ends 11:30."},
			},
		},
		"extend a request awaiting approval": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}},
			user:  "alice", cmd: "extend r1 2h",
			dests: []string{"thread r1", "card r1", "sender"},
			says:  []want{{"thread r1", "Extended by 2h by alice; now 3h in all."}},
		},
		"extend beyond the maximum": {
			setup: [][2]string{{"alice", "request 8xh100 for 1d"}},
			user:  "alice", cmd: "extend r1 1d1h",
			dests: []string{"sender"},
			says:  []want{{"sender", "r1 would then run 2d1h, longer than the 2d allowed. Nothing was changed."}},
		},
		"extend with a bad duration": {
			setup: [][2]string{{"alice", "request 8xh100 for 1d"}},
			user:  "alice", press: &commands.Action{Name: commands.VerbExtend, Request: "r1", Arg: "soon"},
			dests: []string{"sender"},
			says:  []want{{"sender", "Cannot extend r1: invalid duration \"soon\""}},
		},
		"act on no such request": {
			user: "alice", cmd: "cancel r99",
			dests: []string{"sender"},
			says:  []want{{"sender", "There is no request r99. /gpu status lists yours."}},
		},
		"an unknown button": {
			setup: [][2]string{{"alice", "request 8xh100 for 1d"}},
			user:  "alice", press: &commands.Action{Name: commands.VerbStatus, Request: "r1"},
			dests: []string{"sender"},
			says:  []want{{"sender", `That button ("status") is not one gpubot knows; nothing was changed.`}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, parse(t, small))
			for _, c := range tc.setup {
				e.do(c[0], c[1])
			}
			var outs []commands.Output
			if tc.press != nil {
				outs = e.press(tc.user, tc.press.Name, tc.press.Request, tc.press.Arg)
			} else {
				outs = e.do(tc.user, tc.cmd)
			}
			diff(t, "destinations", tc.dests, dests(outs))
			check(t, outs, tc.says...)
		})
	}
}

// TestExtendTypedKeepsMinutes: a typed extension is added exactly, not as
// it is shown.
func TestExtendTypedKeepsMinutes(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 2h")
	e.do("alice", "extend r1 1d30m")
	if got, want := e.req("r1").Duration, 26*time.Hour+30*time.Minute; got != want {
		t.Errorf("r1 asks for %s after extending 2h by 1d30m, want %s", got, want)
	}
	e.press("alice", commands.VerbExtend, "r1", "15m")
	if got, want := e.req("r1").Duration, 26*time.Hour+45*time.Minute; got != want {
		t.Errorf("r1 asks for %s after pressing extend 15m, want %s", got, want)
	}
}

// TestExtendRefusedByTheCluster: when the cluster cannot extend (Kueue
// fixes an admitted workload's time limit), the user is told why, is not
// asked to try again, and the request keeps its duration.
func TestExtendRefusedByTheCluster(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 2h")
	e.cluster.failApply = &commands.Refusal{Reason: "Kueue fixes the limit at admission"}
	outs := e.do("alice", "extend r1 1h")
	e.cluster.failApply = nil
	check(t, outs, want{"sender", "r1 cannot be extended: Kueue fixes the limit at admission. Nothing was changed."})
	checkNot(t, outs, want{"sender", "try again"}, want{"thread:r1", "Extended"})
	if got, want := e.req("r1").Duration, 2*time.Hour; got != want {
		t.Errorf("r1 asks for %s after a refused extend, want %s", got, want)
	}
	if a := e.lastAudit(); a.Action != "extend" || a.Outcome != "refused" {
		t.Errorf("last audit entry = %+v, want a refused extend", a)
	}
}

// TestStaleActions: an action that no longer applies is answered, changes
// nothing, and is audited as refused.
func TestStaleActions(t *testing.T) {
	tests := map[string]struct {
		setup   [][2]string
		advance time.Duration
		user    string
		action  commands.Action
		says    string
	}{
		"approve twice": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}, {"bob", "approve r1"}},
			user:  "carol", action: commands.Action{Name: commands.VerbApprove, Request: "r1"},
			says: "r1 was already approved by bob; it is running.",
		},
		"deny after approval": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}, {"bob", "approve r1"}},
			user:  "bob", action: commands.Action{Name: commands.VerbDeny, Request: "r1"},
			says: "r1 was already approved by bob; it is running.",
		},
		"approve what needs no approval": {
			setup: [][2]string{{"alice", "request 8xh100 for 1h"}},
			user:  "bob", action: commands.Action{Name: commands.VerbApprove, Request: "r1"},
			says: "r1 does not need approval; it is running.",
		},
		"release a finished request": {
			setup:   [][2]string{{"alice", "request 8xh100 for 1h"}},
			advance: 2 * time.Hour,
			user:    "alice", action: commands.Action{Name: commands.VerbRelease, Request: "r1"},
			says: "r1 is already finished (09:00).",
		},
		"extend a finished request": {
			setup:   [][2]string{{"alice", "request 8xh100 for 1h"}},
			advance: 2 * time.Hour,
			user:    "alice", action: commands.Action{Name: commands.VerbExtend, Request: "r1", Arg: "1h"},
			says: "r1 is already finished (09:00).",
		},
		"cancel twice": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}, {"alice", "cancel r1"}},
			user:  "alice", action: commands.Action{Name: commands.VerbCancel, Request: "r1"},
			says: "r1 is already cancelled (08:00).",
		},
		"approve a denied request": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}, {"bob", "deny r1"}},
			user:  "carol", action: commands.Action{Name: commands.VerbApprove, Request: "r1"},
			says: "r1 is already denied (08:00).",
		},
		"preempt for a running request": {
			setup: [][2]string{{"alice", "request 8xh100 for 1h"}},
			user:  "carol", action: commands.Action{Name: commands.VerbPreempt, Request: "r1"},
			says: "r1 is already running.",
		},
		"preempt for a request awaiting approval": {
			setup: [][2]string{{"alice", "request 16xh100 for 1h"}},
			user:  "carol", action: commands.Action{Name: commands.VerbPreempt, Request: "r1"},
			says: "r1 is waiting for approval; approve it first.",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, parse(t, small))
			for _, c := range tc.setup {
				e.do(c[0], c[1])
			}
			e.advance(tc.advance)
			before, workloads, usage := e.requests(), e.workloads(), e.usage()
			outs := e.press(tc.user, tc.action.Name, tc.action.Request, tc.action.Arg)
			diff(t, "destinations", []string{"sender"}, dests(outs))
			check(t, outs, want{"sender", tc.says + " Nothing was changed."})
			diff(t, "requests", before, e.requests())
			diff(t, "workloads", workloads, e.workloads())
			diff(t, "usage", usage, e.usage())
			a := e.lastAudit()
			got := []string{a.Actor, a.Action, a.Target, a.Outcome, a.Detail}
			diff(t, "last audit entry", []string{tc.user, string(tc.action.Name), tc.action.Request, "refused", "stale: " + tc.says}, got)
		})
	}
}

// TestInputsThatAreNotActions: unknown people, bad commands and track
// are answered privately and audited.
func TestInputsThatAreNotActions(t *testing.T) {
	tests := map[string]struct {
		in    commands.Input
		says  []string
		audit string // actor action target outcome
		code  bool   // the reply shows the input with a caret
	}{
		"unknown user": {
			in:    commands.Input{User: "U0NOBODY", Text: "status"},
			says:  []string{"I don't know who you are (U0NOBODY).", "Slack user ID"},
			audit: "U0NOBODY command refused",
		},
		"unknown user pressing a button": {
			in:    commands.Input{User: "U0NOBODY", Action: &commands.Action{Name: commands.VerbApprove, Request: "r1"}},
			says:  []string{"I don't know who you are (U0NOBODY)."},
			audit: "U0NOBODY approve r1 refused",
		},
		"a parse error": {
			in:    commands.Input{User: "alice", Text: "/gpu reqest 8xh100 for 4h"},
			says:  []string{"Unknown command 'reqest'; did you mean request?", "Example: /gpu request"},
			audit: "alice command invalid",
			code:  true,
		},
		"a bad duration": {
			in:    commands.Input{User: "U0ALICE", Text: "request 8xh100 for 4x"},
			says:  []string{"4x"},
			audit: "alice command invalid",
			code:  true,
		},
		"a button gpubot could not read": {
			in:    commands.Input{User: "U0ALICE", Unreadable: &commands.Unreadable{What: "button", Why: "its value names no request", Target: "r4"}},
			says:  []string{"Sorry, gpubot couldn't understand that button (its value names no request). Nothing was changed.", "/gpu status shows your requests with fresh buttons."},
			audit: "alice button r4 invalid",
		},
		"a command gpubot could not read": {
			in:    commands.Input{User: "alice", Unreadable: &commands.Unreadable{What: "command", Why: "its text is a list, not a string"}, Text: "request 8xh100 for 1h"},
			says:  []string{"couldn't understand that command (its text is a list, not a string)", "/gpu help"},
			audit: "alice command invalid",
		},
		"an unknown user sending something unreadable": {
			in:    commands.Input{User: "U0NOBODY", Unreadable: &commands.Unreadable{What: "form", Why: "bad"}},
			says:  []string{"I don't know who you are (U0NOBODY)."},
			audit: "U0NOBODY form refused",
		},
		"a reason over the limit": {
			in:    commands.Input{User: "alice", Text: `request 8xh100 for 1h reason "` + strings.Repeat("é", commands.MaxReason+1) + `"`},
			says:  []string{"The reason is 501 characters long; keep it to 500"},
			audit: "alice command invalid",
			code:  true,
		},
		"an unquoted reason over the limit": {
			in:    commands.Input{User: "alice", Text: `request 8xh100 for 1h reason ` + strings.Repeat("x", 600)},
			says:  []string{"The reason is 600 characters long; keep it to 500"},
			audit: "alice command invalid",
			code:  true,
		},
		"a 100 KB reason": {
			in:    commands.Input{User: "alice", Text: `request 8xh100 for 1h reason ` + strings.Repeat("x", 100000)},
			says:  []string{"This command is 100029 characters long; gpubot reads commands of up to 2000 characters, with a reason of up to 500"},
			audit: "alice command invalid",
			code:  true,
		},
		"a denial's reason over the limit": {
			in:    commands.Input{User: "bob", Text: `deny r1 ` + strings.Repeat("no ", 200)},
			says:  []string{"The reason is 599 characters long; keep it to 500"},
			audit: "bob command invalid",
			code:  true,
		},
		"track needs a cluster": {
			in:    commands.Input{User: "alice", Text: "track nlp/llama"},
			says:  []string{"track follows a workload submitted outside gpubot, so it needs a Kubernetes cluster", "to track nlp/llama."},
			audit: "alice track nlp/llama refused",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, parse(t, small))
			outs := e.svc.Handle(e.ctx, tc.in)
			diff(t, "destinations", []string{"sender"}, dests(outs))
			for _, s := range tc.says {
				check(t, outs, want{"sender", s})
			}
			hasCode := false
			for _, b := range outs[0].Reply.Blocks {
				hasCode = hasCode || b.Kind == commands.BlockCode && strings.Contains(b.Text, "^")
			}
			if hasCode != tc.code {
				t.Errorf("reply shows the input with a caret: %v, want %v", hasCode, tc.code)
			}
			diff(t, "audit", []string{tc.audit}, e.audit(""))
			diff(t, "requests", map[string]records.Request{}, e.requests())
		})
	}
}

// TestHandlerPanic: a panic while handling gives the sender a plain
// answer, is logged with its stack, and leaves the service usable (the
// write section it panicked in is left).
func TestHandlerPanic(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.cluster.panicSnapshot = true
	outs := e.do("alice", "request 8xh100 for 1h")
	diff(t, "destinations", []string{"sender"}, dests(outs))
	check(t, outs, want{"sender", "Something went wrong on gpubot's side while handling that (ref E"})
	checkNot(t, outs, want{"sender", "snapshot exploded"}, want{"sender", "goroutine"})
	log := e.log.String()
	for _, s := range []string{"panic handling input", "snapshot exploded", "user=alice", "commands_test.(*cluster).Snapshot"} {
		if !strings.Contains(log, s) {
			t.Errorf("the log lacks %q:\n%s", s, log)
		}
	}
	ref := strings.TrimSuffix(strings.SplitN(strings.SplitN(outs[0].Reply.Text, "(ref ", 2)[1], ")", 2)[0], ")")
	if !strings.Contains(log, "ref="+ref) {
		t.Errorf("the log does not name the reference %s the user was given", ref)
	}

	if outs := e.svc.Observe(e.ctx, nil); len(outs) != 0 {
		t.Errorf("Observe while the cluster panics said %v", dests(outs))
	}
	if !strings.Contains(e.log.String(), "panic observing the cluster") {
		t.Errorf("a panic in Observe was not logged")
	}

	e.cluster.panicSnapshot = false
	check(t, e.do("alice", "capacity"), want{"sender", "Capacity now, per flavor."})
	check(t, e.do("alice", "request 8xh100 for 1h"), want{"channel #nlp r1", "r1 running"})
}

func slicesContains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestRequestTypedInTheTeamChannelByID: Slack gives the channel's ID and
// name; a configured "#nlp" is the same channel, so no private copy.
func TestRequestTypedInTheTeamChannelByID(t *testing.T) {
	e := newEnv(t, parse(t, small))
	outs := e.svc.Handle(e.ctx, commands.Input{User: "alice", Channel: "C0NLP", ChannelName: "nlp", Text: "/gpu request 8xh100 for 1h"})
	diff(t, "destinations", []string{"channel #nlp r1"}, dests(outs))
	outs = e.svc.Handle(e.ctx, commands.Input{User: "alice", Channel: "C0OTHER", ChannelName: "random", Text: "/gpu request 8xh100 for 1h"})
	diff(t, "destinations from another channel", []string{"channel #nlp r2", "sender"}, dests(outs))
}

// TestDenyButtonReasonLimit: a denial's reason that comes with a press
// (a button's value) is held to MaxReason like a typed one.
func TestDenyButtonReasonLimit(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 16xh100 for 1h")
	outs := e.press("bob", commands.VerbDeny, "r1", strings.Repeat("x", commands.MaxReason+1))
	check(t, outs, want{"sender", "The reason is 501 characters long; keep it to 500. Nothing was changed."})
	if r := e.requests()["r1"]; r.State != records.StateAwaitingApproval {
		t.Errorf("r1 is %s after a refused denial", r.State)
	}
	got := e.lastAudit()
	diff(t, "last audit entry", []string{"bob", "deny", "r1", "invalid"}, []string{got.Actor, got.Action, got.Target, got.Outcome})
}

// failingGets is a RequestStore whose GetRequest fails as a closed store
// does, once armed.
type failingGets struct {
	commands.RequestStore
	armed bool
}

func (f *failingGets) GetRequest(ctx context.Context, id string) (records.Request, error) {
	if f.armed {
		return records.Request{}, fmt.Errorf("getting request %s: %w", id, store.ErrClosed)
	}
	return f.RequestStore.GetRequest(ctx, id)
}

// TestAStoreFailureIsNotAMissingRequest: a store that cannot be read says
// so; only a request the store does not have is "no request".
func TestAStoreFailureIsNotAMissingRequest(t *testing.T) {
	f := &failingGets{}
	e := newEnv(t, parse(t, small), withRequests(func(rs commands.RequestStore) commands.RequestStore { f.RequestStore = rs; return f }))
	e.do("alice", "request 8xh100 for 1h")
	check(t, e.do("alice", "cancel r9"), want{"sender", "There is no request r9."})
	f.armed = true
	for _, text := range []string{"cancel r1", "status r1"} {
		outs := e.do("alice", text)
		check(t, outs, want{"sender", "failed on gpubot's side"})
		checkNot(t, outs, want{"sender", "There is no request"})
	}
	f.armed = false
	if r := e.req("r1"); r.State != records.StateRunning {
		t.Errorf("r1 is %s after a failed read; want it left running", r.State)
	}
}

// failingCommit fails the next commits, as a full disk would.
type failingCommit struct {
	commands.Committer
	fail int
}

func (f *failingCommit) Commit(ctx context.Context, w records.Writes, at time.Time) ([]uint64, error) {
	if f.fail > 0 {
		f.fail--
		return nil, fmt.Errorf("committing: %w", errors.New("no space left on device"))
	}
	return f.Committer.Commit(ctx, w, at)
}

// TestAFailedCommitKeepsNothing: when the decision cannot be saved, the
// sender is told so, no record is kept, and the simulated cluster drops
// the change it made (the cleanup checks the cluster against the
// records); the next try works.
func TestAFailedCommitKeepsNothing(t *testing.T) {
	f := &failingCommit{}
	e := newEnv(t, parse(t, small), func(o *envOptions) {
		o.commit = func(c commands.Committer) commands.Committer { f.Committer = c; return f }
	})
	e.do("alice", "request 8xh100 for 1h")
	f.fail = 1
	outs := e.do("alice", "release r1")
	diff(t, "destinations", []string{"sender"}, dests(outs))
	check(t, outs, want{"sender", "Sorry, saving that failed on gpubot's side"})
	if r := e.req("r1"); r.State != records.StateRunning {
		t.Errorf("r1 is %s after a release that could not be saved; want it running", r.State)
	}
	if ws := e.workloads(); len(ws) != 1 {
		t.Errorf("workloads %v, want r1 still running", ws)
	}
	check(t, e.do("alice", "release r1"), want{"sender", "r1: released by alice"})
}
