package console

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gpubot/gpubot/commands"
)

// Buttons numbers the buttons a console shows, so that ":click N" can
// find what button N does.
type Buttons struct {
	next    int
	actions map[int]commands.Action
	labels  map[int]string
}

// Add registers a button and returns its number.
func (b *Buttons) Add(label string, a commands.Action) int {
	if b.actions == nil {
		b.actions = map[int]commands.Action{}
		b.labels = map[int]string{}
	}
	b.next++
	b.actions[b.next] = a
	b.labels[b.next] = label
	return b.next
}

// Find returns the newest button whose label starts with label (case
// insensitive) and, if request is not empty, that acts on request (a
// request ID, or a zombie check's ID such as z3).
func (b *Buttons) Find(label, request string) (int, bool) {
	for n := b.next; n > 0; n-- {
		if !strings.HasPrefix(strings.ToLower(b.labels[n]), strings.ToLower(label)) {
			continue
		}
		a := b.actions[n]
		if request != "" && !strings.EqualFold(a.Request, request) && !(a.Name == commands.VerbKeep && strings.EqualFold(a.Arg, request)) {
			continue
		}
		return n, true
	}
	return 0, false
}

// Get returns what button n does.
func (b *Buttons) Get(n int) (commands.Action, bool) {
	a, ok := b.actions[n]
	return a, ok
}

// Render writes out as plain text. Buttons are numbered through b.
func Render(out commands.Output, b *Buttons) string {
	var sb strings.Builder
	sb.WriteString(banner(out.To))
	sb.WriteByte('\n')
	r := out.Reply
	compact := out.To.Kind == commands.UpdateCard
	if r.Text != "" {
		sb.WriteString(r.Text)
		sb.WriteByte('\n')
	}
	for _, blk := range r.Blocks {
		if compact && blk.Kind != commands.BlockActions {
			continue
		}
		renderBlock(&sb, blk, b)
	}
	return sb.String()
}

func banner(d commands.Destination) string {
	switch d.Kind {
	case commands.ToSender:
		return "── only you ──"
	case commands.ToChannel:
		return fmt.Sprintf("── %s · new card %s ──", d.Channel, d.Request)
	case commands.ToThread:
		return fmt.Sprintf("── thread of %s ──", d.Request)
	case commands.UpdateCard:
		return fmt.Sprintf("── card %s updated ──", d.Request)
	case commands.ToPerson:
		return fmt.Sprintf("── direct message to %s ──", d.Person)
	case commands.ToPost:
		return fmt.Sprintf("── %s ──", d.Channel)
	}
	return "──"
}

func renderBlock(sb *strings.Builder, blk commands.Block, b *Buttons) {
	switch blk.Kind {
	case commands.BlockHeader:
		sb.WriteString("  " + blk.Text + "\n")
	case commands.BlockSection:
		if blk.Text != "" {
			sb.WriteString(indent(blk.Text, "  "))
		}
		if len(blk.Fields) > 0 {
			parts := make([]string, len(blk.Fields))
			for i, f := range blk.Fields {
				parts[i] = f.Label + ": " + strings.ReplaceAll(f.Value, "\n", "; ")
			}
			sb.WriteString(indent(strings.Join(parts, " · "), "  "))
		}
	case commands.BlockTable:
		if blk.Table != nil {
			sb.WriteString(indent(renderTable(*blk.Table), "  "))
		}
	case commands.BlockCode:
		sb.WriteString(indent(blk.Text, "    "))
	case commands.BlockContext:
		sb.WriteString(indent("("+blk.Text+")", "  "))
	case commands.BlockActions:
		parts := make([]string, len(blk.Buttons))
		for i, btn := range blk.Buttons {
			parts[i] = fmt.Sprintf("[%d] %s", b.Add(btn.Label, btn.Action), btn.Label)
		}
		sb.WriteString("  " + strings.Join(parts, "   ") + "\n")
	}
}

// renderTable aligns columns by display width.
func renderTable(t commands.Table) string {
	width := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		width[i] = utf8.RuneCountInString(c)
	}
	for _, row := range t.Rows {
		for i := 0; i < len(row) && i < len(width); i++ {
			width[i] = max(width[i], utf8.RuneCountInString(row[i]))
		}
	}
	var sb strings.Builder
	line := func(cells []string) {
		for i := range width {
			cell := ""
			if i < len(cells) {
				cell = cells[i]
			}
			if i == len(width)-1 {
				sb.WriteString(cell)
				break
			}
			sb.WriteString(cell)
			sb.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell)+2))
		}
		sb.WriteString("\n")
	}
	line(t.Columns)
	for _, row := range t.Rows {
		line(row)
	}
	return sb.String()
}

func indent(text, pre string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(pre+l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}
