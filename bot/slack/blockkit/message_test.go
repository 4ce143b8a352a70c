package blockkit_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/gpubot/gpubot/bot/slack/blockkit"
	"github.com/gpubot/gpubot/commands"
)

// blocksOf decodes a rendered message's blocks.
func blocksOf(t *testing.T, m blockkit.Rendered) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(mustJSON(t, m.Blocks), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// texts is every text in the blocks, in order.
func texts(t *testing.T, m blockkit.Rendered) []string {
	t.Helper()
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if s, ok := x["text"].(string); ok {
				out = append(out, s)
			}
			for k, y := range x {
				if k != "text" || fmt.Sprint(y) != y {
					walk(y)
				}
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	for _, b := range blocksOf(t, m) {
		walk(b)
	}
	return out
}

func rows(n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = []string{fmt.Sprintf("r%d", i+1), fmt.Sprintf("%d× h100", i%64+1), "alice", "queued & waiting"}
	}
	return out
}

func buttons(n int) []commands.Button {
	verbs := []commands.Verb{commands.VerbApprove, commands.VerbDeny, commands.VerbPreempt, commands.VerbCancel, commands.VerbRelease, commands.VerbExtend}
	out := make([]commands.Button, n)
	for i := range out {
		v := verbs[i%len(verbs)]
		out[i] = commands.Button{Label: fmt.Sprintf("%s r%d", v, i+1), Action: commands.Action{Name: v, Request: fmt.Sprintf("r%d", i+1), Arg: "1h"}}
	}
	return out
}

// TestLimitsWithOversizedInput: whatever a reply holds, the message obeys
// Slack's limits, says that it was cut, and the overflow file has it all.
func TestLimitsWithOversizedInput(t *testing.T) {
	reason := strings.Repeat("<!channel> & tokens ", 500) // 10,000 characters
	longCell := strings.Repeat("x", 500)
	cases := map[string]struct {
		reply commands.Reply
		fits  bool     // nothing needs cutting
		whole []string // must be in Overflow.Content
	}{
		"500-row table": {
			reply: commands.Reply{Text: "Queue.", Blocks: []commands.Block{
				{Kind: commands.BlockTable, Table: &commands.Table{Columns: []string{"ID", "Size", "Who", "State"}, Rows: rows(500)}},
				{Kind: commands.BlockContext, Text: "after the table"},
				{Kind: commands.BlockActions, Buttons: buttons(2)},
			}},
			whole: []string{"r1  ", "r250 ", "r500 ", "after the table", "[approve r1]"},
		},
		"10000-character reason": {
			reply: commands.Reply{Text: "r1 queued", Blocks: []commands.Block{
				{Kind: commands.BlockHeader, Text: "r1 · 8× h100 for 4h · nlp"},
				{Kind: commands.BlockSection, Fields: []commands.Field{{Label: "Requester", Value: "alice"}, {Label: "Reason", Value: reason}}},
				{Kind: commands.BlockSection, Text: "Queued."},
				{Kind: commands.BlockActions, Buttons: buttons(1)},
			}},
			whole: []string{"Reason: " + strings.TrimSpace(reason)},
		},
		"30 buttons": {
			reply: commands.Reply{Text: "Many choices.", Blocks: []commands.Block{{Kind: commands.BlockActions, Buttons: buttons(30)}}},
			fits:  true, // in two actions blocks
		},
		"everything too long": {
			reply: commands.Reply{Text: strings.Repeat("headline & ", 400), Blocks: []commands.Block{
				{Kind: commands.BlockHeader, Text: strings.Repeat("h", 200)},
				{Kind: commands.BlockSection, Text: strings.Repeat("a long line of text\n", 400)},
				{Kind: commands.BlockSection, Fields: make([]commands.Field, 25)},
				{Kind: commands.BlockCode, Text: strings.Repeat("``` fence breaker\n", 300)},
				{Kind: commands.BlockContext, Text: strings.Repeat("c", 4000)},
				{Kind: commands.BlockTable, Table: &commands.Table{Columns: []string{"A", "B"}, Rows: [][]string{{longCell, "b"}}}},
				{Kind: commands.BlockActions, Buttons: []commands.Button{{Label: strings.Repeat("Preempt r1, ", 20), Action: commands.Action{Name: commands.VerbPreempt, Request: "r9"}, Style: "danger"}}},
			}},
			whole: []string{longCell, strings.Repeat("h", 200), strings.Repeat("c", 4000)},
		},
		"50 blocks and a long headline": {
			reply: commands.Reply{Text: strings.Repeat("headline ", 400), Blocks: func() []commands.Block {
				bs := []commands.Block{{Kind: commands.BlockHeader, Text: "Title"}}
				for i := range 49 {
					bs = append(bs, commands.Block{Kind: commands.BlockContext, Text: fmt.Sprintf("line %d", i)})
				}
				return bs
			}()},
			whole: []string{strings.TrimSpace(strings.Repeat("headline ", 400)), "(line 48)"},
		},
		"200 sections": {
			reply: commands.Reply{Text: "Lots.", Blocks: func() []commands.Block {
				var bs []commands.Block
				for i := range 200 {
					bs = append(bs, commands.Block{Kind: commands.BlockSection, Text: fmt.Sprintf("section %d", i)})
				}
				return append(bs, commands.Block{Kind: commands.BlockActions, Buttons: buttons(3)})
			}()},
			whole: []string{"section 0\n", "section 199\n"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := blockkit.Message(tc.reply)
			checkMessage(t, m)
			switch {
			case tc.fits && m.Overflow != nil:
				t.Fatal("nothing needed cutting, but Overflow is set")
			case !tc.fits && m.Overflow == nil:
				t.Fatal("nothing was reported cut")
			case !tc.fits && (!strings.HasSuffix(m.Overflow.Name, ".txt") || m.Overflow.Title == ""):
				t.Errorf("overflow file named %q titled %q", m.Overflow.Name, m.Overflow.Title)
			}
			for _, w := range tc.whole {
				if m.Overflow != nil && !strings.Contains(m.Overflow.Content, w) {
					t.Errorf("overflow content lacks %.80q", w)
				}
			}
			// Every button survives the cut, with its action.
			var want, got []commands.Action
			for _, b := range tc.reply.Blocks {
				for _, btn := range b.Buttons {
					want = append(want, btn.Action)
				}
			}
			for _, b := range blocksOf(t, m) {
				if b["type"] != "actions" {
					continue
				}
				for _, e := range b["elements"].([]any) {
					el := e.(map[string]any)
					a, _ := blockkit.ParseAction(str(el["action_id"]), str(el["value"]))
					got = append(got, a)
				}
			}
			if fmt.Sprint(want) != fmt.Sprint(got) {
				t.Errorf("buttons after the cut:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestTablePages: a table longer than one section is paged, each page
// with the header, and nothing is cut when it fits the message.
func TestTablePages(t *testing.T) {
	r := commands.Reply{Text: "Queue.", Blocks: []commands.Block{
		{Kind: commands.BlockTable, Table: &commands.Table{Columns: []string{"ID", "Size", "Who", "State"}, Rows: rows(80)}},
		{Kind: commands.BlockSection, Text: "Waiting for: capacity."},
	}}
	m := blockkit.Message(r)
	checkMessage(t, m)
	if m.Overflow != nil {
		t.Fatalf("an 80-row table fits a message in pages, but it was cut")
	}
	var pages []string
	for _, s := range texts(t, m) {
		if strings.HasPrefix(s, "```") {
			pages = append(pages, s)
		}
	}
	if len(pages) < 2 {
		t.Fatalf("want the table on several pages, got %d", len(pages))
	}
	all := strings.Join(pages, "\n")
	for i := 1; i <= 80; i++ {
		if !strings.Contains(all, fmt.Sprintf("\nr%d ", i)) {
			t.Errorf("row r%d is missing", i)
		}
	}
	for i, p := range pages {
		if !strings.HasPrefix(p, "```\nID   Size      Who    State\n---  --------  -----  ") || !strings.HasSuffix(p, "\n```") {
			t.Errorf("page %d does not start with the aligned header or is not fenced:\n%s", i, p)
		}
	}
	if got := texts(t, m); got[len(got)-1] != "Waiting for: capacity." {
		t.Errorf("the section after the table is missing: %q", got[len(got)-1])
	}
}

// TestTableTruncated: a table too long for the message says how many rows
// are missing on its last page.
func TestTableTruncated(t *testing.T) {
	m := blockkit.Message(commands.Reply{Text: "Queue.", Blocks: []commands.Block{
		{Kind: commands.BlockTable, Table: &commands.Table{Columns: []string{"ID", "Size", "Who", "State"}, Rows: rows(500)}},
	}})
	all := strings.Join(texts(t, m), "\n")
	shown := strings.Count(all, " alice ")
	want := fmt.Sprintf("… %d more rows in the attached file\n```", 500-shown)
	if shown == 0 || shown >= 500 || !strings.Contains(all, want) {
		t.Errorf("%d rows shown; want the rest counted as %q in:\n%s", shown, want, all)
	}
}

// TestEscaping: user text cannot ping, link or break out of a code block,
// and plain_text is left readable.
func TestEscaping(t *testing.T) {
	r := commands.Reply{Text: "<!channel> & <@U0BOB>", Blocks: []commands.Block{
		{Kind: commands.BlockHeader, Text: "r1 <!here> & co\u202e\x07"},
		{Kind: commands.BlockSection, Fields: []commands.Field{{Label: "Reason", Value: "<!channel> <https://x.example|click> & more"}}},
		{Kind: commands.BlockCode, Text: "reason ```*bold*```"},
		{Kind: commands.BlockContext, Text: "a <#C123> b\x00c"},
	}}
	m := blockkit.Message(r)
	checkMessage(t, m)
	if m.Text != "&lt;!channel&gt; &amp; &lt;@U0BOB&gt;" {
		t.Errorf("text = %q", m.Text)
	}
	got := texts(t, m)
	want := []string{
		"r1 <!here> & co", // plain_text: Slack shows it as is and parses nothing
		"*Reason*\n&lt;!channel&gt; &lt;https://x.example|click&gt; &amp; more",
		"```\nreason `\u200b``*bold*`\u200b``\n```",
		"a &lt;#C123&gt; bc",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("texts:\n got %q\nwant %q", got, want)
	}
	if m.Overflow != nil {
		t.Error("escaping is not cutting; nothing should overflow")
	}
}

// TestShortRepliesAreNotCut: the headline comes first (unless a header
// says it) and nothing overflows.
func TestShortRepliesAreNotCut(t *testing.T) {
	m := blockkit.Message(commands.Reply{Text: "Admitted after 42m on h100-b1-r2-n3."})
	if m.Overflow != nil || fmt.Sprint(texts(t, m)) != "[Admitted after 42m on h100-b1-r2-n3.]" {
		t.Errorf("got %q, overflow %v", texts(t, m), m.Overflow)
	}
	card := commands.Reply{Text: "r1 queued", Blocks: []commands.Block{{Kind: commands.BlockHeader, Text: "r1 · 8× h100"}}}
	if got := texts(t, blockkit.Message(card)); fmt.Sprint(got) != "[r1 · 8× h100]" {
		t.Errorf("a card's headline is its header; got %q", got)
	}
}

// TestDeterministic: the same reply renders to the same JSON.
func TestDeterministic(t *testing.T) {
	r := commands.Reply{Text: "x", Blocks: []commands.Block{{Kind: commands.BlockActions, Buttons: buttons(30)}, {Kind: commands.BlockTable, Table: &commands.Table{Columns: []string{"A"}, Rows: rows(300)}}}}
	a, b := mustJSON(t, blockkit.Message(r)), mustJSON(t, blockkit.Message(r))
	if string(a) != string(b) {
		t.Error("two renderings of one reply differ")
	}
}

// TestBlockIDs: an updated card gets new block_ids where its content
// changed, and keeps them where it did not.
func TestBlockIDs(t *testing.T) {
	card := func(status string) []string {
		m := blockkit.Message(commands.Reply{Text: "r1", Blocks: []commands.Block{
			{Kind: commands.BlockHeader, Text: "r1 · 8× h100 for 4h · nlp"},
			{Kind: commands.BlockSection, Text: status},
		}})
		var ids []string
		for _, b := range blocksOf(t, m) {
			ids = append(ids, str(b["block_id"]))
		}
		return ids
	}
	queued, again, running := card("Queued."), card("Queued."), card("Running.")
	if fmt.Sprint(queued) != fmt.Sprint(again) {
		t.Errorf("same content, different block_ids: %v and %v", queued, again)
	}
	if queued[0] != running[0] || queued[1] == running[1] || !strings.HasPrefix(running[1], "gpubot-section-2-") {
		t.Errorf("queued %v, running %v: want the header's kept and the status's new", queued, running)
	}
}

// TestHomeLimits: App Home holds at most 100 blocks and says when it cut.
func TestHomeLimits(t *testing.T) {
	var bs []commands.Block
	for i := range 150 {
		bs = append(bs, commands.Block{Kind: commands.BlockSection, Text: fmt.Sprintf("section %d", i)})
	}
	v := blockkit.Home(commands.Reply{Text: "Home", Blocks: bs})
	b := mustJSON(t, v)
	checkView(t, b)
	if v.Type != slack.VTHomeTab || len(v.Blocks.BlockSet) != 100 {
		t.Fatalf("type %s, %d blocks; want home, 100", v.Type, len(v.Blocks.BlockSet))
	}
	if !strings.Contains(string(b), "cut to fit") {
		t.Error("a cut home view must say so")
	}
}
