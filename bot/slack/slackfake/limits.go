package slackfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Block Kit limits Slack enforces (docs.slack.dev, "Block Kit" reference).
const (
	maxMessageBlocks   = 50
	maxViewBlocks      = 100
	maxMessageText     = 40000
	maxSectionText     = 3000
	maxSectionFields   = 10
	maxFieldText       = 2000
	maxHeaderText      = 150
	maxMarkdownText    = 12000
	maxActionsElements = 25
	maxContextElements = 10
	maxID              = 255 // block_id, action_id
	maxButtonText      = 75
	maxButtonValue     = 2000
	maxURL             = 3000
	maxInputLabel      = 2000
	maxViewTitle       = 24
	maxPrivateMetadata = 3000
)

// knownBlocks are the block types Slack accepts; anything else is rejected.
var knownBlocks = map[string]bool{
	"actions": true, "context": true, "context_actions": true, "divider": true,
	"file": true, "header": true, "image": true, "input": true, "markdown": true,
	"rich_text": true, "section": true, "video": true, "table": true, "call": true,
}

// blockChecker collects Slack-style validation messages.
type blockChecker struct {
	inView   bool
	messages []string
}

func (c *blockChecker) errorf(pointer, format string, args ...any) {
	c.messages = append(c.messages, fmt.Sprintf("[ERROR] "+format+" [json-pointer:%s]", append(args, pointer)...))
}

func length(v any) int {
	s, _ := v.(string)
	return utf8.RuneCountInString(s)
}

// text checks a text object {"type":"plain_text"|"mrkdwn","text":…}.
func (c *blockChecker) text(ptr string, v any, maxLen int, plainOnly bool) {
	obj, ok := v.(map[string]any)
	if !ok {
		c.errorf(ptr, "must be a text object")
		return
	}
	typ, _ := obj["type"].(string)
	switch {
	case typ == "plain_text", typ == "mrkdwn" && !plainOnly:
	case plainOnly:
		c.errorf(ptr+"/type", "must be plain_text")
	default:
		c.errorf(ptr+"/type", "must be plain_text or mrkdwn")
	}
	n := length(obj["text"])
	if _, isString := obj["text"].(string); !isString || n == 0 {
		c.errorf(ptr+"/text", "must be more than 0 characters")
	} else if n > maxLen {
		c.errorf(ptr+"/text", "must be less than %d characters", maxLen+1)
	}
}

func (c *blockChecker) id(ptr string, v any) {
	if v == nil {
		return
	}
	if s, ok := v.(string); !ok || utf8.RuneCountInString(s) > maxID || s == "" {
		c.errorf(ptr, "must be a string of 1 to %d characters", maxID)
	}
}

// element checks an interactive element (button, select, input, ...).
func (c *blockChecker) element(ptr string, v any, actionIDs map[string]bool) {
	el, ok := v.(map[string]any)
	if !ok {
		c.errorf(ptr, "must be an object")
		return
	}
	typ, _ := el["type"].(string)
	if typ == "" {
		c.errorf(ptr+"/type", "must be provided")
		return
	}
	if aid, ok := el["action_id"].(string); ok {
		if actionIDs[aid] {
			c.errorf(ptr+"/action_id", "action_id %q is already used in this block", aid)
		}
		actionIDs[aid] = true
	}
	c.id(ptr+"/action_id", el["action_id"])
	switch typ {
	case "button":
		c.text(ptr+"/text", el["text"], maxButtonText, true)
		if length(el["value"]) > maxButtonValue {
			c.errorf(ptr+"/value", "must be less than %d characters", maxButtonValue+1)
		}
		if length(el["url"]) > maxURL {
			c.errorf(ptr+"/url", "must be less than %d characters", maxURL+1)
		}
		if st, ok := el["style"].(string); ok && st != "primary" && st != "danger" {
			c.errorf(ptr+"/style", "must be primary or danger")
		}
	case "image":
		if length(el["alt_text"]) == 0 {
			c.errorf(ptr+"/alt_text", "must be provided")
		}
	}
}

// block checks one block.
func (c *blockChecker) block(ptr string, v any, blockIDs map[string]bool) {
	b, ok := v.(map[string]any)
	if !ok {
		c.errorf(ptr, "must be an object")
		return
	}
	typ, _ := b["type"].(string)
	if !knownBlocks[typ] {
		c.errorf(ptr+"/type", "must be a known block type (got %q)", typ)
		return
	}
	if bid, ok := b["block_id"].(string); ok {
		if blockIDs[bid] {
			c.errorf(ptr+"/block_id", "block_id %q is already used", bid)
		}
		blockIDs[bid] = true
	}
	c.id(ptr+"/block_id", b["block_id"])
	actionIDs := map[string]bool{}
	switch typ {
	case "section":
		fields, _ := b["fields"].([]any)
		if b["text"] == nil && len(fields) == 0 && b["expand"] == nil {
			c.errorf(ptr, "must provide text or fields")
		}
		if b["text"] != nil {
			c.text(ptr+"/text", b["text"], maxSectionText, false)
		}
		if len(fields) > maxSectionFields {
			c.errorf(ptr+"/fields", "must have no more than %d items", maxSectionFields)
		}
		for i, f := range fields {
			c.text(fmt.Sprintf("%s/fields/%d", ptr, i), f, maxFieldText, false)
		}
		if acc := b["accessory"]; acc != nil {
			c.element(ptr+"/accessory", acc, actionIDs)
		}
	case "header":
		c.text(ptr+"/text", b["text"], maxHeaderText, true)
	case "markdown":
		if n := length(b["text"]); n == 0 || n > maxMarkdownText {
			c.errorf(ptr+"/text", "must be 1 to %d characters", maxMarkdownText)
		}
	case "actions":
		els, _ := b["elements"].([]any)
		if len(els) == 0 || len(els) > maxActionsElements {
			c.errorf(ptr+"/elements", "must have 1 to %d items", maxActionsElements)
		}
		for i, el := range els {
			c.element(fmt.Sprintf("%s/elements/%d", ptr, i), el, actionIDs)
		}
	case "context":
		els, _ := b["elements"].([]any)
		if len(els) == 0 || len(els) > maxContextElements {
			c.errorf(ptr+"/elements", "must have 1 to %d items", maxContextElements)
		}
		for i, el := range els {
			p := fmt.Sprintf("%s/elements/%d", ptr, i)
			if m, ok := el.(map[string]any); ok && m["type"] != "image" {
				c.text(p, el, maxMessageText, false)
			}
		}
	case "image":
		if length(b["alt_text"]) == 0 {
			c.errorf(ptr+"/alt_text", "must be provided")
		}
		if b["image_url"] == nil && b["slack_file"] == nil {
			c.errorf(ptr, "must provide image_url or slack_file")
		}
	case "input":
		if !c.inView {
			c.errorf(ptr+"/type", "input blocks are only allowed in views")
		}
		c.text(ptr+"/label", b["label"], maxInputLabel, true)
		if b["element"] == nil {
			c.errorf(ptr+"/element", "must be provided")
		} else {
			c.element(ptr+"/element", b["element"], actionIDs)
		}
	}
}

// checkBlockList checks a parsed blocks array.
func checkBlockList(ptr string, blocks []any, maxBlocks int, inView bool) []string {
	c := &blockChecker{inView: inView}
	if len(blocks) > maxBlocks {
		c.errorf(ptr, "no more than %d items allowed", maxBlocks)
	}
	ids := map[string]bool{}
	for i, b := range blocks {
		c.block(fmt.Sprintf("%s/%d", ptr, i), b, ids)
	}
	return c.messages
}

// checkMessageBlocks validates a message's blocks parameter as Slack does.
// It returns the blocks compacted (nil when absent), and the error code with
// messages when they are invalid.
func checkMessageBlocks(raw json.RawMessage) (json.RawMessage, string, []string) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, "", nil
	}
	var blocks []any
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, "invalid_blocks_format", []string{"[ERROR] blocks must be a JSON array of objects"}
	}
	if msgs := checkBlockList("/blocks", blocks, maxMessageBlocks, false); len(msgs) > 0 {
		return nil, "invalid_blocks", msgs
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return nil, "invalid_blocks_format", nil
	}
	return buf.Bytes(), "", nil
}

// checkText validates a message's text.
func checkText(text string, hasBlocks bool) string {
	switch {
	case utf8.RuneCountInString(text) > maxMessageText:
		return "msg_too_long"
	case text == "" && !hasBlocks:
		return "no_text"
	}
	return ""
}

// checkView validates a view object of the wanted type ("modal" or "home");
// it returns the parsed view and Slack's messages when invalid.
func checkView(raw json.RawMessage, want string) (map[string]any, []string) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, []string{"[ERROR] missing required field: view"}
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, []string{"[ERROR] view must be a JSON object [json-pointer:/view]"}
	}
	c := &blockChecker{inView: true}
	typ, _ := v["type"].(string)
	if typ != want {
		c.errorf("/view/type", "must be %s (got %q)", want, typ)
	}
	if want == "modal" {
		if v["title"] == nil {
			c.errorf("/view/title", "must be provided")
		} else {
			c.text("/view/title", v["title"], maxViewTitle, true)
		}
		for _, k := range []string{"submit", "close"} {
			if v[k] != nil {
				c.text("/view/"+k, v[k], maxViewTitle, true)
			}
		}
	}
	if length(v["private_metadata"]) > maxPrivateMetadata {
		c.errorf("/view/private_metadata", "must be less than %d characters", maxPrivateMetadata+1)
	}
	if length(v["callback_id"]) > maxID {
		c.errorf("/view/callback_id", "must be less than %d characters", maxID+1)
	}
	blocks, ok := v["blocks"].([]any)
	if !ok {
		c.errorf("/view/blocks", "must be an array")
	}
	c.messages = append(c.messages, checkBlockList("/view/blocks", blocks, maxViewBlocks, true)...)
	return v, c.messages
}
