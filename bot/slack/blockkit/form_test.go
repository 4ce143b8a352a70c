package blockkit_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/slack-go/slack"

	"github.com/gpubot/gpubot/bot/slack/blockkit"
	"github.com/gpubot/gpubot/commands"
)

// submitted is a view_submission's view as Slack sends it, with fields
// as the person filled them in (absent keys: left empty).
func submitted(t *testing.T, fields map[string]string) slack.View {
	t.Helper()
	values := map[string]map[string]any{}
	for block, v := range fields {
		var a map[string]any
		switch block {
		case blockkit.FormFlavor, blockkit.FormTeam, blockkit.FormPriority, blockkit.FormTopology:
			a = map[string]any{"type": "static_select", "selected_option": map[string]any{"text": map[string]any{"type": "plain_text", "text": v}, "value": v}}
		case blockkit.FormCount:
			a = map[string]any{"type": "number_input", "value": v}
		default:
			a = map[string]any{"type": "plain_text_input", "value": v}
		}
		values[block] = map[string]any{block: a}
	}
	for _, block := range []string{blockkit.FormFlavor, blockkit.FormTopology} {
		if _, ok := fields[block]; !ok {
			values[block] = map[string]any{block: map[string]any{"type": "static_select", "selected_option": nil}}
		}
	}
	raw, err := json.Marshal(map[string]any{
		"id": "V0FORM", "type": "modal", "callback_id": blockkit.RequestFormID, "private_metadata": "C0VISION",
		"state": map[string]any{"values": values},
	})
	if err != nil {
		t.Fatal(err)
	}
	var v slack.View
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func form(over map[string]string) map[string]string {
	f := map[string]string{
		blockkit.FormCount: "8", blockkit.FormFlavor: "h100", blockkit.FormDuration: "4h",
		blockkit.FormTeam: "vision", blockkit.FormPriority: "normal",
	}
	for k, v := range over {
		if v == "-" {
			delete(f, k)
		} else {
			f[k] = v
		}
	}
	return f
}

var vocab = commands.Vocabulary{
	Flavors: []string{"h100", "a100"}, Teams: []string{"nlp", "vision", "speech"},
	Priorities: []string{"low", "normal", "high", "urgent"}, Templates: []string{"default", "dev-box"},
}

// TestFormCommandValid: a filled-in form becomes the exact command text,
// which the parser reads as the form meant.
func TestFormCommandValid(t *testing.T) {
	cases := map[string]struct {
		fields map[string]string
		text   string
		spec   commands.RequestSpec
	}{
		"minimal": {
			fields: form(map[string]string{blockkit.FormFlavor: "-"}),
			text:   "request 8 for 4h team vision priority normal",
			spec:   commands.RequestSpec{GPUs: 8, Duration: 4 * time.Hour, Team: "vision", Priority: "normal"},
		},
		"everything": {
			fields: form(map[string]string{blockkit.FormCount: " 16 ", blockkit.FormDuration: " 1h   30m ", blockkit.FormTopology: "rack", blockkit.FormReason: "  detector <!channel> & pretraining\nsecond line  "}),
			text:   "request 16xh100 for 1h 30m team vision priority normal topology rack reason \"detector <!channel> & pretraining\nsecond line\"",
			spec:   commands.RequestSpec{GPUs: 16, Flavor: "h100", Duration: 90 * time.Minute, Team: "vision", Priority: "normal", Topology: "rack", Reason: "detector <!channel> & pretraining\nsecond line"},
		},
		"reason with double quotes": {
			fields: form(map[string]string{blockkit.FormReason: `the "big" run priority urgent`}),
			text:   `request 8xh100 for 4h team vision priority normal reason 'the "big" run priority urgent'`,
			spec:   commands.RequestSpec{GPUs: 8, Flavor: "h100", Duration: 4 * time.Hour, Team: "vision", Priority: "normal", Reason: `the "big" run priority urgent`},
		},
		"reason with both quotes": {
			fields: form(map[string]string{blockkit.FormReason: `the "big" run of the leads' jobs`}),
			text:   `request 8xh100 for 4h team vision priority normal reason "the "big″ run of the leads' jobs"`,
			spec:   commands.RequestSpec{GPUs: 8, Flavor: "h100", Duration: 4 * time.Hour, Team: "vision", Priority: "normal", Reason: `the "big″ run of the leads' jobs`},
		},
		"reason ending in a quote": {
			fields: form(map[string]string{blockkit.FormReason: `say "hi"`}),
			text:   `request 8xh100 for 4h team vision priority normal reason "say "hi""`,
			spec:   commands.RequestSpec{GPUs: 8, Flavor: "h100", Duration: 4 * time.Hour, Team: "vision", Priority: "normal", Reason: `say "hi"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			text, channel, errs := blockkit.FormCommand(submitted(t, tc.fields), vocab)
			if errs != nil {
				t.Fatalf("errors %v for a valid form", errs)
			}
			if text != tc.text || channel != "C0VISION" {
				t.Errorf("got %q in %q\nwant %q in C0VISION", text, channel, tc.text)
			}
			cmd, err := commands.Parse(text, vocab)
			if err != nil {
				t.Fatalf("the parser refuses %q: %v", text, err)
			}
			if d := cmp.Diff(&tc.spec, cmd.Spec); d != "" {
				t.Errorf("parsed spec (-want +got):\n%s", d)
			}
		})
	}
}

// TestFormCommandInvalid: each invalid field gets a plain message on its
// own block, and no command text.
func TestFormCommandInvalid(t *testing.T) {
	cases := map[string]struct {
		fields map[string]string
		block  string
		msg    string
	}{
		"no count":          {form(map[string]string{blockkit.FormCount: "-"}), blockkit.FormCount, "Say how many GPUs, e.g. 8."},
		"zero count":        {form(map[string]string{blockkit.FormCount: "0"}), blockkit.FormCount, "The number of GPUs must be a whole number, 1 or more."},
		"negative count":    {form(map[string]string{blockkit.FormCount: "-4"}), blockkit.FormCount, "The number of GPUs must be a whole number, 1 or more."},
		"fractional count":  {form(map[string]string{blockkit.FormCount: "1.5"}), blockkit.FormCount, "The number of GPUs must be a whole number, 1 or more."},
		"huge count":        {form(map[string]string{blockkit.FormCount: "100000"}), blockkit.FormCount, "The number of GPUs must be from 1 to "},
		"unknown flavor":    {form(map[string]string{blockkit.FormFlavor: "h10"}), blockkit.FormFlavor, "Unknown flavor 'h10'; did you mean h100?"},
		"no duration":       {form(map[string]string{blockkit.FormDuration: "-"}), blockkit.FormDuration, "Say for how long, e.g. 4h."},
		"bad duration":      {form(map[string]string{blockkit.FormDuration: "4 fortnights"}), blockkit.FormDuration, "Invalid duration"},
		"smuggled keywords": {form(map[string]string{blockkit.FormDuration: "4h priority urgent"}), blockkit.FormDuration, "Invalid duration"},
		"too long":          {form(map[string]string{blockkit.FormDuration: "400d"}), blockkit.FormDuration, "Invalid duration"},
		"unknown team":      {form(map[string]string{blockkit.FormTeam: "visoin"}), blockkit.FormTeam, "Unknown team 'visoin'; did you mean vision?"},
		"no team":           {form(map[string]string{blockkit.FormTeam: "-"}), blockkit.FormTeam, "Choose a team."},
		"unknown priority":  {form(map[string]string{blockkit.FormPriority: "asap"}), blockkit.FormPriority, "Unknown priority 'asap'"},
		"no priority":       {form(map[string]string{blockkit.FormPriority: "-"}), blockkit.FormPriority, "Choose a priority."},
		"spoofed option":    {form(map[string]string{blockkit.FormTeam: "nlp priority urgent"}), blockkit.FormTeam, "Choose a team from the list."},
		"unknown topology":  {form(map[string]string{blockkit.FormTopology: "zone"}), blockkit.FormTopology, "Unknown topology 'zone'"},
		"long reason":       {form(map[string]string{blockkit.FormReason: strings.Repeat("x", 501)}), blockkit.FormReason, "Keep the reason to 500 characters."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			text, channel, errs := blockkit.FormCommand(submitted(t, tc.fields), vocab)
			if text != "" || channel != "C0VISION" {
				t.Errorf("text %q channel %q; want no text and the channel", text, channel)
			}
			if len(errs) != 1 || !strings.HasPrefix(errs[tc.block], tc.msg) {
				t.Errorf("errors %q; want one on %s starting %q", errs, tc.block, tc.msg)
			}
		})
	}
}

// TestFormEndToEnd: the modal offers the person's choices, and what they
// submit is a request the service accepts.
func TestFormEndToEnd(t *testing.T) {
	e := newEnv(t)
	d := e.svc.FormDefaults("U0DAVE")
	modal := blockkit.RequestForm(blockkit.NewFormOptions(d, "C0VISION"))
	if modal.CallbackID != blockkit.RequestFormID || modal.PrivateMetadata != "C0VISION" {
		t.Fatalf("callback %q metadata %q", modal.CallbackID, modal.PrivateMetadata)
	}
	ids := map[string]bool{}
	for _, b := range modal.Blocks.BlockSet {
		if in, ok := b.(*slack.InputBlock); ok {
			ids[in.BlockID] = true
		}
	}
	for _, id := range []string{blockkit.FormCount, blockkit.FormFlavor, blockkit.FormDuration, blockkit.FormTeam, blockkit.FormPriority, blockkit.FormTopology, blockkit.FormReason} {
		if !ids[id] {
			t.Errorf("the modal has no input %s", id)
		}
	}
	text, channel, errs := blockkit.FormCommand(submitted(t, form(map[string]string{blockkit.FormReason: "form <!channel>"})), e.svc.Vocabulary())
	if errs != nil {
		t.Fatal(errs)
	}
	outs := e.svc.Handle(e.ctx, commands.Input{User: "U0DAVE", Channel: channel, Text: text})
	card := find(t, outs, commands.ToChannel, "r10", "r10")
	if !strings.Contains(show(outs), "Reason: form <!channel>") {
		t.Errorf("the request did not keep the reason:\n%s", show(outs))
	}
	checkMessage(t, blockkit.Message(card))
}
