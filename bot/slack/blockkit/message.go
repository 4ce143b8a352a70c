package blockkit

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/slack-go/slack"

	"github.com/gpubot/gpubot/commands"
)

// Slack's limits, in characters.
const (
	maxMessageBlocks = 50
	maxViewBlocks    = 100
	maxText          = 3000 // section text, message text, context text
	maxFields        = 10
	maxField         = 2000
	maxHeader        = 150
	maxButtons       = 25 // elements of an actions block
	maxButtonText    = 75
	maxValue         = 2000
)

// Budgets of all the text in a message or view, in bytes. Slack refuses
// a message whose blocks hold more than about 13,200 characters
// (msg_blocks_too_long) although every block is within its own limit;
// 11,000 bytes keeps clear of that. Views allow more.
const (
	messageBudget = 11000
	viewBudget    = 60000
)

// maxMessageJSON bounds the JSON of a rendered message (text and
// blocks), so that it can ride a Socket Mode ack, which Slack drops at
// 20 KB.
const maxMessageJSON = 19000

// Rendered is a Reply rendered as a Slack message.
type Rendered struct {
	// Text is the fallback and notification text (Reply.Text, escaped),
	// at most 3000 characters.
	Text string `json:"text"`
	// Blocks obey Slack's limits: at most 50 blocks, section text ≤ 3000,
	// ≤ 10 fields each ≤ 2000, header ≤ 150, button text ≤ 75.
	Blocks []slack.Block `json:"blocks"`
	// Overflow is non-nil when something had to be cut; Blocks then end
	// with a context line saying so.
	Overflow *Overflow `json:"overflow,omitempty"`
}

// Overflow is the whole reply as a plain-text file, for the files upload
// flow.
type Overflow struct {
	Name    string `json:"name"`    // file name, e.g. "gpubot-capacity-now-per-flavor.txt"
	Title   string `json:"title"`   // file title shown in Slack: the reply's headline
	Content string `json:"content"` // the whole reply as plain text, nothing cut
}

// Message renders r as a Slack message within Block Kit limits. The
// blocks start with r.Text as a section unless r starts with a header
// (cards, whose header and status say it). The JSON of Text and Blocks
// together stays under 19,000 bytes, so the message may ride a Socket
// Mode ack.
func Message(r commands.Reply) Rendered {
	text, textCut := cut(escape(r.Text), maxText)
	name := fileName(r)
	note := fmt.Sprintf("Cut to fit Slack's limits: the full text is in the attached file %s.", name)
	budget, maxBlocks := messageBudget, maxMessageBlocks
	if textCut {
		maxBlocks-- // for the note
	}
	for {
		blocks, wasCut := render(r, maxBlocks, budget, note)
		if fits(text, blocks) || budget < 1000 {
			out := Rendered{Text: text, Blocks: blocks}
			if wasCut || textCut {
				if !wasCut {
					out.Blocks = append(out.Blocks, noteBlock(len(out.Blocks)+1, note))
				}
				out.Overflow = &Overflow{Name: name, Title: title(r), Content: plainText(r)}
			}
			return out
		}
		budget = budget * 3 / 4
	}
}

// fits reports whether text and blocks marshal to at most maxMessageJSON
// bytes.
func fits(text string, blocks []slack.Block) bool {
	b, err := json.Marshal(struct {
		Text   string        `json:"text"`
		Blocks []slack.Block `json:"blocks"`
	}{text, blocks})
	return err == nil && len(b) <= maxMessageJSON
}

// Home renders r as the App Home tab: at most 100 blocks. What does not
// fit is cut, and a last context line says so.
func Home(r commands.Reply) slack.HomeTabViewRequest {
	blocks, _ := render(r, maxViewBlocks, viewBudget, "Some of this was cut to fit Slack's limits; /gpu status, /gpu usage and /gpu capacity show everything.")
	return slack.HomeTabViewRequest{Type: slack.VTHomeTab, Blocks: slack.Blocks{BlockSet: blocks}}
}

// fileName names the overflow file after the reply's title.
func fileName(r commands.Reply) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(title(r)) {
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(c)
		default:
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	if b.Len() == 0 {
		return "gpubot.txt"
	}
	return "gpubot-" + b.String() + ".txt"
}

// title is the reply's headline, or its first header.
func title(r commands.Reply) string {
	t := r.Text
	if t == "" {
		for _, b := range r.Blocks {
			if b.Kind == commands.BlockHeader {
				t = b.Text
				break
			}
		}
	}
	t, _ = cut(clean(t), 250)
	return t
}
