package commands_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/commands"
)

// dests shows where each output goes: "sender", "channel #nlp r1",
// "thread r1", "card r1", "person alice".
func dests(outs []commands.Output) []string {
	var out []string
	for _, o := range outs {
		out = append(out, dest(o.To))
	}
	return out
}

func dest(d commands.Destination) string {
	switch d.Kind {
	case commands.ToSender:
		return "sender"
	case commands.ToChannel:
		return "channel " + d.Channel + " " + d.Request
	case commands.ToThread:
		return "thread " + d.Request
	case commands.UpdateCard:
		return "card " + d.Request
	case commands.ToPerson:
		return "person " + d.Person
	}
	return string(d.Kind) + "?"
}

// text is everything a reply says, blocks included, one part a line.
func text(r commands.Reply) string {
	parts := []string{r.Text}
	for _, b := range r.Blocks {
		if b.Text != "" {
			parts = append(parts, b.Text)
		}
		for _, f := range b.Fields {
			parts = append(parts, f.Label+": "+f.Value)
		}
		if b.Table != nil {
			parts = append(parts, strings.Join(b.Table.Columns, " | "))
			for _, row := range b.Table.Rows {
				parts = append(parts, strings.Join(row, " | "))
			}
		}
		for _, bt := range b.Buttons {
			parts = append(parts, "["+bt.Label+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// buttons lists a reply's buttons as "Label: verb id arg".
func buttons(r commands.Reply) []string {
	var out []string
	for _, b := range r.Blocks {
		for _, bt := range b.Buttons {
			out = append(out, strings.TrimSpace(fmt.Sprintf("%s: %s %s %s", bt.Label, bt.Action.Name, bt.Action.Request, bt.Action.Arg)))
		}
	}
	return out
}

// said is what one destination was told, in order.
func said(outs []commands.Output, to string) []commands.Reply {
	var out []commands.Reply
	for _, o := range outs {
		if dest(o.To) == to {
			out = append(out, o.Reply)
		}
	}
	return out
}

// want is a phrase some output to a destination must contain.
type want struct{ to, phrase string }

// check fails unless, for each want, some output to its destination
// contains the phrase (in Text or blocks).
func check(t *testing.T, outs []commands.Output, ws ...want) {
	t.Helper()
	for _, w := range ws {
		found := false
		for _, r := range said(outs, w.to) {
			if strings.Contains(text(r), w.phrase) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no output to %q says %q; outputs:\n%s", w.to, w.phrase, show(outs))
		}
	}
}

// checkNot fails if an output to a destination contains the phrase.
func checkNot(t *testing.T, outs []commands.Output, ws ...want) {
	t.Helper()
	for _, w := range ws {
		for _, r := range said(outs, w.to) {
			if strings.Contains(text(r), w.phrase) {
				t.Errorf("an output to %q says %q, which it should not; outputs:\n%s", w.to, w.phrase, show(outs))
			}
		}
	}
}

func show(outs []commands.Output) string {
	var b strings.Builder
	for _, o := range outs {
		fmt.Fprintf(&b, "── %s ──\n%s\n", dest(o.To), text(o.Reply))
	}
	return b.String()
}

// diff compares with cmp.Diff, failing with what.
func diff(t *testing.T, what string, want, got any, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// recorder keeps what is delivered to it, for concurrent senders (the
// refresher, SetOrderedDelivery).
type recorder struct {
	mu   sync.Mutex
	outs []commands.Output
}

func (r *recorder) send(_ context.Context, outs []commands.Output) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outs = append(r.outs, outs...)
}

// all is a copy of what was delivered so far, in order.
func (r *recorder) all() []commands.Output {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.outs)
}
