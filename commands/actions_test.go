package commands_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

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
