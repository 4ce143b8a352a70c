package blockkit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/gpubot/gpubot/commands"
)

// ActionPrefix starts the action_id of every gpubot button.
const ActionPrefix = "gpubot:"

// buttonVerbs are the verbs a button may carry.
var buttonVerbs = []commands.Verb{
	commands.VerbApprove, commands.VerbDeny, commands.VerbPreempt,
	commands.VerbCancel, commands.VerbRelease, commands.VerbExtend,
	commands.VerbKeep, commands.VerbSwitch,
}

// ErrNotOurs is ParseAction's answer for an action_id without gpubot's
// prefix: another app's button, to be ignored.
var ErrNotOurs = errors.New("not a gpubot button")

// ParseAction turns a pressed button's action_id ("gpubot:<verb>" or
// "gpubot:<verb>:<n>") and value ("<request>|<arg>") back into the
// commands.Action it stands for. An action_id without gpubot's prefix
// gives ErrNotOurs. With the prefix, anything gpubot would not have made
// (a verb no button carries, a malformed number, a value without "|" or
// without a request) gives an error saying what, in words fit for the
// audit log, and the Action holds what could be read (the verb, the
// request), for the answer.
func ParseAction(actionID, value string) (commands.Action, error) {
	rest, ok := strings.CutPrefix(actionID, ActionPrefix)
	if !ok {
		return commands.Action{}, ErrNotOurs
	}
	verb, n, numbered := strings.Cut(rest, ":")
	req, arg, hasSep := strings.Cut(value, "|")
	read := commands.Action{Name: commands.Verb(verb)}
	if hasSep && req != "" && !strings.ContainsAny(req, " \t\n") && len(req) <= 40 {
		read.Request = req
	}
	if numbered {
		if k, err := strconv.Atoi(n); err != nil || k < 1 || strconv.Itoa(k) != n {
			return read, fmt.Errorf("the action ID has a bad number %q", cutString(n, 20))
		}
	}
	v := commands.Verb(verb)
	if !isButtonVerb(v) {
		return commands.Action{Request: read.Request}, fmt.Errorf("no gpubot button does %q", cutString(verb, 20))
	}
	switch {
	case !hasSep:
		return read, errors.New("its value is not \"request|argument\"")
	case read.Request == "":
		return read, errors.New("its value names no request")
	}
	return commands.Action{Name: v, Request: req, Arg: arg}, nil
}

// cutString keeps the first n bytes of s, as valid UTF-8.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func isButtonVerb(v commands.Verb) bool {
	for _, b := range buttonVerbs {
		if v == b {
			return true
		}
	}
	return false
}

// actionPiece is an actions block of at most 25 buttons. It reports
// whether a label or value had to be cut. Action IDs are set later by
// numberActions, once the whole message is known.
func actionPiece(bs []commands.Button) (piece, bool) {
	wasCut := false
	elems := make([]*slack.ButtonBlockElement, 0, len(bs))
	size := 0
	for _, b := range bs {
		label, c := cut(strings.TrimSpace(clean(b.Label)), maxButtonText)
		wasCut = wasCut || c
		if label == "" {
			label = string(b.Action.Name)
		}
		value := b.Action.Request + "|" + b.Action.Arg
		if len(value) > maxValue {
			// Only a free-text argument can be this long; keep it valid UTF-8.
			value = strings.ToValidUTF8(value[:maxValue], "")
			wasCut = true
		}
		e := slack.NewButtonBlockElement(ActionPrefix+string(b.Action.Name), value, slack.NewTextBlockObject(slack.PlainTextType, label, false, false))
		switch b.Style {
		case "primary":
			e.Style = slack.StylePrimary
		case "danger":
			e.Style = slack.StyleDanger
		}
		e.Confirm = confirmFor(b)
		elems = append(elems, e)
		size += len(label) + len(value) + len(e.ActionID)
		if e.Confirm != nil {
			size += len(e.Confirm.Title.Text) + len(e.Confirm.Text.Text) + len(e.Confirm.Confirm.Text) + len(e.Confirm.Deny.Text)
		}
	}
	return piece{kind: "actions", size: size, make: func(id string) slack.Block {
		els := make([]slack.BlockElement, len(elems))
		for i, e := range elems {
			cp := *e
			els[i] = &cp
		}
		return slack.NewActionBlock(id, els...)
	}}, wasCut
}

// confirmFor asks before the buttons that cannot be undone and take
// something from someone: preempt (other people's running work), cancel
// (the request's place in the queue) and release (the running job).
func confirmFor(b commands.Button) *slack.ConfirmationBlockObject {
	id := clean(b.Action.Request)
	var title, text, yes, no string
	switch b.Action.Name {
	case commands.VerbPreempt:
		victims := strings.TrimSpace(strings.TrimPrefix(clean(b.Label), "Preempt"))
		if victims == "" {
			victims = "the proposed lower-priority work"
		}
		title, yes, no = "Preempt?", "Preempt", "Keep waiting"
		text = fmt.Sprintf("Start %s now by preempting %s? The preempted work is requeued and its owners are told.", id, victims)
	case commands.VerbCancel:
		title, yes, no = "Cancel this request?", "Cancel it", "Keep it"
		text = fmt.Sprintf("Cancel %s? A waiting request gives up its place; a running one stops and frees its GPUs.", id)
	case commands.VerbRelease:
		title, yes, no = "Release the GPUs?", "Release", "Keep running"
		text = fmt.Sprintf("Stop %s now and free its GPUs? Its workload ends at once.", id)
	default:
		return nil
	}
	text, _ = cut(escape(text), 300)
	c := slack.NewConfirmationBlockObject(
		slack.NewTextBlockObject(slack.PlainTextType, title, false, false),
		slack.NewTextBlockObject(slack.MarkdownType, text, false, false),
		slack.NewTextBlockObject(slack.PlainTextType, yes, false, false),
		slack.NewTextBlockObject(slack.PlainTextType, no, false, false),
	)
	c.Style = slack.StyleDanger
	return c
}

// numberActions makes action IDs unique in a message: a verb that occurs
// on more than one button gets ":<n>", n the button's 1-based position
// among all the message's buttons.
func numberActions(blocks []slack.Block) {
	var all []*slack.ButtonBlockElement
	for _, b := range blocks {
		if a, ok := b.(*slack.ActionBlock); ok {
			for _, e := range a.Elements.ElementSet {
				if btn, ok := e.(*slack.ButtonBlockElement); ok {
					all = append(all, btn)
				}
			}
		}
	}
	count := map[string]int{}
	for _, b := range all {
		count[b.ActionID]++
	}
	for i, b := range all {
		if count[b.ActionID] > 1 {
			b.ActionID = fmt.Sprintf("%s:%d", b.ActionID, i+1)
		}
	}
}
