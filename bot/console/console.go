// Package console is gpubot's embedded chat: a REPL on standard input and
// output where people type the same /gpu commands they would type in
// Slack, plus a few directives to play several people and move simulated
// time. Buttons in replies are printed as numbered choices.
//
// # Basics
//
// Each line is a /gpu command ("/gpu" optional) or a directive:
//
//	:as <person>         type as someone else (see :people)
//	:advance <duration>  move simulated time (admissions, completions and reminders happen)
//	:click <n>           press button n as the current person
//	:click <label> [id]  press the newest button so labelled (e.g. :click approve r12)
//	:now                 show the simulated time
//	:people              list who can type
//	:help                this list
//	:quit                leave (end of input does the same)
//
// Lines starting with # are comments. When input is not a terminal, each
// line is echoed with the time and the person, so a transcript reads
// like a chat log.
//
// On a terminal, lines are edited with a line editor (editor.go): Up and
// Down recall earlier lines, kept in a history file across sessions
// (History), Tab completes verbs, directives, flavors, teams, priorities,
// templates and people (Completion), Ctrl-C clears the line and Ctrl-D on
// an empty line leaves.
package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/gpubot/gpubot/commands"
)

// Backend is what the console drives.
type Backend interface {
	// Process handles one input; its replies come back through Send.
	Process(ctx context.Context, in commands.Input)
	// Advance moves simulated time forward by d; what happens on the way
	// comes back through Send.
	Advance(ctx context.Context, d time.Duration) error
	// Now is the simulated time.
	Now() time.Time
}

// Console is the REPL. It is also the bot.Sender that prints replies.
type Console struct {
	out         io.Writer
	people      []commands.Person
	as          string
	interactive bool
	loc         *time.Location
	now         func() time.Time
	history     string
	vocab       commands.Vocabulary
	files       string // where images are written; "" is the working directory

	mu      sync.Mutex
	buttons Buttons
}

// Option configures a Console.
type Option func(*Console)

// As sets who types first. Default: the first person.
func As(name string) Option { return func(c *Console) { c.as = name } }

// Interactive selects prompts (terminal) or echoed lines (pipe). Default false.
func Interactive(on bool) Option { return func(c *Console) { c.interactive = on } }

// Files writes the images of replies (digest charts) into dir, creating
// it when needed. Default: the working directory.
func Files(dir string) Option { return func(c *Console) { c.files = dir } }

// Clock sets the time replies are stamped with until Run starts (then the
// Backend's Now is used), e.g. for what is posted while catching up at
// start. Default: the wall clock.
func Clock(now func() time.Time) Option { return func(c *Console) { c.now = now } }

// In shows times in loc. Default UTC.
func In(loc *time.Location) Option { return func(c *Console) { c.loc = loc } }

// New returns a console writing to out for the given people.
func New(out io.Writer, people []commands.Person, opts ...Option) (*Console, error) {
	c := &Console{out: out, people: people, loc: time.UTC, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	if c.as == "" && len(people) > 0 {
		c.as = people[0].Name
	}
	if _, ok := c.person(c.as); !ok {
		return nil, fmt.Errorf("--as %s: no such person (people: %s)", c.as, strings.Join(c.names(), ", "))
	}
	p, _ := c.person(c.as)
	c.as = p.Name
	return c, nil
}

// Send prints one reply. It satisfies bot.Sender. A reply's image is
// written to a file whose path is printed; if that fails, its text
// (Image.Alt) is printed instead, with why.
func (c *Console) Send(_ context.Context, out commands.Output) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	text := Render(out, &c.buttons)
	if img := out.Reply.Image; img != nil {
		path, err := c.writeImage(img)
		if err != nil {
			text += indent(fmt.Sprintf("(The chart could not be saved: %v. What it shows:)\n%s", err, img.Alt), "  ")
		} else {
			text += "  Chart: " + path + "\n"
		}
	}
	_, err := fmt.Fprintf(c.out, "[%s] %s", c.stamp(), text)
	return err
}

// writeImage writes img under the files directory and returns its path.
func (c *Console) writeImage(img *commands.Image) (string, error) {
	name := filepath.Base(filepath.Clean("/" + img.Name))
	if name == "/" || name == "." {
		name = "image.png"
	}
	if c.files != "" {
		if err := os.MkdirAll(c.files, 0o700); err != nil {
			return "", err
		}
	}
	path := filepath.Join(c.files, name)
	if err := os.WriteFile(path, img.PNG, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

func (c *Console) stamp() string { return c.now().In(c.loc).Format("Mon 15:04") }

// Run reads lines from in until end of input, :quit, or ctx ends. On a
// terminal (Interactive, and in a terminal's *os.File) lines are edited
// with history and completion (see editor.go); otherwise they are read
// as they come and echoed.
func (c *Console) Run(ctx context.Context, in io.Reader, b Backend) error {
	c.now = b.Now
	var lines lineReader = newScanner(in, func(p string) { c.printf("%s", p) })
	if f, ok := in.(*os.File); ok && c.interactive && term.IsTerminal(int(f.Fd())) {
		ed, err := newEditor(f, c.out, c.history, newCompleter(c.vocab, c.people))
		if err != nil {
			return err
		}
		defer ed.close()
		lines = ed
		c.mu.Lock()
		c.out = ed.out() // replies that arrive while a line is edited keep the line intact
		c.mu.Unlock()
	}
	if c.interactive {
		c.printf("gpubot console — type /gpu help for commands, :help for console directives, :quit to leave.\n")
	}
	for {
		prompt := ""
		if c.interactive {
			prompt = fmt.Sprintf("%s [%s]> ", c.as, c.stamp())
		}
		raw, err := lines.next(prompt)
		if errors.Is(err, errCancelled) {
			continue
		}
		if err != nil {
			if c.interactive {
				c.printf("\n")
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !c.interactive {
			c.printf("[%s] %s> %s\n", c.stamp(), c.as, line)
		}
		if strings.HasPrefix(line, ":") {
			if quit := c.directive(ctx, line, b); quit {
				return nil
			}
			continue
		}
		b.Process(ctx, commands.Input{User: c.chatID(), Channel: "console", Text: line})
	}
}

// scanner reads lines as they come: piped input, or a terminal when the
// console is not interactive.
type scanner struct {
	sc    *bufio.Scanner
	print func(string)
}

func newScanner(in io.Reader, print func(string)) *scanner {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	return &scanner{sc: sc, print: print}
}

func (s *scanner) next(prompt string) (string, error) {
	if prompt != "" {
		s.print(prompt)
	}
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	return s.sc.Text(), nil
}

func (s *scanner) close() {}

func (c *Console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, format, args...)
}

var directives = []string{":as", ":advance", ":click", ":now", ":people", ":help", ":quit"}

// directive runs a console directive and reports whether to quit.
func (c *Console) directive(ctx context.Context, line string, b Backend) bool {
	word, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch strings.ToLower(word) {
	case ":quit", ":q", ":exit":
		return true
	case ":help", ":h", ":?":
		c.printf("%s", help)
	case ":now":
		c.printf("It is %s.\n", b.Now().In(c.loc).Format("Mon Jan 2 15:04 MST"))
	case ":people":
		for _, p := range c.people {
			role := ""
			if p.Admin {
				role = " (admin)"
			}
			c.printf("  %s%s %s\n", p.Name, role, p.ChatID)
		}
	case ":as":
		p, ok := c.person(arg)
		if !ok {
			c.printf("No person %q. People: %s.\n", arg, strings.Join(c.names(), ", "))
			return false
		}
		c.as = p.Name
	case ":advance", ":adv", ":wait":
		d, err := commands.ParseDuration(arg)
		if err != nil {
			c.printf("Cannot advance by %q: %v. Example: :advance 30m\n", arg, err)
			return false
		}
		if err := b.Advance(ctx, d); err != nil {
			c.printf("Advancing time failed: %v\n", err)
		}
	case ":click", ":press":
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(arg, "["), "]"))
		c.mu.Lock()
		if err != nil && arg != "" {
			// :click <label> [request]: the newest such button (the
			// request r12, or the zombie check z3, it acts on).
			label, req := arg, ""
			if i := strings.LastIndexByte(arg, ' '); i > 0 {
				if last := strings.TrimSpace(arg[i+1:]); len(last) > 1 && strings.ContainsRune("rRzZ", rune(last[0])) {
					if _, err := strconv.Atoi(last[1:]); err == nil {
						label, req = strings.TrimSpace(arg[:i]), last
					}
				}
			}
			var found bool
			if n, found = c.buttons.Find(label, req); found {
				err = nil
			}
		}
		a, ok := c.buttons.Get(n)
		c.mu.Unlock()
		if err != nil {
			c.printf("No button matches %q. Say :click <number> (the number in [brackets]) or :click <label> [request], e.g. :click approve r12.\n", arg)
			return false
		}
		if !ok {
			c.printf("There is no button %d in this session.\n", n)
			return false
		}
		b.Process(ctx, commands.Input{User: c.chatID(), Channel: "console", Action: &a})
	default:
		msg := fmt.Sprintf("Unknown directive %s.", word)
		if s := commands.Closest(word, directives); s != "" {
			msg += " Did you mean " + s + "?"
		}
		c.printf("%s Type :help for the list.\n", msg)
	}
	return false
}

const help = `Console directives:
  :as <person>         type as someone else (:people lists them)
  :advance <duration>  move simulated time, e.g. :advance 2h
  :click <n>           press button [n] as the current person
  :click <label> [id]  press the newest button with that label, e.g. :click approve r12
  :now                 show the simulated time
  :people              list who can type
  :quit                leave (end of input does the same)
Everything else is a /gpu command; try /gpu help.
`

func (c *Console) person(name string) (commands.Person, bool) {
	i := slices.IndexFunc(c.people, func(p commands.Person) bool {
		return strings.EqualFold(p.Name, name) || (p.ChatID != "" && p.ChatID == name)
	})
	if i < 0 {
		return commands.Person{}, false
	}
	return c.people[i], true
}

// chatID is who the service sees typing: the Slack ID when there is one,
// so the console exercises the same lookup Slack does.
func (c *Console) chatID() string {
	p, _ := c.person(c.as)
	if p.ChatID != "" {
		return p.ChatID
	}
	return p.Name
}

func (c *Console) names() []string {
	out := make([]string, len(c.people))
	for i, p := range c.people {
		out[i] = p.Name
	}
	return out
}
