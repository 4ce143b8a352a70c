package blockkit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/slack-go/slack"

	"github.com/gpubot/gpubot/commands"
)

// RequestFormID is the callback_id of the request modal.
const RequestFormID = "gpubot_request"

// Block IDs of the request modal's inputs (each input's action_id is the
// same word). FormCommand's errors are keyed by them.
const (
	FormCount    = "count"
	FormFlavor   = "flavor"
	FormDuration = "duration"
	FormTeam     = "team"
	FormPriority = "priority"
	FormTopology = "topology"
	FormReason   = "reason"
)

// Limits of the form's inputs.
const (
	maxOptions   = 100                // options of a static select
	maxOptionLen = 75                 // an option's text
	maxReason    = commands.MaxReason // characters of reason, as typed
)

// FormOptions fills the request modal.
type FormOptions struct {
	Flavors, Teams, Priorities, Topologies []string
	DefaultTeam, DefaultPriority           string
	// Channel is where the form was opened; it goes into private_metadata
	// and FormCommand returns it.
	Channel string
}

// NewFormOptions makes FormOptions from what the service offers a person
// (commands.Service.FormDefaults) and the channel the form is opened in.
func NewFormOptions(d commands.FormDefaults, channel string) FormOptions {
	return FormOptions{
		Flavors: d.Flavors, Teams: d.Teams, Priorities: d.Priorities, Topologies: d.Topologies,
		DefaultTeam: d.Team, DefaultPriority: d.Priority, Channel: channel,
	}
}

// topologyWords describe the topology choices.
var topologyWords = map[string]string{
	"host":  "all pods on one node",
	"rack":  "all pods in one rack",
	"block": "all pods in one topology block",
}

// RequestForm builds the request modal: count (number), flavor (static
// select, optional: empty tries the team's flavors in order), duration
// (text), team and priority (static selects, preselected), topology
// (optional static select) and reason (optional, multiline). A list with
// no words becomes a free-text input. Its callback_id is RequestFormID.
func RequestForm(o FormOptions) slack.ModalViewRequest {
	pt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	count := slack.NewNumberInputBlockElement(pt("8"), FormCount, false)
	count.MinValue = "1"
	dur := slack.NewPlainTextInputBlockElement(pt("4h"), FormDuration)
	dur.MaxLength = 40
	reason := slack.NewPlainTextInputBlockElement(pt("What the GPUs are for"), FormReason)
	reason.Multiline = true
	reason.MaxLength = maxReason

	flavor := slack.NewInputBlock(FormFlavor, pt("Flavor"), pt("Leave empty to try your team's flavors in order."), choice(FormFlavor, "Any of the team's flavors", o.Flavors, "", nil))
	flavor.Optional = true
	topology := slack.NewInputBlock(FormTopology, pt("Topology"), pt("Keep all pods close together; leave empty to place them anywhere."), choice(FormTopology, "Anywhere", o.Topologies, "", topologyWords))
	topology.Optional = true
	reasonBlock := slack.NewInputBlock(FormReason, pt("Reason"), pt("Shown on the request's card."), reason)
	reasonBlock.Optional = true

	intro := "gpubot answers at once: started, queued with a start estimate, or waiting for approval. The request's card goes to the team's channel."
	blocks := []slack.Block{
		slack.NewContextBlock("intro", slack.NewTextBlockObject(slack.MarkdownType, escape(intro), false, false)),
		slack.NewInputBlock(FormCount, pt("GPUs"), pt("They run as equal pods of at most one node's GPUs each: 10 on 8-GPU nodes are 2 pods of 5."), count),
		flavor,
		slack.NewInputBlock(FormDuration, pt("For how long"), pt("Minutes, hours or days: 90m, 4h, 2d."), dur),
		slack.NewInputBlock(FormTeam, pt("Team"), nil, choice(FormTeam, "Team", o.Teams, o.DefaultTeam, nil)),
		slack.NewInputBlock(FormPriority, pt("Priority"), nil, choice(FormPriority, "Priority", o.Priorities, o.DefaultPriority, nil)),
		topology,
		reasonBlock,
	}
	channel, _ := cut(o.Channel, 3000)
	return slack.ModalViewRequest{
		Type:            slack.VTModal,
		Title:           pt("Request GPUs"),
		Submit:          pt("Request"),
		Close:           pt("Cancel"),
		Blocks:          slack.Blocks{BlockSet: blocks},
		PrivateMetadata: channel,
		CallbackID:      RequestFormID,
	}
}

// choice is a static select of words (the first 100), with initial
// preselected if it is one of them, or a text input if there are none.
func choice(id, placeholder string, words []string, initial string, describe map[string]string) slack.BlockElement {
	pt := func(s string) *slack.TextBlockObject {
		return slack.NewTextBlockObject(slack.PlainTextType, s, false, false)
	}
	if len(words) == 0 {
		return slack.NewPlainTextInputBlockElement(pt(placeholder), id)
	}
	var opts []*slack.OptionBlockObject
	var init *slack.OptionBlockObject
	for _, w := range words[:min(len(words), maxOptions)] {
		text, _ := cut(clean(w), maxOptionLen)
		var desc *slack.TextBlockObject
		if d := describe[w]; d != "" {
			desc = pt(d)
		}
		opt := slack.NewOptionBlockObject(w, pt(text), desc)
		opts = append(opts, opt)
		if w == initial {
			init = opt
		}
	}
	sel := slack.NewOptionsSelectBlockElement(slack.OptTypeStatic, pt(placeholder), id, opts...)
	sel.InitialOption = init
	return sel
}

// FormCommand turns a submitted request modal into the text of a /gpu
// request command (without "/gpu") that commands.Parse accepts with
// vocab, and returns the channel from private_metadata. If the form is
// invalid, text is empty and errs maps the block_id of each offending
// input to a plain sentence, for a view_submission response_action
// "errors". The checks are the parser's: the text is parsed, and a
// parse error's position names the field that caused it.
func FormCommand(v slack.View, vocab commands.Vocabulary) (text, channel string, errs map[string]string) {
	channel = v.PrivateMetadata
	get := func(block string) string {
		if v.State == nil {
			return ""
		}
		a := v.State.Values[block][block]
		if a.SelectedOption.Value != "" {
			return strings.TrimSpace(a.SelectedOption.Value)
		}
		return strings.TrimSpace(a.Value)
	}
	errs = map[string]string{}
	fail := func(block, msg string) { errs[block] = msg }

	// What the parser cannot see as one field is checked here.
	count := get(FormCount)
	switch n, err := strconv.Atoi(count); {
	case count == "":
		fail(FormCount, "Say how many GPUs, e.g. 8.")
	case err != nil || n < 1:
		fail(FormCount, "The number of GPUs must be a whole number, 1 or more.")
	}
	dur := strings.Join(strings.Fields(get(FormDuration)), " ")
	if dur == "" {
		fail(FormDuration, "Say for how long, e.g. 4h.")
	} else if _, err := commands.ParseDuration(dur); err != nil {
		fail(FormDuration, sentence(err.Error()))
	}
	words := map[string]string{}
	for _, f := range []struct{ block, what string }{
		{FormFlavor, "flavor"}, {FormTeam, "team"}, {FormPriority, "priority"}, {FormTopology, "topology"},
	} {
		w := get(f.block)
		if strings.IndexFunc(w, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune("=\"'“”„‘’", r) }) >= 0 {
			fail(f.block, fmt.Sprintf("Choose a %s from the list.", f.what))
			continue
		}
		words[f.block] = w
	}
	if words[FormTeam] == "" && errs[FormTeam] == "" {
		fail(FormTeam, "Choose a team.")
	}
	if words[FormPriority] == "" && errs[FormPriority] == "" {
		fail(FormPriority, "Choose a priority.")
	}
	reason := strings.TrimFunc(strings.ToValidUTF8(get(FormReason), "\uFFFD"), isSep)
	if runes(reason) > maxReason {
		fail(FormReason, fmt.Sprintf("Keep the reason to %d characters.", maxReason))
	}
	if len(errs) > 0 {
		return "", channel, errs
	}

	// Build the command, remembering where each field is.
	var b strings.Builder
	spans := map[string][2]int{}
	put := func(block, s string) {
		start := b.Len()
		b.WriteString(s)
		spans[block] = [2]int{start, b.Len()}
	}
	b.WriteString("request ")
	put(FormCount, count)
	if words[FormFlavor] != "" {
		b.WriteString("x")
		put(FormFlavor, words[FormFlavor])
	}
	b.WriteString(" for ")
	put(FormDuration, dur)
	b.WriteString(" ")
	put(FormTeam, "team "+words[FormTeam])
	b.WriteString(" ")
	put(FormPriority, "priority "+words[FormPriority])
	if words[FormTopology] != "" {
		b.WriteString(" ")
		put(FormTopology, "topology "+words[FormTopology])
	}
	if reason != "" {
		b.WriteString(" ")
		var q string
		q, reason = quote(reason)
		put(FormReason, "reason "+q)
	}
	text = b.String()

	cmd, err := commands.Parse(text, vocab)
	if err != nil {
		var pe *commands.ParseError
		msg := sentence(err.Error())
		block := FormCount
		if errors.As(err, &pe) {
			block = blockAt(spans, pe)
		}
		return "", channel, map[string]string{block: msg}
	}
	// The parser read the fields as they were meant, or a field smuggled
	// in words of its own.
	s := cmd.Spec
	switch {
	case cmd.Verb != commands.VerbRequest || s == nil:
		return "", channel, map[string]string{FormCount: "This form could not be read; please try again."}
	case strconv.Itoa(s.GPUs) != count:
		return "", channel, map[string]string{FormCount: "The number of GPUs must be a whole number, 1 or more."}
	case s.Reason != reason:
		return "", channel, map[string]string{FormReason: "This reason cannot be used as written; try it without quotes."}
	}
	return text, channel, nil
}

// quote puts reason in quotes that the lexer reads back whole, and
// returns the reason as it will read. A quote closes a text where a
// space follows it, so the first family (double, then single) with no
// such quote inside is used; if both have one, the double quotes inside
// that would close early become ″.
func quote(reason string) (quoted, read string) {
	rs := []rune(reason)
	closes := func(i int) bool { return i+1 < len(rs) && isSep(rs[i+1]) }
	early := func(fam string) bool {
		for i, r := range rs {
			if strings.ContainsRune(fam, r) && closes(i) {
				return true
			}
		}
		return false
	}
	const double, single = "\"“”„", "'‘’"
	switch {
	case !early(double):
		return "\"" + reason + "\"", reason
	case !early(single):
		return "'" + reason + "'", reason
	}
	out := make([]rune, len(rs))
	for i, r := range rs {
		if strings.ContainsRune(double, r) && closes(i) {
			r = '″'
		}
		out[i] = r
	}
	return "\"" + string(out) + "\"", string(out)
}

// isSep reports whether the parser sees r as a space between words.
func isSep(r rune) bool {
	return unicode.IsSpace(r) || r == '\u200b' || r == '\u2060' || r == '\ufeff'
}

// blockAt names the field whose part of the text a parse error points
// at, else the field its message names, else the count.
func blockAt(spans map[string][2]int, pe *commands.ParseError) string {
	for block, sp := range spans {
		if pe.Pos >= sp[0] && pe.Pos < sp[1] {
			return block
		}
	}
	msg := strings.ToLower(pe.Msg)
	for _, f := range []struct{ word, block string }{
		{"duration", FormDuration}, {"flavor", FormFlavor}, {"team", FormTeam},
		{"priority", FormPriority}, {"topology", FormTopology}, {"reason", FormReason},
	} {
		if strings.Contains(msg, f.word) {
			return f.block
		}
	}
	return FormCount
}

// sentence capitalises s and ends it with a full stop unless it ends
// with punctuation.
func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.ContainsAny(s[len(s)-1:], ".?!") {
		s += "."
	}
	return s
}
