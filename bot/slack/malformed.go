package slackbot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/commands"
)

// malformed handles an envelope gpubot could not make sense of: it acks
// it (so Slack neither shows the person an error nor retries), logs its
// type, envelope ID, why and a redacted summary (never the payload: it
// carries a verification token and what the person typed), and, where
// the payload names the person who did something (a command, a press, a
// form), has the service answer them in private that gpubot couldn't
// understand that, and audit it. what is "command", "button", "form",
// "interaction", "event" or "message".
func (a *Adapter) malformed(ctx context.Context, d *delivery, what, why string) {
	d.ack(ctx, nil)
	a.log.Warn("a Slack envelope gpubot could not read; acked it", "type", cutLog(d.env.Type), "envelope", d.env.EnvelopeID, "what", what, "why", why, "summary", redacted(d.env.Payload))
	if what == "event" {
		return // nothing the person did on purpose (App Home opened): no answer
	}
	p := peek(d.env.Payload)
	if p.user == "" {
		return
	}
	a.remember(p.user, p.channel, p.responseURL)
	ev := bot.Event{Key: "slack:env:" + d.env.EnvelopeID, Order: p.user, Input: commands.Input{
		User: p.user, Channel: p.channel,
		Unreadable: &commands.Unreadable{What: what, Why: why},
	}}
	if err := a.in.Submit(ev); err != nil {
		a.log.Warn("answer to an unreadable envelope not taken", "user", p.user, "err", err)
	}
}

// peeked is what could be read of who and where from a payload that does
// not decode as a whole.
type peeked struct {
	user, channel, responseURL string
}

var (
	slackUserID    = regexp.MustCompile(`^[UW][A-Z0-9]{2,20}$`)
	slackChannelID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,20}$`)
)

// peek reads the person, channel and response_url from a payload, each
// only if it is there, of the right type and of the right shape.
func peek(payload json.RawMessage) peeked {
	var m map[string]json.RawMessage
	if json.Unmarshal(payload, &m) != nil {
		return peeked{}
	}
	str := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	field := func(obj json.RawMessage, key string) string {
		var o map[string]json.RawMessage
		if json.Unmarshal(obj, &o) != nil {
			return ""
		}
		return str(o[key])
	}
	var p peeked
	for _, u := range []string{str(m["user_id"]), field(m["user"], "id")} {
		if slackUserID.MatchString(u) {
			p.user = u
			break
		}
	}
	for _, c := range []string{str(m["channel_id"]), field(m["channel"], "id"), field(m["container"], "channel_id")} {
		if slackChannelID.MatchString(c) {
			p.channel = c
			break
		}
	}
	if u := str(m["response_url"]); strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		p.responseURL = u
	}
	return p
}

// interactionKind names what an interactive payload was, from its type.
func interactionKind(payload json.RawMessage) string {
	var p struct {
		Type json.RawMessage `json:"type"`
	}
	_ = json.Unmarshal(payload, &p)
	var t string
	_ = json.Unmarshal(p.Type, &t)
	switch t {
	case "block_actions":
		return "button"
	case "view_submission":
		return "form"
	}
	return "interaction"
}

// unreadableWhy says in a few words why payload did not decode, without
// any of its values: "its payload is a string, not an object", "its
// text is an array, not a string".
func unreadableWhy(payload json.RawMessage, err error) string {
	if k := jsonKind(payload); k != "an object" {
		return "its payload is " + k + ", not an object"
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		got, _, _ := strings.Cut(te.Value, " ")
		field := jsonPath(te.Field)
		if field == "" {
			field = "payload"
		}
		return fmt.Sprintf("its %s is %s, not %s", cutLog(field), article(got), typeWord(te.Type))
	}
	if _, ok := errors.AsType[*json.SyntaxError](err); ok {
		return "its payload is not valid JSON"
	}
	return "its payload could not be read"
}

// jsonPath drops from a decoding error's field path the Go names that
// slack-go's decoders put in front (SlashCommandCopy.text, alias.actions),
// leaving the JSON keys.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	for len(parts) > 1 && (parts[0] == "alias" || strings.ToLower(parts[0]) != parts[0]) {
		parts = parts[1:]
	}
	if len(parts) == 1 && strings.ToLower(parts[0]) != parts[0] {
		return ""
	}
	return strings.Join(parts, ".")
}

func article(kind string) string {
	switch kind {
	case "array", "object":
		return "an " + kind
	case "bool":
		return "a boolean"
	case "":
		return "something else"
	}
	return "a " + kind
}

func typeWord(t reflect.Type) string {
	if t == nil {
		return "what Slack sends"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "what Slack sends"
}
