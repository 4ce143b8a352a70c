package console

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/chzyer/readline"
	"golang.org/x/term"

	"github.com/gpubot/gpubot/commands"
)

// The console on a terminal edits lines with github.com/chzyer/readline
// (this file is its only importer): arrows, Home/End, Ctrl-A/E/K/U/W,
// Up/Down through the history, Ctrl-R to search it, Tab to complete;
// Ctrl-C clears the line and Ctrl-D on an empty line leaves. The history
// is kept in a file across sessions. Piped input never comes here.

// History keeps the lines typed on a terminal in path, across sessions
// (at most 1000). Default: no file, so history lasts the session.
func History(path string) Option { return func(c *Console) { c.history = path } }

// Completion sets what Tab completes besides verbs and directives: the
// vocabulary's flavors, teams, priorities and templates, and the people.
// Default: none.
func Completion(v commands.Vocabulary) Option { return func(c *Console) { c.vocab = v } }

// lineReader is where the console's lines come from.
type lineReader interface {
	// next returns the next line; errCancelled for a line given up with
	// Ctrl-C, io.EOF at the end.
	next(prompt string) (string, error)
	close()
}

var errCancelled = errors.New("line cancelled")

// editor is a lineReader on a terminal.
type editor struct{ rl *readline.Instance }

func newEditor(in *os.File, out io.Writer, historyFile string, complete readline.AutoCompleter) (*editor, error) {
	fd := int(in.Fd())
	var state *term.State
	rl, err := readline.NewEx(&readline.Config{
		Stdin:             in,
		Stdout:            out,
		HistoryFile:       historyFile,
		HistoryLimit:      1000,
		HistorySearchFold: true,
		AutoComplete:      complete,
		InterruptPrompt:   "^C",
		EOFPrompt:         "\n",
		FuncIsTerminal:    func() bool { return term.IsTerminal(fd) },
		FuncMakeRaw: func() error {
			s, err := term.MakeRaw(fd)
			state = s
			return err
		},
		FuncExitRaw: func() error {
			if state == nil {
				return nil
			}
			return term.Restore(fd, state)
		},
		FuncGetWidth: func() int {
			if w, _, err := term.GetSize(fd); err == nil && w > 0 {
				return w
			}
			return 80
		},
	})
	if err != nil {
		return nil, fmt.Errorf("starting line editing: %w", err)
	}
	return &editor{rl: rl}, nil
}

func (e *editor) next(prompt string) (string, error) {
	e.rl.SetPrompt(prompt)
	line, err := e.rl.Readline()
	if errors.Is(err, readline.ErrInterrupt) {
		return "", errCancelled
	}
	return line, err
}

// out is where to print while a line is being edited: the line is
// redrawn below what is printed.
func (e *editor) out() io.Writer { return e.rl.Stdout() }
func (e *editor) close()         { _ = e.rl.Close() }

// completer completes the word before the cursor.
type completer struct {
	first []string // directives and verbs, for the first word
	words []string // everything else
	// flavors complete the flavor of a size: 8xh1 → 8xh100.
	flavors []string
}

func newCompleter(v commands.Vocabulary, people []commands.Person) *completer {
	c := &completer{flavors: v.Flavors}
	for _, verb := range commands.Verbs {
		c.first = append(c.first, "/gpu", string(verb))
		c.words = append(c.words, string(verb))
	}
	c.first = append(c.first, directives...)
	c.words = append(c.words, v.Flavors...)
	c.words = append(c.words, v.Teams...)
	c.words = append(c.words, v.Priorities...)
	c.words = append(c.words, v.Templates...)
	c.words = append(c.words, "for", "team", "priority", "topology", "template", "reason", "host", "rack", "block")
	for _, p := range people {
		c.words = append(c.words, p.Name)
	}
	for _, l := range [][]string{c.first, c.words} {
		slices.Sort(l)
	}
	c.first, c.words = slices.Compact(c.first), slices.Compact(c.words)
	return c
}

var sizeFlavor = regexp.MustCompile(`^(\+|-)?\d+x`)

// Do implements readline.AutoCompleter: the endings of the candidates that
// start with the word before the cursor, and that word's length.
func (c *completer) Do(line []rune, pos int) ([][]rune, int) {
	before := string(line[:pos])
	start := strings.LastIndexAny(before, " \t") + 1
	word := before[start:]
	cands := c.words
	if strings.TrimSpace(before[:start]) == "" {
		cands = c.first
	}
	if m := sizeFlavor.FindString(word); m != "" {
		word, cands = word[len(m):], c.flavors
	}
	var out [][]rune
	for _, w := range cands {
		if len(w) >= len(word) && strings.EqualFold(w[:len(word)], word) {
			out = append(out, []rune(w[len(word):]+" "))
		}
	}
	return out, len([]rune(word))
}
