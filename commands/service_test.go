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
		"needs approval: borrowing one GPU": {
			cfg:   pooled,
			setup: [][2]string{{"dave", "request 16xh100 for 1h"}},
			user:  "dave", cmd: "request 1xh100 for 1h", id: "r2",
			want:  decided{State: records.StateAwaitingApproval, Approval: []string{"borrows 1 h100 GPU beyond vision's quota"}},
			dests: []string{"channel #vision r2", "person erin", "sender"},
			says:  []want{{"channel #vision r2", "borrows 1 h100 GPU beyond"}},
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
	// The request that panicked had its ID (it reads the cluster's copy
	// only after deciding): the next is r2.
	check(t, e.do("alice", "request 8xh100 for 1h"), want{"channel #nlp r2", "r2 running"})
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
