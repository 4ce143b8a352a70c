package blockkit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/bot/slack/blockkit"
	"github.com/gpubot/gpubot/commands"
)

// pressed is every button of a rendered message as Slack would send its
// action_id and value back.
func pressed(t *testing.T, m blockkit.Rendered) [][2]string {
	t.Helper()
	var out [][2]string
	for _, b := range blocksOf(t, m) {
		if b["type"] != "actions" {
			continue
		}
		if str(b["block_id"]) == "" {
			t.Error("an actions block without block_id is not a block action for slack-go")
		}
		for _, e := range b["elements"].([]any) {
			el := e.(map[string]any)
			out = append(out, [2]string{str(el["action_id"]), str(el["value"])})
		}
	}
	return out
}

// TestActionRoundTrip: every verb a button carries comes back from
// ParseAction as the same action, with unique action IDs in a message.
func TestActionRoundTrip(t *testing.T) {
	want := []commands.Action{
		{Name: commands.VerbApprove, Request: "r1"},
		{Name: commands.VerbDeny, Request: "r1", Arg: "use a100 | not h100"},
		{Name: commands.VerbPreempt, Request: "r2"},
		{Name: commands.VerbCancel, Request: "r3"},
		{Name: commands.VerbRelease, Request: "r4"},
		{Name: commands.VerbExtend, Request: "r4", Arg: "1h"},
		{Name: commands.VerbExtend, Request: "r4", Arg: "4h"},
		{Name: commands.VerbKeep, Request: "r4", Arg: "z2"},
		{Name: commands.VerbKeep, Request: "z3"},
	}
	var bs []commands.Button
	for _, a := range want {
		bs = append(bs, commands.Button{Label: string(a.Name), Action: a})
	}
	m := blockkit.Message(commands.Reply{Text: "Choose.", Blocks: []commands.Block{{Kind: commands.BlockActions, Buttons: bs}}})
	got := pressed(t, m)
	wantIDs := []string{"gpubot:approve", "gpubot:deny", "gpubot:preempt", "gpubot:cancel", "gpubot:release", "gpubot:extend:6", "gpubot:extend:7", "gpubot:keep:8", "gpubot:keep:9"}
	var ids []string
	var actions []commands.Action
	for _, p := range got {
		ids = append(ids, p[0])
		a, err := blockkit.ParseAction(p[0], p[1])
		if err != nil {
			t.Errorf("ParseAction(%q, %q) refused a button gpubot made: %v", p[0], p[1], err)
		}
		actions = append(actions, a)
	}
	if d := cmp.Diff(wantIDs, ids); d != "" {
		t.Errorf("action IDs (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, actions); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
}

// TestParseActionRejects: what gpubot did not make is refused: another
// app's button as not ours, a bad one with gpubot's prefix with a reason.
func TestParseActionRejects(t *testing.T) {
	for name, c := range map[string][2]string{
		"other app":       {"approve", "r1|"},
		"other prefix":    {"gpubotx:approve", "r1|"},
		"not a button":    {"gpubot:help", "r1|"},
		"request verb":    {"gpubot:request", "r1|"},
		"empty verb":      {"gpubot:", "r1|"},
		"zero suffix":     {"gpubot:approve:0", "r1|"},
		"padded suffix":   {"gpubot:approve:01", "r1|"},
		"word suffix":     {"gpubot:approve:x", "r1|"},
		"two suffixes":    {"gpubot:approve:1:2", "r1|"},
		"no separator":    {"gpubot:approve", "r1"},
		"no request":      {"gpubot:approve", "|1h"},
		"spaced request":  {"gpubot:approve", "r1 r2|"},
		"upper-case verb": {"gpubot:APPROVE", "r1|"},
	} {
		a, err := blockkit.ParseAction(c[0], c[1])
		if err == nil {
			t.Errorf("%s: ParseAction(%q, %q) = %+v, want refused", name, c[0], c[1], a)
		}
		ours := strings.HasPrefix(c[0], blockkit.ActionPrefix)
		if errors.Is(err, blockkit.ErrNotOurs) == ours {
			t.Errorf("%s: ParseAction(%q, %q): %v; gpubot's prefix: %v", name, c[0], c[1], err, ours)
		}
	}
}
