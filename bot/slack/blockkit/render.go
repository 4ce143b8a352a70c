package blockkit

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/gpubot/gpubot/commands"
)

// piece is one Slack block before it has a block_id.
type piece struct {
	kind string // the block_id's middle part: header, section, fields, table, code, context, actions
	size int    // bytes of text it holds
	// make builds the block with its block_id.
	make func(id string) slack.Block
}

// unit is what one commands.Block becomes: fixed pieces, or a table that
// is paged to the room left.
type unit struct {
	pieces []piece
	table  *commands.Table
	cut    bool // pieces had to be shortened
}

// render turns r into at most maxBlocks blocks holding at most budget
// bytes of text. If anything is cut, the last block is a context line
// with note. Action blocks are kept before anything else; tables get the
// room the other blocks leave.
func render(r commands.Reply, maxBlocks, budget int, note string) ([]slack.Block, bool) {
	units := make([]unit, 0, len(r.Blocks)+1)
	if r.Text != "" && (len(r.Blocks) == 0 || r.Blocks[0].Kind != commands.BlockHeader) {
		units = append(units, convert(commands.Block{Kind: commands.BlockSection, Text: r.Text}))
	}
	for _, b := range r.Blocks {
		units = append(units, convert(b))
	}
	if out, ok := place(units, maxBlocks, budget, ""); ok {
		return out, false
	}
	out, _ := place(units, maxBlocks-1, budget-len(note), note)
	return out, true
}

// place lays units out within maxBlocks and budget. It reports false if
// anything was cut; then, if note is not empty, a context block with
// note ends the output.
func place(units []unit, maxBlocks, budget int, note string) ([]slack.Block, bool) {
	ok := true
	// Actions first: they are what a reader acts on.
	keep := map[[2]int]bool{}
	blocksLeft, bytesLeft := maxBlocks, budget
	for i, u := range units {
		for j, p := range u.pieces {
			if p.kind != "actions" {
				continue
			}
			if blocksLeft > 0 && p.size <= bytesLeft {
				keep[[2]int{i, j}] = true
				blocksLeft--
				bytesLeft -= p.size
			} else {
				ok = false
			}
		}
	}
	// Then the other fixed pieces, in order, while they fit.
	full := true
	for i, u := range units {
		ok = ok && !u.cut
		for j, p := range u.pieces {
			if p.kind == "actions" {
				continue
			}
			if full && blocksLeft > 0 && p.size <= bytesLeft {
				keep[[2]int{i, j}] = true
				blocksLeft--
				bytesLeft -= p.size
			} else {
				full, ok = false, false
			}
		}
	}
	// Tables share what is left, in order.
	pages := map[int][]piece{}
	for i, u := range units {
		if u.table == nil {
			continue
		}
		if !full {
			ok = false
			continue
		}
		ps, used, whole := pageTable(*u.table, blocksLeft, bytesLeft)
		pages[i] = ps
		blocksLeft -= len(ps)
		bytesLeft -= used
		if !whole {
			ok = false
		}
	}
	var out []slack.Block
	add := func(p piece) {
		out = append(out, p.make(fmt.Sprintf("gpubot-%s-%d", p.kind, len(out)+1)))
	}
	for i, u := range units {
		for j, p := range u.pieces {
			if keep[[2]int{i, j}] {
				add(p)
			}
		}
		for _, p := range pages[i] {
			add(p)
		}
	}
	if !ok && note != "" {
		out = append(out, noteBlock(len(out)+1, note))
	}
	// Action IDs must be unique in a message: number the verbs that
	// occur more than once.
	numberActions(out)
	stamp(out)
	return out, ok
}

// stamp appends to each block_id a hash of the block's content. Slack
// asks for a new block_id when a message is updated; a card that changes
// gets new ones, and the same content always gets the same.
func stamp(blocks []slack.Block) {
	for _, b := range blocks {
		raw, err := json.Marshal(b)
		if err != nil {
			continue
		}
		h := fnv.New32a()
		h.Write(raw)
		sum := fmt.Sprintf("-%08x", h.Sum32())
		switch x := b.(type) {
		case *slack.HeaderBlock:
			x.BlockID += sum
		case *slack.SectionBlock:
			x.BlockID += sum
		case *slack.ContextBlock:
			x.BlockID += sum
		case *slack.ActionBlock:
			x.BlockID += sum
		}
	}
}

func noteBlock(n int, note string) slack.Block {
	return slack.NewContextBlock(fmt.Sprintf("gpubot-note-%d", n), slack.NewTextBlockObject(slack.MarkdownType, escape(note), false, false))
}

// convert renders one block's pieces, or defers a table.
func convert(b commands.Block) unit {
	var u unit
	switch b.Kind {
	case commands.BlockHeader:
		text, c := cut(strings.TrimSpace(clean(b.Text)), maxHeader)
		if text == "" {
			return u
		}
		u.cut = c
		u.pieces = append(u.pieces, piece{kind: "header", size: len(text), make: func(id string) slack.Block {
			return slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, text, false, false), slack.HeaderBlockOptionBlockID(id))
		}})
	case commands.BlockSection:
		if strings.TrimSpace(b.Text) != "" {
			u.pieces = append(u.pieces, sections("section", escape(b.Text), false)...)
		}
		u.pieces = append(u.pieces, fieldSections(b.Fields, &u.cut)...)
	case commands.BlockCode:
		if strings.TrimSpace(b.Text) != "" {
			u.pieces = append(u.pieces, sections("code", escape(unfence(b.Text)), true)...)
		}
	case commands.BlockContext:
		text, c := cut(strings.TrimSpace(escape(b.Text)), maxText)
		if text == "" {
			return u
		}
		u.cut = c
		u.pieces = append(u.pieces, piece{kind: "context", size: len(text), make: func(id string) slack.Block {
			return slack.NewContextBlock(id, slack.NewTextBlockObject(slack.MarkdownType, text, false, false))
		}})
	case commands.BlockTable:
		if b.Table != nil && len(b.Table.Columns) > 0 {
			u.table = b.Table
		}
	case commands.BlockActions:
		for i := 0; i < len(b.Buttons); i += maxButtons {
			bs := b.Buttons[i:min(i+maxButtons, len(b.Buttons))]
			p, c := actionPiece(bs)
			u.cut = u.cut || c
			u.pieces = append(u.pieces, p)
		}
	}
	return u
}

// sections splits escaped mrkdwn text into sections of at most maxText
// characters; code sections are fenced.
func sections(kind, text string, fenced bool) []piece {
	limit := maxText
	if fenced {
		limit -= len("```\n\n```")
	}
	var out []piece
	for _, part := range split(text, limit) {
		if fenced {
			part = "```\n" + part + "\n```"
		}
		if strings.TrimSpace(part) == "" {
			continue
		}
		out = append(out, piece{kind: kind, size: len(part), make: func(id string) slack.Block {
			return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, part, false, false), nil, nil, slack.SectionBlockOptionBlockID(id))
		}})
	}
	return out
}

// fieldSections puts fields into sections of at most ten, each field
// "*Label*\nValue" cut to maxField characters.
func fieldSections(fs []commands.Field, wasCut *bool) []piece {
	var texts []string
	for _, f := range fs {
		label, value := strings.TrimSpace(escape(f.Label)), strings.TrimSpace(escape(f.Value))
		t := value
		if label != "" {
			t = "*" + label + "*\n" + value
		}
		if strings.TrimSpace(t) == "" {
			continue
		}
		var c bool
		t, c = cut(t, maxField)
		*wasCut = *wasCut || c
		texts = append(texts, t)
	}
	var out []piece
	for i := 0; i < len(texts); i += maxFields {
		chunk := texts[i:min(i+maxFields, len(texts))]
		size := 0
		for _, t := range chunk {
			size += len(t)
		}
		out = append(out, piece{kind: "fields", size: size, make: func(id string) slack.Block {
			objs := make([]*slack.TextBlockObject, len(chunk))
			for k, t := range chunk {
				objs[k] = slack.NewTextBlockObject(slack.MarkdownType, t, false, false)
			}
			return slack.NewSectionBlock(nil, objs, nil, slack.SectionBlockOptionBlockID(id))
		}})
	}
	return out
}

// pageTable lays t out in fenced sections (pages) of at most maxText
// characters, each starting with the header, within blocks and bytes.
// It returns the pages, the bytes they hold, and whether every row (and
// every cell whole) is in them. A table cut short ends with a line
// saying how many rows are missing.
func pageTable(t commands.Table, blocks, bytes int) ([]piece, int, bool) {
	const fence = len("```\n\n```")
	g, cellsCut := layout(t, maxCell)
	head := escape(g.head) + "\n" + g.rule()
	more := func(n int) string { return fmt.Sprintf("… %d more rows in the attached file", n) }
	moreLen := len(more(len(g.rows)))
	lines := make([]string, len(g.rows))
	for i, r := range g.rows {
		var c bool
		lines[i], c = cut(escape(r), maxText-fence-len(head)-moreLen-2)
		cellsCut = cellsCut || c
	}
	var pages []piece
	used, row := 0, 0
	emit := func(body string) {
		text := "```\n" + body + "\n```"
		pages = append(pages, tablePiece(text))
		used += len(text)
	}
	for len(pages) < blocks {
		room := min(maxText, bytes-used) - fence
		page := head
		start := row
		for row < len(lines) && len(page)+1+len(lines[row]) <= room {
			page += "\n" + lines[row]
			row++
		}
		if row == len(lines) {
			if len(page) > room {
				break
			}
			emit(page)
			return pages, used, !cellsCut
		}
		// Is there room for another page with at least one row?
		next := min(maxText, bytes-used-len(page)-2*fence) - fence
		if len(pages)+1 < blocks && row > start && next >= len(head)+1+len(lines[row])+1+moreLen {
			emit(page)
			continue
		}
		// This is the last page: make room to say what is missing.
		for row > start && len(page)+1+len(more(len(lines)-row)) > room {
			page = page[:strings.LastIndexByte(page, '\n')]
			row--
		}
		if len(page)+1+len(more(len(lines)-row)) <= room {
			emit(page + "\n" + more(len(lines)-row))
		}
		break
	}
	return pages, used, false
}

func tablePiece(text string) piece {
	return piece{kind: "table", size: len(text), make: func(id string) slack.Block {
		return slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil, slack.SectionBlockOptionBlockID(id))
	}}
}
