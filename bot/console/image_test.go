package console

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
)

// TestPostWithImage: a post is shown under its channel, and its chart is
// written under the files directory with the path printed; when it
// cannot be written, its text is printed instead.
func TestPostWithImage(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	c, err := New(&out, []commands.Person{{Name: "alice"}}, Files(filepath.Join(dir, "files")), Clock(func() time.Time { return at }))
	if err != nil {
		t.Fatal(err)
	}
	post := commands.Output{To: commands.Destination{Kind: commands.ToPost, Channel: "#gpu-admins"}, Reply: commands.Reply{
		Text:  "Daily digest for the cluster, Mon 30 Nov.",
		Image: &commands.Image{Name: "../digest.png", PNG: []byte("png bytes"), Alt: "GPU-hours per day: nlp 12"},
	}}
	if err := c.Send(context.Background(), post); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "files", "digest.png")
	want := "[Tue 09:00] ── #gpu-admins ──\nDaily digest for the cluster, Mon 30 Nov.\n  Chart: " + path + "\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "png bytes" {
		t.Errorf("the chart file holds %q (%v)", data, err)
	}

	// The files directory is a file: the chart's text instead.
	blocked := filepath.Join(dir, "blocked")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	c.files = blocked
	if err := c.Send(context.Background(), post); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "(The chart could not be saved: ") || !strings.Contains(got, "  GPU-hours per day: nlp 12\n") {
		t.Errorf("fallback printed %q", got)
	}
}
