package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpubot/gpubot/store"
)

// seeded makes a data directory with a request in it and returns it.
func seeded(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	code, _, errw := runCLI(t, "/gpu request 8xh100 for 4h reason \"eval\"\n", "console", "--data-dir", dir, "--start", "2026-12-01T08:00:00Z")
	if code != 0 {
		t.Fatalf("seeding: exit %d: %s", code, errw)
	}
	return dir
}

// TestRefusesDamagedStore: gpubot refuses to start on a damaged, empty
// or corrupt gpubot.db with exit status 1 and one message naming the
// file and what to do, and leaves the file byte for byte as it was.
func TestRefusesDamagedStore(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(seeded(t), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		data []byte
		say  []string
	}{
		"zero-length": {data: []byte{}, say: []string{"empty", "remove the empty file"}},
		"truncated":   {data: good[:len(good)/3], say: []string{"truncated", "Restore the latest backup", "mv "}},
		"flipped byte in header page 0": {data: func() []byte {
			b := bytes.Clone(good)
			b[60] ^= 0xFF
			return b
		}(), say: []string{"header page 0 is invalid", "gpubot store check"}},
		"undecodable request": {data: bytes.Replace(good, []byte(`{"id":"r10"`), []byte(`["id":"r10"`), 1), say: []string{"corrupt record", `"r10"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "gpubot.db")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			// The store is refused before anything else: on Slack too, before
			// the (here missing) tokens are looked at. (gpubot run without
			// tokens or a terminal stops earlier, naming the variables.)
			for _, k := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_BOT_TOKEN_FILE", "SLACK_APP_TOKEN_FILE"} {
				t.Setenv(k, "")
			}
			for _, cmd := range []string{"console", "slack"} {
				code, _, errw := runCLI(t, "/gpu status\n", cmd, "--data-dir", dir)
				if code != 1 {
					t.Errorf("%s: exit %d, want 1; stderr: %s", cmd, code, errw)
				}
				for _, s := range append([]string{path, "gpubot has not changed it"}, tc.say...) {
					if !strings.Contains(errw, s) {
						t.Errorf("%s: stderr lacks %q:\n%s", cmd, s, errw)
					}
				}
				if strings.Count(strings.TrimSpace(errw), "\n") > 0 {
					t.Errorf("%s: more than one line on stderr:\n%s", cmd, errw)
				}
			}
			code, out, _ := runCLI(t, "", "store", "check", "--data-dir", dir)
			if code != 1 || !strings.Contains(out, "gpubot will not start on it") {
				t.Errorf("store check: exit %d:\n%s", code, out)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(after, tc.data) {
				t.Errorf("the refused file changed (%d bytes before, %d after)", len(tc.data), len(after))
			}
		})
	}
}

func TestStoreCheckAndOfflineBackup(t *testing.T) {
	dir := seeded(t)
	code, out, errw := runCLI(t, "", "store", "check", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "fine") || !strings.Contains(out, "requests 10") {
		t.Fatalf("store check: exit %d\n%s%s", code, out, errw)
	}
	dest := filepath.Join(t.TempDir(), "copy.db")
	code, out, errw = runCLI(t, "", "store", "backup", "--data-dir", dir, dest)
	if code != 0 || !strings.Contains(out, "stopped gpubot") {
		t.Fatalf("store backup: exit %d\n%s%s", code, out, errw)
	}
	if code, out, _ := runCLI(t, "", "store", "check", dest); code != 0 || !strings.Contains(out, "requests 10") {
		t.Errorf("store check of the copy: exit %d\n%s", code, out)
	}
	if code, _, errw := runCLI(t, "", "store", "backup", "--data-dir", dir, dest); code != 1 || !strings.Contains(errw, "already exists") {
		t.Errorf("backup over an existing file: exit %d: %s", code, errw)
	}
	// Restore: the copy replaces the data directory's file, and gpubot
	// starts on it with everything there.
	restored := t.TempDir()
	data, _ := os.ReadFile(dest)
	if err := os.WriteFile(filepath.Join(restored, "gpubot.db"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errw = runCLI(t, "/gpu status r10\n", "console", "--data-dir", restored)
	if code != 0 || !strings.Contains(out, "r10") || !strings.Contains(out, "needs approval") {
		t.Errorf("console on the restored copy: exit %d\n%s%s", code, out, errw)
	}
	for _, args := range [][]string{{"store"}, {"store", "frob"}, {"store", "backup"}, {"store", "check", "a", "b"}} {
		if code, _, _ := runCLI(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, errw := runCLI(t, "", "store", "check", filepath.Join(dir, "nope.db")); code != 1 || !strings.Contains(errw, "does not exist") {
		t.Errorf("check of a missing file: exit %d: %s", code, errw)
	}
}

// TestOnlineBackup: while gpubot runs (and holds gpubot.db), store
// backup gets a consistent copy from it over the admin socket, and store
// check says to check a backup instead.
func TestOnlineBackup(t *testing.T) {
	dir := seeded(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errw bytes.Buffer
		done <- run([]string{"console", "--data-dir", dir}, inR, outW, &errw)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	say := func(line, until string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
			if strings.Contains(lines.Text(), until) {
				return
			}
		}
		t.Fatalf("no %q after %q", until, line)
	}
	say("/gpu request 4xh100 for 2h", "r11")
	go func() { _, _ = io.Copy(io.Discard, outR) }()

	code, _, errw := runCLI(t, "", "store", "check", "--data-dir", dir)
	if code != 1 || !strings.Contains(errw, "in use by a running gpubot") {
		t.Errorf("store check while running: exit %d: %s", code, errw)
	}
	dest := filepath.Join(t.TempDir(), "online.db")
	code, out, errw := runCLI(t, "", "store", "backup", "--data-dir", dir, dest)
	if code != 0 || !strings.Contains(out, "from the running gpubot") {
		t.Fatalf("store backup while running: exit %d\n%s%s", code, out, errw)
	}
	inW.Close()
	if code := <-done; code != 0 {
		t.Errorf("console exit %d", code)
	}
	db, err := store.OpenReadOnly(dest)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.GetRequest(context.Background(), "r11"); err != nil {
		t.Errorf("the online backup lacks the request made while running: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gpubot.sock")); !os.IsNotExist(err) {
		t.Errorf("the admin socket is left after gpubot stopped: %v", err)
	}
}
