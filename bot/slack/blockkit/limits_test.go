package blockkit_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpubot/gpubot/bot/slack/blockkit"
)

// checkMessage fails t unless m obeys every Block Kit limit gpubot
// relies on, and the JSON of its text and blocks fits a Socket Mode ack.
func checkMessage(t *testing.T, m blockkit.Rendered) {
	t.Helper()
	if n := utf8.RuneCountInString(m.Text); n > 3000 {
		t.Errorf("message text has %d characters, over 3000", n)
	}
	checkMrkdwn(t, "message text", m.Text)
	b, err := json.Marshal(struct {
		Text   string `json:"text"`
		Blocks any    `json:"blocks"`
	}{m.Text, m.Blocks})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 19000 {
		t.Errorf("message JSON is %d bytes, over the 19000 that fit a Socket Mode ack", len(b))
	}
	var blocks []map[string]any
	if err := json.Unmarshal(mustJSON(t, m.Blocks), &blocks); err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, blocks, 50)
	if m.Overflow != nil {
		last := blocks[len(blocks)-1]
		if last["type"] != "context" || !strings.Contains(str(last["elements"].([]any)[0].(map[string]any)["text"]), m.Overflow.Name) {
			t.Errorf("a cut message must end with a context line naming %s; it ends with %v", m.Overflow.Name, last)
		}
	}
}

// checkView fails t unless the view's JSON obeys the limits.
func checkView(t *testing.T, b []byte) {
	t.Helper()
	var v struct {
		Type   string           `json:"type"`
		Blocks []map[string]any `json:"blocks"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, v.Blocks, 100)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func str(v any) string { s, _ := v.(string); return s }

func chars(v any) int { return utf8.RuneCountInString(str(v)) }

// checkMrkdwn fails t if text could ping or link: every <, > and & must
// be escaped (gpubot makes no links or mentions).
func checkMrkdwn(t *testing.T, where, text string) {
	t.Helper()
	if strings.ContainsAny(text, "<>") {
		t.Errorf("%s has an unescaped < or >: %q", where, text)
	}
	rest := text
	for {
		i := strings.IndexByte(rest, '&')
		if i < 0 {
			break
		}
		rest = rest[i:]
		if !strings.HasPrefix(rest, "&amp;") && !strings.HasPrefix(rest, "&lt;") && !strings.HasPrefix(rest, "&gt;") {
			t.Errorf("%s has an unescaped &: %q", where, text)
			break
		}
		rest = rest[1:]
	}
}

// checkText checks a text object: its type, its length, and escaping if
// it is mrkdwn.
func checkText(t *testing.T, where string, o any, limit int, plainOnly bool) {
	t.Helper()
	m, ok := o.(map[string]any)
	if !ok {
		t.Errorf("%s: not a text object: %v", where, o)
		return
	}
	if n := chars(m["text"]); n > limit || n == 0 {
		t.Errorf("%s: %d characters, want 1 to %d", where, n, limit)
	}
	switch m["type"] {
	case "mrkdwn":
		if plainOnly {
			t.Errorf("%s must be plain_text", where)
		}
		checkMrkdwn(t, where, str(m["text"]))
	case "plain_text":
	default:
		t.Errorf("%s: text type %v", where, m["type"])
	}
}

// checkBlocks checks every block: count, unique block_ids, and each
// kind's own limits; action_ids must be unique and understood by
// ActionFor.
func checkBlocks(t *testing.T, blocks []map[string]any, maxBlocks int) {
	t.Helper()
	if len(blocks) > maxBlocks {
		t.Errorf("%d blocks, over %d", len(blocks), maxBlocks)
	}
	ids := map[string]bool{}
	actionIDs := map[string]bool{}
	for i, b := range blocks {
		id := str(b["block_id"])
		if id == "" || len(id) > 255 || ids[id] {
			t.Errorf("block %d: block_id %q is empty, too long or repeated", i, id)
		}
		ids[id] = true
		where := id
		switch b["type"] {
		case "header":
			checkText(t, where, b["text"], 150, true)
		case "section":
			if b["text"] != nil {
				checkText(t, where, b["text"], 3000, false)
			}
			fs, _ := b["fields"].([]any)
			if len(fs) > 10 {
				t.Errorf("%s: %d fields, over 10", where, len(fs))
			}
			for _, f := range fs {
				checkText(t, where+" field", f, 2000, false)
			}
			if b["text"] == nil && len(fs) == 0 {
				t.Errorf("%s: a section needs text or fields", where)
			}
		case "context":
			es, _ := b["elements"].([]any)
			if len(es) == 0 || len(es) > 10 {
				t.Errorf("%s: %d context elements, want 1 to 10", where, len(es))
			}
			for _, e := range es {
				checkText(t, where, e, 3000, false)
			}
		case "actions":
			es, _ := b["elements"].([]any)
			if len(es) == 0 || len(es) > 25 {
				t.Errorf("%s: %d elements, want 1 to 25", where, len(es))
			}
			for _, e := range es {
				btn := e.(map[string]any)
				checkText(t, where+" button", btn["text"], 75, true)
				aid, value := str(btn["action_id"]), str(btn["value"])
				if len(aid) > 255 || len(value) > 2000 || actionIDs[aid] {
					t.Errorf("%s: action_id %q (repeated: %v) or value of %d bytes out of limits", where, aid, actionIDs[aid], len(value))
				}
				actionIDs[aid] = true
				if _, err := blockkit.ParseAction(aid, value); err != nil {
					t.Errorf("%s: ParseAction does not understand button %q %q: %v", where, aid, value, err)
				}
				if s := str(btn["style"]); s != "" && s != "primary" && s != "danger" {
					t.Errorf("%s: style %q", where, s)
				}
				if c, ok := btn["confirm"].(map[string]any); ok {
					checkText(t, where+" confirm title", c["title"], 100, true)
					checkText(t, where+" confirm text", c["text"], 300, false)
					checkText(t, where+" confirm", c["confirm"], 30, true)
					checkText(t, where+" deny", c["deny"], 30, true)
				}
			}
		case "input":
			checkText(t, where+" label", b["label"], 2000, true)
			if b["hint"] != nil {
				checkText(t, where+" hint", b["hint"], 2000, true)
			}
			el := b["element"].(map[string]any)
			if opts, ok := el["options"].([]any); ok {
				if len(opts) > 100 {
					t.Errorf("%s: %d options, over 100", where, len(opts))
				}
				for _, o := range opts {
					om := o.(map[string]any)
					checkText(t, where+" option", om["text"], 75, true)
					if v := str(om["value"]); v == "" || len(v) > 150 {
						t.Errorf("%s: option value %q", where, v)
					}
				}
			}
		default:
			t.Errorf("%s: unexpected block type %v", where, b["type"])
		}
	}
}
