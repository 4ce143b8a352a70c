package console

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/commands"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name.golden (or rewrites it with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update once to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

func TestRenderGolden(t *testing.T) {
	card := commands.Reply{
		Text: "r7 queued: starts in 40m–1h10m (09:40–10:10), 2 ahead of it",
		Blocks: []commands.Block{
			{Kind: commands.BlockHeader, Text: "r7 · 8× h100 for 4h · nlp"},
			{Kind: commands.BlockSection, Fields: []commands.Field{{Label: "Requester", Value: "alice"}, {Label: "Priority", Value: "normal"}}},
			{Kind: commands.BlockSection, Text: "Queued: starts in 40m–1h10m (09:40–10:10), 2 ahead of it. Waiting for capacity: 6 of 128 h100 GPUs are free and it needs 8."},
			{Kind: commands.BlockActions, Buttons: []commands.Button{
				{Label: "Preempt r3", Action: commands.Action{Name: commands.VerbPreempt, Request: "r7"}, Style: "danger"},
				{Label: "Cancel", Action: commands.Action{Name: commands.VerbCancel, Request: "r7"}},
			}},
			{Kind: commands.BlockContext, Text: "Requested 09:00 by alice"},
		},
	}
	tbl := commands.Reply{
		Text: "Capacity now, per flavor.",
		Blocks: []commands.Block{{Kind: commands.BlockTable, Table: &commands.Table{
			Columns: []string{"Flavor", "GPUs", "Free", "Fragmented"},
			Rows:    [][]string{{"h100", "128", "14", "6 GPUs (4.7% of all)"}, {"a100", "64", "40", "0 GPUs (0.0% of all)"}},
		}}},
	}
	parseErr := commands.Reply{
		Text: "Unknown flavor 'h10'; did you mean h100?.",
		Blocks: []commands.Block{
			{Kind: commands.BlockCode, Text: "request 8xh10 for 4h\n         ^^^"},
			{Kind: commands.BlockContext, Text: "Example: /gpu request 8xh100 for 4h team nlp"},
		},
	}
	cases := map[string][]commands.Output{
		"card": {
			{To: commands.Destination{Kind: commands.ToChannel, Channel: "#gpu-nlp", Request: "r7"}, Reply: card},
			{To: commands.Destination{Kind: commands.UpdateCard, Request: "r7"}, Reply: card},
		},
		"table":       {{To: commands.Destination{Kind: commands.ToSender}, Reply: tbl}},
		"parse-error": {{To: commands.Destination{Kind: commands.ToSender}, Reply: parseErr}},
		"thread-and-dm": {
			{To: commands.Destination{Kind: commands.ToThread, Request: "r7"}, Reply: commands.Reply{Text: "Admitted after 42m on h100-b1-r2-n3; ends 13:42 unless extended."}},
			{To: commands.Destination{Kind: commands.ToPerson, Person: "alice", ChatID: "U0ALICE"}, Reply: commands.Reply{Text: "Your request r7 was preempted by r9 (carol, urgent) and is queued again."}},
		},
	}
	for name, outs := range cases {
		t.Run(name, func(t *testing.T) {
			var b Buttons
			var sb strings.Builder
			for _, o := range outs {
				sb.WriteString(Render(o, &b))
			}
			golden(t, "render-"+name, sb.String())
		})
	}
}

func TestButtonsAreNumberedInOrderAndFound(t *testing.T) {
	var b Buttons
	a1 := commands.Action{Name: commands.VerbApprove, Request: "r1"}
	a2 := commands.Action{Name: commands.VerbDeny, Request: "r1"}
	if n := b.Add("Approve", a1); n != 1 {
		t.Fatalf("first button numbered %d, want 1", n)
	}
	if n := b.Add("Deny", a2); n != 2 {
		t.Fatalf("second button numbered %d, want 2", n)
	}
	if got, ok := b.Get(2); !ok || got != a2 {
		t.Errorf("Get(2) = %v, %v; want %v", got, ok, a2)
	}
	if _, ok := b.Get(3); ok {
		t.Errorf("Get(3) found a button that was never shown")
	}
	a3 := commands.Action{Name: commands.VerbApprove, Request: "r2"}
	b.Add("Approve", a3)
	b.Add("Still using it", commands.Action{Name: commands.VerbKeep, Request: "r2", Arg: "z7"})
	b.Add("Extend 1h", commands.Action{Name: commands.VerbExtend, Request: "r2", Arg: "1h"})
	for _, tc := range []struct {
		label, request string
		want           int
		ok             bool
	}{
		{"approve", "", 3, true},
		{"Approve", "r1", 1, true},
		{"den", "", 2, true},
		{"release", "", 0, false},
		{"approve", "r9", 0, false},
		{"still using it", "z7", 4, true},
		{"still", "r2", 4, true},
		{"extend", "1h", 0, false},
	} {
		if n, ok := b.Find(tc.label, tc.request); n != tc.want || ok != tc.ok {
			t.Errorf("Find(%q, %q) = %d, %v; want %d, %v", tc.label, tc.request, n, ok, tc.want, tc.ok)
		}
	}
}
