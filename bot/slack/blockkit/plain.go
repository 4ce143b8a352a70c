package blockkit

import (
	"strings"

	"github.com/gpubot/gpubot/commands"
)

// maxCell is the widest a table cell is shown in Slack, in characters;
// wider cells are cut there (the attached file has them whole).
const maxCell = 80

// grid is a table laid out in monospace: the header line and one line
// per row, columns aligned by character count and two spaces apart.
type grid struct {
	head  string
	rows  []string
	width []int
}

// layout lays t out, cutting cells to limit characters (0: no limit). It
// reports whether it cut anything. Text is not escaped.
func layout(t commands.Table, limit int) (grid, bool) {
	cells := func(row []string) ([]string, bool) {
		out := make([]string, len(t.Columns))
		cutAny := false
		for i := range out {
			if i < len(row) {
				out[i] = clean(row[i])
			}
			if limit > 0 {
				var c bool
				out[i], c = cut(out[i], limit)
				cutAny = cutAny || c
			}
		}
		return out, cutAny || len(row) > len(t.Columns)
	}
	head, wasCut := cells(t.Columns)
	rows := make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		var c bool
		rows[i], c = cells(r)
		wasCut = wasCut || c
	}
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = runes(h)
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], runes(c))
		}
	}
	line := func(cs []string) string {
		var b strings.Builder
		for i, c := range cs {
			b.WriteString(c)
			if i < len(cs)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-runes(c)+2))
			}
		}
		return strings.TrimRight(b.String(), " ")
	}
	g := grid{head: line(head), width: width}
	for _, r := range rows {
		g.rows = append(g.rows, line(r))
	}
	return g, wasCut
}

// rule is the dashed line under a grid's header.
func (g grid) rule() string {
	parts := make([]string, len(g.width))
	for i, w := range g.width {
		parts[i] = strings.Repeat("-", w)
	}
	return strings.Join(parts, "  ")
}

// plainText is the whole reply as plain text, nothing cut: what the
// Overflow file holds. It reads like the console.
func plainText(r commands.Reply) string {
	var b strings.Builder
	if r.Text != "" {
		b.WriteString(r.Text + "\n")
	}
	for _, blk := range r.Blocks {
		b.WriteByte('\n')
		switch blk.Kind {
		case commands.BlockHeader:
			b.WriteString(blk.Text + "\n" + strings.Repeat("=", runes(blk.Text)) + "\n")
		case commands.BlockSection:
			if blk.Text != "" {
				b.WriteString(blk.Text + "\n")
			}
			for _, f := range blk.Fields {
				b.WriteString(f.Label + ": " + f.Value + "\n")
			}
		case commands.BlockTable:
			if blk.Table != nil {
				g, _ := layout(*blk.Table, 0)
				b.WriteString(g.head + "\n" + g.rule() + "\n")
				for _, row := range g.rows {
					b.WriteString(row + "\n")
				}
			}
		case commands.BlockCode:
			b.WriteString(blk.Text + "\n")
		case commands.BlockContext:
			b.WriteString("(" + blk.Text + ")\n")
		case commands.BlockActions:
			labels := make([]string, len(blk.Buttons))
			for i, btn := range blk.Buttons {
				labels[i] = "[" + btn.Label + "]"
			}
			b.WriteString("Buttons in Slack: " + strings.Join(labels, " ") + "\n")
		}
	}
	return b.String()
}
