package app_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/gpubot/gpubot/internal/app"
)

// terminal is gpubot's console on a pseudo-terminal, typed at through the
// pty's other end as a person's keyboard would.
type terminal struct {
	t    *testing.T
	ptmx *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	read int // how much of out has been matched
	done chan error
}

func startTerminal(t *testing.T, dir string) *terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, ptmx: ptmx, done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		term.done <- app.Run(context.Background(), app.Options{DataDir: dir, Stdin: tty, Stdout: tty, Interactive: true,
			Start: start, LogFile: filepath.Join(dir, "test.log")})
		tty.Close()
	}()
	t.Cleanup(func() { ptmx.Close() })
	term.expect("alice [Tue 09:00]> ")
	return term
}

func (tm *terminal) typ(keys string) {
	tm.t.Helper()
	if _, err := io.WriteString(tm.ptmx, keys); err != nil {
		tm.t.Fatal(err)
	}
}

// expect waits until the screen shows s after what was matched before.
func (tm *terminal) expect(s string) {
	tm.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		tm.mu.Lock()
		all := tm.out.String()
		i := strings.Index(all[tm.read:], s)
		if i >= 0 {
			tm.read += i + len(s)
		}
		tm.mu.Unlock()
		if i >= 0 {
			return
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the terminal never showed %q; it shows:\n%s", s, all[tm.read:])
		}
		time.Sleep(20 * time.Millisecond) // polling a real pty: there is no clock to step
	}
}

func (tm *terminal) since() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()[tm.read:]
}

func (tm *terminal) exit() {
	tm.t.Helper()
	select {
	case err := <-tm.done:
		if err != nil {
			tm.t.Fatalf("the console ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		tm.t.Fatal("the console did not end")
	}
}

const (
	keyUp  = "\x1b[A"
	ctrlC  = "\x03"
	ctrlD  = "\x04"
	keyTab = "\t"
)

// TestConsoleOnATerminal drives the console through a pseudo-terminal:
// Tab completes verbs and flavors, Ctrl-C drops the line being typed, Up
// recalls earlier lines (this session's and the last one's) to edit, and
// Ctrl-D leaves.
func TestConsoleOnATerminal(t *testing.T) {
	dir := t.TempDir()
	tm := startTerminal(t, dir)
	tm.typ("/gpu capa" + keyTab + "\r")
	tm.expect("Capacity now, per flavor.")
	tm.expect("alice [Tue 09:00]> ")
	tm.typ("/gpu request 8xa1" + keyTab + "for 2h\r")
	tm.expect("r10 running on a100")
	tm.expect("alice [Tue 09:00]> ")
	tm.typ("/gpu bogus things" + ctrlC)
	tm.typ("/gpu status\r")
	tm.expect("alice, you have 3 requests")
	if s := tm.since(); strings.Contains(s, "Unknown command") {
		t.Errorf("the line cancelled with Ctrl-C was run:\n%s", s)
	}
	tm.expect("alice [Tue 09:00]> ")
	// Up recalls /gpu status; typing on makes it /gpu status r10.
	tm.typ(keyUp + " r10\r")
	tm.expect("r10 running on a100")
	tm.expect("alice [Tue 09:00]> ")
	tm.typ(ctrlD)
	tm.exit()

	hist, err := os.ReadFile(filepath.Join(dir, "console_history"))
	if err != nil {
		t.Fatalf("no history file in the data directory: %v", err)
	}
	if got := string(hist); !strings.Contains(got, "/gpu capacity") || !strings.Contains(got, "/gpu status r10") || strings.Contains(got, "bogus") {
		t.Errorf("history file:\n%s\nwant the completed and recalled lines, not the cancelled one", got)
	}

	// A new session recalls the last one's lines.
	tm = startTerminal(t, dir)
	tm.typ(keyUp + keyUp + "\r")
	tm.expect("alice, you have 3 requests")
	tm.expect("alice [Tue 09:00]> ")
	tm.typ(":quit\r")
	tm.exit()
}
