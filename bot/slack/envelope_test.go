package slackbot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// syncBuffer is a log sink safe for the adapter's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// unreadableEcho answers an unreadable input as the service would (in
// private, saying why) and anything else with "ok"; it records the
// inputs.
type unreadableEcho struct {
	a  *Adapter
	mu sync.Mutex
	in []commands.Input
}

func (u *unreadableEcho) Submit(ev bot.Event) error {
	u.mu.Lock()
	u.in = append(u.in, ev.Input)
	u.mu.Unlock()
	text := "ok"
	if r := ev.Input.Unreadable; r != nil {
		text = "couldn't understand that " + r.What + " (" + r.Why + ")"
	}
	return u.a.Send(context.Background(), commands.Output{
		To:    commands.Destination{Kind: commands.ToSender, User: ev.Input.User, Channel: ev.Input.Channel},
		Reply: commands.Reply{Text: text},
	})
}

func (u *unreadableEcho) inputs() []commands.Input {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]commands.Input(nil), u.in...)
}

func newTestAdapter(t *testing.T, fake *slackfake.Server, log *syncBuffer, opts ...Option) *Adapter {
	t.Helper()
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))}, opts...)
	return New(Config{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: fake.APIURL()},
		stubService{}, &memThreads{m: map[string]records.Thread{}}, opts...)
}

const secretToken = "SECRETverificationTOKEN"

func payload(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestMalformedEnvelopes: every envelope with an envelope_id is acked
// exactly once within Slack's 3 s, whatever its payload; each gets a log
// line without the payload (no verification token, nothing typed); the
// person, where the payload names one, is answered in private.
func TestMalformedEnvelopes(t *testing.T) {
	fake := slackfake.Start(t)
	var log syncBuffer
	a := newTestAdapter(t, fake, &log)
	in := &unreadableEcho{a: a}
	wctx := runAdapter(t, a, in)
	if err := fake.WaitFor(wctx, func() bool { return a.Ready() == nil }); err != nil {
		t.Fatal(err)
	}
	type answer struct{ user, says string }
	cases := map[string]struct {
		env    slackfake.RawEnvelope
		answer *answer
	}{
		"slash command: payload a string": {env: slackfake.RawEnvelope{Type: "slash_commands", Payload: payload("request 8xh100 for 4h"), AcceptsResponsePayload: true}},
		"slash command: payload null":     {env: slackfake.RawEnvelope{Type: "slash_commands", Payload: json.RawMessage(`null`)}},
		"slash command: no payload":       {env: slackfake.RawEnvelope{Type: "slash_commands"}},
		"slash command: text an array": {
			env:    slackfake.RawEnvelope{Type: "slash_commands", Payload: payload(map[string]any{"token": secretToken, "user_id": "U0ALICE", "channel_id": "C0GPU", "command": "/gpu", "text": []string{"request", "8xh100 typed secret"}})},
			answer: &answer{"U0ALICE", "couldn't understand that command (its text is an array, not a string)"},
		},
		"slash command: text a number": {
			env:    slackfake.RawEnvelope{Type: "slash_commands", Payload: payload(map[string]any{"token": secretToken, "user_id": "U0BOB", "channel_id": "C0GPU", "text": 42})},
			answer: &answer{"U0BOB", "couldn't understand that command (its text is a number, not a string)"},
		},
		"slash command: user_id a number": {env: slackfake.RawEnvelope{Type: "slash_commands", Payload: payload(map[string]any{"token": secretToken, "user_id": 7, "text": "status"})}},
		"slash command: no user":          {env: slackfake.RawEnvelope{Type: "slash_commands", Payload: payload(map[string]any{"token": secretToken, "text": "status"})}},
		"interactive: payload a string":   {env: slackfake.RawEnvelope{Type: "interactive", Payload: payload("block_actions")}},
		"view submission: callback_id a number": {
			env:    slackfake.RawEnvelope{Type: "interactive", Payload: payload(map[string]any{"type": "view_submission", "token": secretToken, "user": map[string]any{"id": "U0ALICE"}, "view": map[string]any{"id": "V1", "callback_id": 5}})},
			answer: &answer{"U0ALICE", "couldn't understand that form (its view.callback_id is a number, not a string)"},
		},
		"block actions: actions not a list": {
			env:    slackfake.RawEnvelope{Type: "interactive", Payload: payload(map[string]any{"type": "block_actions", "token": secretToken, "user": map[string]any{"id": "U0CAROL"}, "channel": map[string]any{"id": "C0GPU"}, "actions": "approve"})},
			answer: &answer{"U0CAROL", "couldn't understand that button ("},
		},
		"interactive: a kind gpubot does not offer": {env: slackfake.RawEnvelope{Type: "interactive", Payload: payload(map[string]any{"type": "message_action", "user": map[string]any{"id": "U0ALICE"}})}},
		"events api: payload a string":              {env: slackfake.RawEnvelope{Type: "events_api", Payload: payload("app_home_opened")}},
		"events api: event a number":                {env: slackfake.RawEnvelope{Type: "events_api", Payload: payload(map[string]any{"type": "event_callback", "event_id": "Ev1", "event": 5})}},
		"an unknown envelope type": {
			env:    slackfake.RawEnvelope{Type: "workflow_step", Payload: payload(map[string]any{"user_id": "U0CAROL", "channel_id": "C0GPU", "token": secretToken})},
			answer: &answer{"U0CAROL", `couldn't understand that message (gpubot does not know envelopes of type "workflow_step")`},
		},
		"no type": {env: slackfake.RawEnvelope{Payload: payload(map[string]any{"token": secretToken})}},
	}
	ids := map[string]string{}
	for name, tc := range cases {
		ids[name] = fake.SendRaw(tc.env)
	}
	// Frames that are not envelopes: a type that is a number, an
	// envelope_id that is a number, not JSON at all.
	for _, f := range []string{`{"envelope_id":"e-type-number","type":5,"payload":{}}`, `{"envelope_id":5,"type":"slash_commands","payload":{}}`, `{`, `[1,2]`} {
		if !fake.SendFrame([]byte(f)) {
			t.Fatal("no socket took a frame")
		}
	}
	// A good command after all that: the connection still works.
	good := fake.SlashCommand("U0ALICE", "C0GPU", "status")
	if _, err := fake.WaitAck(wctx, good); err != nil {
		t.Fatal(err)
	}
	for name, id := range ids {
		if _, err := fake.WaitAck(wctx, id); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := fake.WaitFor(wctx, func() bool {
		for _, a := range fake.Acks() {
			if a.EnvelopeID == "e-type-number" {
				return true
			}
		}
		return false
	}); err != nil {
		t.Errorf("the envelope whose type is a number was not acked: %v", err)
	}
	for name, tc := range cases {
		if tc.answer == nil {
			continue
		}
		if err := fake.WaitFor(wctx, func() bool {
			for _, m := range append(fake.Ephemerals(tc.answer.user), fake.DMs(tc.answer.user)...) {
				if strings.Contains(m.Text, tc.answer.says) {
					return true
				}
			}
			return false
		}); err != nil {
			t.Errorf("%s: no private answer to %s saying %q: %v", name, tc.answer.user, tc.answer.says, err)
		}
	}
	if err := a.q.Drain(wctx); err != nil {
		t.Fatal(err)
	}
	acks := map[string]int{}
	for _, a := range fake.Acks() {
		acks[a.EnvelopeID]++
	}
	for name, id := range ids {
		if acks[id] != 1 {
			t.Errorf("%s: acked %d times", name, acks[id])
		}
	}
	if late := fake.Unacked(); len(late) > 0 {
		t.Errorf("%d envelopes missed the 3 s ack deadline: %+v", len(late), late)
	}
	answered := 0
	for _, in := range in.inputs() {
		if in.Unreadable != nil {
			answered++
		}
	}
	if answered != 5 {
		t.Errorf("%d unreadable inputs submitted, want 5: %+v", answered, in.inputs())
	}
	out := log.String()
	for _, secret := range []string{secretToken, "typed secret", "request 8xh100 for 4h"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log contains %q:\n%s", secret, out)
		}
	}
	if n := strings.Count(out, "a Slack envelope gpubot could not read; acked it"); n != 15 {
		t.Errorf("%d log lines for unreadable envelopes, want 15:\n%s", n, out)
	}
	for _, want := range []string{"without an envelope_id", "a Socket Mode message gpubot cannot read", "token: a string", "text: an array"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

// TestEnvelopeOnTheOldSocket: an envelope Slack sends on a socket right
// after asking to leave it (refresh_requested) is read, acked and handled
// once, while a new socket is opened.
func TestEnvelopeOnTheOldSocket(t *testing.T) {
	fake := slackfake.Start(t)
	var log syncBuffer
	a := newTestAdapter(t, fake, &log)
	in := &unreadableEcho{a: a}
	wctx := runAdapter(t, a, in)
	if err := fake.WaitFor(wctx, func() bool { return a.Ready() == nil }); err != nil {
		t.Fatal(err)
	}
	ids := fake.DisconnectThen("refresh_requested",
		fake.SlashCommandEnvelope("U0ALICE", "C0GPU", "status one"),
		fake.SlashCommandEnvelope("U0BOB", "C0GPU", "status two"),
	)
	if len(ids) != 2 {
		t.Fatalf("DisconnectThen sent %d envelopes", len(ids))
	}
	for _, id := range ids {
		ack, err := fake.WaitAck(wctx, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("envelope %s acked on socket %d after %v", id, ack.Conn, ack.Latency)
	}
	if err := fake.WaitFor(wctx, func() bool {
		return len(fake.Ephemerals("U0ALICE")) == 1 && len(fake.Ephemerals("U0BOB")) == 1
	}); err != nil {
		t.Fatalf("answers: %v", err)
	}
	if err := fake.WaitFor(wctx, func() bool { return fake.ConnectCount() >= 2 && a.Ready() == nil }); err != nil {
		t.Fatalf("no new socket after refresh_requested: %v", err)
	}
	// The new socket works, and the old one is gone.
	if _, err := fake.WaitAck(wctx, fake.SlashCommand("U0ALICE", "C0GPU", "status three")); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitFor(wctx, func() bool { return fake.Connections() == 1 }); err != nil {
		t.Errorf("the old socket is still open: %d sockets", fake.Connections())
	}
	var texts []string
	for _, in := range in.inputs() {
		texts = append(texts, in.Text)
	}
	if got := strings.Join(texts, ","); got != "status one,status two,status three" {
		t.Errorf("handled %q", got)
	}
	if late := fake.Unacked(); len(late) > 0 {
		t.Errorf("unacked: %+v", late)
	}
}

// TestInvalidPresses: a press of a button with gpubot's prefix that
// gpubot did not make is handed on as unreadable (answered and audited
// by the service); another app's button is ignored; a good one is an
// action.
func TestInvalidPresses(t *testing.T) {
	fake := slackfake.Start(t)
	var log syncBuffer
	a := newTestAdapter(t, fake, &log)
	in := &unreadableEcho{a: a}
	wctx := runAdapter(t, a, in)
	presses := []struct{ actionID, value string }{
		{"gpubot:approve", "r1"},            // no "|"
		{"gpubot:approve", "|"},             // no request
		{"gpubot:launch", "r1|"},            // no such button
		{"gpubot:extend:0", "r2|1h"},        // bad number
		{"otherapp:approve", "r1|"},         // not ours: ignored
		{"gpubot:cancel", "r3|"},            // fine
		{"gpubot:deny", "r4|" + "too long"}, // fine here; the service checks the length
	}
	var ids []string
	for i, p := range presses {
		ids = append(ids, fake.ClickButton("U0ALICE", "C0GPU", "1700000000.00000"+string(rune('1'+i)), p.actionID, "", p.value))
	}
	for _, id := range ids {
		if _, err := fake.WaitAck(wctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := fake.WaitFor(wctx, func() bool { return len(in.inputs()) == 6 }); err != nil {
		t.Fatalf("%v: inputs %+v", err, in.inputs())
	}
	got := map[string]string{}
	for _, i := range in.inputs() {
		switch {
		case i.Unreadable != nil:
			got[i.Unreadable.Why] = i.Unreadable.What + " " + i.Unreadable.Target
		case i.Action != nil:
			got[string(i.Action.Name)+" "+i.Action.Request] = "action"
		}
	}
	want := map[string]string{
		"its value is not \"request|argument\"": "button ",
		"its value names no request":            "button ",
		`no gpubot button does "launch"`:        "button r1",
		`the action ID has a bad number "0"`:    "button r2",
		"cancel r3":                             "action",
		"deny r4":                               "action",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: got %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if err := fake.WaitFor(wctx, func() bool { return len(fake.Ephemerals("U0ALICE")) == 6 }); err != nil {
		t.Errorf("answers: %d, want 6", len(fake.Ephemerals("U0ALICE")))
	}
}

// TestRevokedBotToken: once Slack refuses the bot token while running,
// /readyz fails, the token is checked again a bounded number of times,
// and Run returns ErrBotToken (so the process exits non-zero); a refusal
// that clears in time changes nothing.
func TestRevokedBotToken(t *testing.T) {
	for _, clears := range []bool{false, true} {
		name := "stays revoked"
		if clears {
			name = "comes back"
		}
		t.Run(name, func(t *testing.T) {
			fake := slackfake.Start(t)
			var log syncBuffer
			a := newTestAdapter(t, fake, &log, WithTokenRecheck(3, 50*time.Millisecond))
			in := &unreadableEcho{a: a}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx, in) }()
			wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer wcancel()
			if err := fake.WaitFor(wctx, func() bool { return a.Ready() == nil }); err != nil {
				t.Fatal(err)
			}
			fake.Revoke(slackfake.BotToken)
			authBefore := len(fake.Calls("auth.test"))
			if err := a.Send(wctx, commands.Output{To: commands.Destination{Kind: commands.ToChannel, Channel: "C0GPU", Request: "r1"}, Reply: commands.Reply{Text: "a card"}}); err != nil {
				t.Fatal(err)
			}
			if err := fake.WaitFor(wctx, func() bool { return a.Ready() != nil }); err != nil {
				t.Fatalf("/readyz still passes with the token refused: %v", err)
			}
			if !strings.Contains(a.Ready().Error(), "token_revoked") {
				t.Errorf("Ready: %v", a.Ready())
			}
			if clears {
				fake.Restore(slackfake.BotToken)
				if err := fake.WaitFor(wctx, func() bool { return a.Ready() == nil }); err != nil {
					t.Fatalf("ready again: %v", err)
				}
				// The held card goes out once the token works.
				if err := fake.WaitFor(wctx, func() bool { return len(fake.Messages("C0GPU")) == 1 }); err != nil {
					t.Errorf("the held card: %v", err)
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
				return
			}
			var err error
			select {
			case err = <-done:
			case <-wctx.Done():
				t.Fatal("Run did not stop with the bot token revoked")
			}
			if !errors.Is(err, ErrBotToken) || !strings.Contains(err.Error(), "token_revoked") || strings.Contains(err.Error(), slackfake.BotToken) {
				t.Errorf("Run: %v, want ErrBotToken naming token_revoked, not the token", err)
			}
			if n := len(fake.Calls("auth.test")) - authBefore; n != 3 {
				t.Errorf("the token was checked %d times, want 3", n)
			}
		})
	}
}

// TestRevokedAppToken: an app token Slack refuses when gpubot reconnects
// is checked again a bounded number of times, and Run returns ErrAppToken.
func TestRevokedAppToken(t *testing.T) {
	fake := slackfake.Start(t)
	var log syncBuffer
	a := newTestAdapter(t, fake, &log, WithTokenRecheck(3, 20*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, &unreadableEcho{a: a}) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	if err := fake.WaitFor(wctx, func() bool { return a.Ready() == nil }); err != nil {
		t.Fatal(err)
	}
	opens := len(fake.Calls("apps.connections.open"))
	fake.Revoke(slackfake.AppToken)
	fake.DropConnections()
	select {
	case err := <-done:
		if !errors.Is(err, ErrAppToken) || strings.Contains(err.Error(), slackfake.AppToken) {
			t.Errorf("Run: %v, want ErrAppToken without the token", err)
		}
	case <-wctx.Done():
		t.Fatal("Run did not stop with the app token revoked")
	}
	if n := len(fake.Calls("apps.connections.open")) - opens; n != 4 {
		t.Errorf("apps.connections.open called %d times after the revocation, want 4 (the reconnect and 3 rechecks)", n)
	}
}
