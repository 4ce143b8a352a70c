// Package commands turns what people type to gpubot into actions and
// replies: the parser of /gpu command text, the verb handlers, the
// platform-neutral Reply model and the small interfaces (ports) the
// handlers need.
//
// # The command language
//
// Parse reads the text of one command, with or without a leading "/gpu",
// and returns a Command or a *ParseError. It is pure: it reads no clock,
// no configuration and no cluster; the words it must check (flavors,
// teams, priorities, templates) come in a Vocabulary. The grammar is
// DESIGN.md's; Usage returns each verb's line of it.
//
// Words are separated by spaces (any Unicode space, including the
// no-break and zero-width spaces chat clients insert) and compared without
// regard to case. Options may be written "key value", "key=value" or
// "key = value".
//
// Sizes. A request's size is a GPU count from 1 to 4096 and an optional
// flavor: 8xh100, 8Xh100, 8×h100, 8x h100, 8 x h100, 8 h100, 8, 8 gpus,
// 8gpus, 8xh100 gpus. With no flavor the team's default applies (Flavor
// is ""). In the form "8 h100" the second word is taken as a flavor only
// if it is not a keyword, a misspelt keyword or another option's value;
// when the flavor list is not empty, it must also be a flavor or close to
// one. The flavor may also be given as an option, "flavor h100".
//
// Durations. Units are minutes (m, min, mins, minute, minutes), hours (h,
// hr, hrs, hour, hours) and days (d, day, days), largest first and each at
// most once: 90m, 6h, 2d, 1h30m, 1d12h, 45min, 2hours, "2 hours",
// "1h 30m", 1.5h. Fractions are allowed; the result is rounded to the
// minute. Zero, negative and over 366 days are refused, as is a number
// without a unit ("4" suggests 4h). A leading "+" is ignored, so
// "extend r12 +2h" works. ParseDuration accepts the same text, so forms
// can use it too.
//
// request and whatif. After the verb come, in any order: the size, the
// duration (optionally after "for"), and the options team, priority,
// topology, template, reason and flavor, each at most once. Option values
// are checked against the Vocabulary without regard to case and returned
// as the vocabulary spells them; an empty list accepts any non-empty word
// of printable characters, which is returned in lower case. Topology is
// one of host, rack and block. A word
// that is not understood is an error at that word, suggesting the closest
// option ("prio" → priority) or, for a bare known value such as "nlp", the
// option it belongs to ("team nlp"). "request" alone is an error whose Msg
// is "missing size and duration"; IsBare lets an adapter open a form
// instead.
//
// Quotes. A reason of several words is quoted with "…", '…', “…” or ‘…’
// (the quotes chat clients substitute). An opening quote counts only at
// the start of a word (or right after "="), so apostrophes inside words
// are left alone, and a quote closes where a word ends (failing that, at
// the next quote of its kind), so 'it's fine' is one text. A quote that is
// never closed is an error that points at it. Unquoted, reason takes one
// word, and a stray word after it gets an error that says to quote the
// reason.
//
// whatif +N / -N. "whatif +8xh100" or "whatif -16 x a100" asks about
// adding or removing capacity (a Delta); the flavor is required there.
//
// Request IDs. r12, R12, #r12, #12 and 12 all mean r12; anything else is
// "not a request id". Digits are kept as typed (r007 stays r007).
//
// Other verbs. "queue x" takes x as a team if Teams has it, else as a
// flavor if Flavors has it; if neither list has it, an empty Teams list
// makes it a team and an empty Flavors list a flavor, and otherwise it is
// an error suggesting the closest of both ("queue team x" and
// "queue flavor x" say which). "usage" takes an optional team and a number
// of days from 1 to 365: 30d, "7 days", or a bare 7. "extend r12 2h" also
// reads "extend r12 by 2h" and "extend r12 for 2h". deny's reason is the
// rest of the line as typed, or one quoted text, or reason=… (the rest of
// the line) or reason "…". "keep" takes a request ID or a zombie check's
// ID (z3, Z3). "track ns/job" lower-cases Kubernetes names
// and checks their syntax. A misspelt verb suggests the closest verb; an
// empty command points to /gpu help.
//
// # Errors
//
// Every error is a *ParseError: a sentence (Msg), the closest valid word
// (Suggest), a correct example for the verb (Example), and the byte range
// of the offending word in Input (Pos, Len; Len is 0 and Pos is where the
// word should be when something is missing). Caret draws it. Parse never
// panics: a bug becomes a *ParseError that unwraps to the panic and its
// stack, for the log.
//
// # Caveats
//
// Parse reads plain text: the Slack adapter must first undo Slack's
// escaping of &, < and > (&amp; &lt; &gt;). Caret lines the carets up by
// estimating each character's width (two columns for CJK and emoji, none
// for combining marks), which is right in most monospaced fonts but not
// all.
package commands

import (
	"cmp"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on free text, the same in every way in: typed commands, the
// Slack form and buttons. Characters are Unicode code points.
const (
	// MaxReason is the longest reason a request or a denial may give.
	MaxReason = 500
	// MaxCommand is the longest command text gpubot reads: room for
	// every option and a reason of MaxReason characters.
	MaxCommand = 2000
)

// Limits of the command language.
const (
	maxGPUs      = 4096
	maxUsageDays = 365
	maxDuration  = 366 * 24 * time.Hour
	maxIDDigits  = 20
)

// ParseError says what was wrong with a command and where.
type ParseError struct {
	Input   string // the text as given, without "/gpu" and surrounding spaces
	Pos     int    // byte offset in Input of the offending word (where it should be when missing)
	Len     int    // byte length of the offending word (0 when missing)
	Msg     string // e.g. "unknown flavor 'h10'"
	Suggest string // closest valid word, if any, e.g. "h100"
	Example string // a correct example for the verb, with the vocabulary's first flavor and team

	cause error // set only when the parser panicked
}

// Error returns Msg, followed by "; did you mean <Suggest>?" if there is
// a suggestion.
func (e *ParseError) Error() string {
	if e.Suggest == "" {
		return e.Msg
	}
	return e.Msg + "; did you mean " + e.Suggest + "?"
}

// Unwrap returns the panic behind an internal error, and nil for errors
// in the input.
func (e *ParseError) Unwrap() error { return e.cause }

// errInternal marks a ParseError that comes from a bug in the parser.
var errInternal = errors.New("internal parser error")

// Parse parses the text of one /gpu command (with or without a leading
// "/gpu"). Every error it returns is a *ParseError. It never panics: a
// recover guard turns a bug into a *ParseError that unwraps to the panic.
func Parse(text string, v Vocabulary) (Command, error) {
	in := stripCommand(text)
	if n := utf8.RuneCountInString(in); n > MaxCommand {
		return Command{}, &ParseError{
			Input:   cutRunes(in, 40) + "…",
			Msg:     fmt.Sprintf("this command is %d characters long; gpubot reads commands of up to %d characters, with a reason of up to %d", n, MaxCommand, MaxReason),
			Example: "/gpu help",
		}
	}
	return guard(in, func() (Command, *ParseError) {
		p := parser{in: in, toks: lex(in), v: v, reasonAt: -1}
		return p.command()
	})
}

// guard runs parse, turning a panic into a *ParseError about in.
func guard(in string, parse func() (Command, *ParseError)) (cmd Command, err error) {
	defer func() {
		if r := recover(); r != nil {
			cmd = Command{}
			err = &ParseError{
				Input:   in,
				Msg:     "sorry, gpubot could not read this command (internal error)",
				Example: "/gpu help",
				cause:   fmt.Errorf("%w: %v\n%s", errInternal, r, debug.Stack()),
			}
		}
	}()
	c, perr := parse()
	if perr != nil {
		return Command{}, perr
	}
	return c, nil
}

// IsBare reports whether text is a known verb typed with no arguments,
// such as "/gpu request", and which verb. Adapters use it to open a form
// instead of answering with an error.
func IsBare(text string) (Verb, bool) {
	in := stripCommand(text)
	if in == "" || strings.IndexFunc(in, isSpace) >= 0 {
		return "", false
	}
	return lookupVerb(in)
}

// stripCommand removes surrounding spaces and a leading "/gpu".
func stripCommand(text string) string {
	s := strings.TrimLeftFunc(text, isSpace)
	if len(s) >= 4 && strings.EqualFold(s[:4], "/gpu") {
		if r, _ := utf8.DecodeRuneInString(s[4:]); len(s) == 4 || isSpace(r) {
			s = s[4:]
		}
	}
	return strings.TrimFunc(s, isSpace)
}

// lookupVerb finds a verb by name, in any case; "what-if", as people
// write it, is whatif.
func lookupVerb(word string) (Verb, bool) {
	if strings.EqualFold(word, "what-if") {
		return VerbWhatIf, true
	}
	for _, v := range Verbs {
		if strings.EqualFold(word, string(v)) {
			return v, true
		}
	}
	return "", false
}

// Parser.

type parser struct {
	in   string
	toks []token
	i    int // next token
	v    Vocabulary
	verb Verb
	// reasonAt is the index of an unquoted reason value, to explain a
	// stray word after it.
	reasonAt int
	// example overrides the verb's example in errors.
	example string
}

func (p *parser) more() bool  { return p.i < len(p.toks) }
func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { p.i++; return p.toks[p.i-1] }

// peekWord reports whether the next token is a word equal to one of words.
func (p *parser) peekWord(words ...string) bool {
	return p.more() && p.peek().kind == tokWord && isOneOf(p.peek().text, words)
}

func (p *parser) fail(pos, end int, suggest, format string, args ...any) *ParseError {
	return &ParseError{
		Input:   p.in,
		Pos:     pos,
		Len:     end - pos,
		Msg:     fmt.Sprintf(format, args...),
		Suggest: suggest,
		Example: cmp.Or(p.example, verbExample(p.verb, p.v)),
	}
}

func (p *parser) failTok(t token, suggest, format string, args ...any) *ParseError {
	return p.fail(t.pos, t.end, suggest, format, args...)
}

// missing reports that something is missing where the next token is (or
// at the end of input).
func (p *parser) missing(format string, args ...any) *ParseError {
	pos := len(p.in)
	if p.more() {
		pos = p.peek().pos
	}
	return p.fail(pos, pos, "", format, args...)
}

func (p *parser) command() (Command, *ParseError) {
	if !p.more() {
		// /gpu alone asks what gpubot can do: the help.
		return Command{Verb: VerbHelp}, nil
	}
	t := p.next()
	if t.kind == tokOpenQuote {
		return Command{}, p.failTok(t, "", "unterminated quote")
	}
	verb, ok := lookupVerb(t.text)
	if !ok || t.kind != tokWord {
		s := Closest(t.text, verbNames())
		e := p.failTok(t, s, "unknown command %s", quoteWord(t.text))
		e.Example = "/gpu help"
		if s != "" {
			e.Example = verbExample(Verb(s), p.v)
		}
		return Command{}, e
	}
	p.verb = verb
	c := Command{Verb: verb}
	var err *ParseError
	switch verb {
	case VerbRequest:
		c.Spec, err = p.spec()
	case VerbWhatIf:
		if p.more() && p.peek().kind == tokWord && strings.IndexByte("+-", p.peek().text[0]) >= 0 {
			c.Delta, err = p.delta()
		} else {
			c.Spec, err = p.spec()
		}
	case VerbTrack:
		c.Namespace, c.Job, err = p.track()
	case VerbStatus:
		if p.more() {
			c.ID, err = p.id()
		}
	case VerbQueue:
		c.Team, c.Flavor, err = p.queue()
	case VerbUsage:
		c.Team, c.Days, err = p.usage()
	case VerbDigest:
		c.Team, err = p.digestTeam()
	case VerbCancel, VerbRelease, VerbApprove, VerbPreempt:
		c.ID, err = p.id()
	case VerbKeep:
		c.ID, err = p.zombieOrRequestID()
	case VerbExtend:
		if c.ID, err = p.id(); err == nil {
			c.Duration, err = p.extension()
		}
	case VerbSwitch:
		if c.ID, err = p.id(); err == nil {
			c.Flavor, err = p.switchFlavor()
		}
	case VerbDeny:
		if c.ID, err = p.id(); err == nil {
			c.Reason, err = p.denyReason()
		}
	case VerbHelp:
		c.Topic, err = p.topic()
	}
	if err == nil {
		err = p.end()
	}
	if err != nil {
		return Command{}, err
	}
	return c, nil
}

// end fails if any token is left.
func (p *parser) end() *ParseError {
	if !p.more() {
		return nil
	}
	return p.unexpected(p.peek(), nil)
}

// unexpected explains the next token, t, which the grammar has no place
// for, suggesting the closest of keywords, or the option a known value
// belongs to.
func (p *parser) unexpected(t token, keywords []string) *ParseError {
	switch t.kind {
	case tokEquals:
		return p.failTok(t, "", "unexpected '='")
	case tokOpenQuote:
		return p.failTok(t, "", "unterminated quote")
	case tokQuoted:
		if isOneOf("reason", keywords) {
			return p.failTok(t, "", "quoted text must follow reason, as in reason \"…\"")
		}
		return p.failTok(t, "", "unexpected quoted text")
	}
	optionFollows := p.i+1 < len(p.toks) && p.toks[p.i+1].kind == tokEquals
	if s := Closest(t.text, keywords); s != "" {
		return p.failTok(t, s, "unknown option %s", quoteWord(t.text))
	}
	if optionFollows {
		msg := "unknown option " + quoteWord(t.text)
		if len(keywords) > 0 {
			msg += " (one of: " + strings.Join(keywords[:len(keywords)-1], ", ") + ")"
		}
		return p.failTok(t, "", "%s", msg)
	}
	if p.reasonAt >= 0 && p.reasonAt == p.i-1 {
		return p.failTok(t, "", "unexpected word %s: put a reason of several words in quotes", quoteWord(t.text))
	}
	if len(keywords) > 0 {
		if s := p.optionFor(t.text); s != "" {
			return p.failTok(t, s, "unexpected word %s", quoteWord(t.text))
		}
	}
	return p.failTok(t, "", "unexpected word %s", quoteWord(t.text))
}

// optionFor returns "option value" if word is a known value of one of the
// request options, as in "team nlp".
func (p *parser) optionFor(word string) string {
	for _, o := range []struct {
		name string
		list []string
	}{
		{"team", p.v.Teams}, {"priority", p.v.Priorities},
		{"template", p.v.Templates}, {"topology", topologies},
	} {
		if s, ok := lookupFold(word, o.list); ok {
			return o.name + " " + s
		}
	}
	return ""
}

// Request and whatif.

// specKeywords are the words that introduce the parts of a request; "for"
// comes last.
var specKeywords = []string{"team", "priority", "topology", "template", "reason", "flavor", "for"}

var topologies = []string{"host", "rack", "block"}

func keywordBit(name string) uint8 {
	for i, k := range specKeywords {
		if k == name {
			return 1 << i
		}
	}
	return 0
}

func (p *parser) spec() (*RequestSpec, *ParseError) {
	s := &RequestSpec{}
	var haveSize, haveDur bool
	var seen uint8 // bit i: specKeywords[i] given
	for p.more() {
		t := p.peek()
		switch {
		case t.kind != tokWord:
			return nil, p.unexpected(t, specKeywords)
		case strings.EqualFold(t.text, "for"):
			p.next()
			if !p.more() || p.peek().kind != tokWord || !durationish(p.peek().text) {
				if p.more() {
					return nil, p.failTok(p.peek(), "", "expected a duration after 'for', like 4h")
				}
				return nil, p.missing("missing duration after 'for'")
			}
			fallthrough
		case haveSize && isDigits(t.text), startsWithDigit(t.text) && p.startsDuration():
			if haveDur {
				return nil, p.failTok(p.peek(), "", "duration given twice")
			}
			d, err := p.duration()
			if err != nil {
				return nil, err
			}
			s.Duration, haveDur = d, true
		case startsWithDigit(t.text):
			if haveSize {
				return nil, p.failTok(t, "", "size given twice")
			}
			n, flavor, err := p.size(0)
			if err != nil {
				return nil, err
			}
			if flavor != "" && seen&keywordBit("flavor") != 0 {
				return nil, p.failTok(t, "", "flavor given twice")
			}
			if flavor != "" {
				seen |= keywordBit("flavor")
			}
			s.GPUs, s.Flavor, haveSize = n, flavor, true
		case isOneOf(t.text, specKeywords):
			if err := p.option(s, &seen); err != nil {
				return nil, err
			}
		default:
			return nil, p.unexpected(t, specKeywords)
		}
	}
	switch {
	case !haveSize && !haveDur:
		return nil, p.missing("missing size and duration")
	case !haveSize:
		return nil, p.missing("missing size (a number of GPUs, as in 8 or 8xh100)")
	case !haveDur:
		return nil, p.missing("missing duration (as in for 4h)")
	}
	return s, nil
}

// startsDuration reports whether the next token, which starts with a
// digit, begins a duration rather than a size.
func (p *parser) startsDuration() bool {
	t := p.peek()
	n := countDigits(t.text)
	rest := t.text[n:]
	if rest == "" {
		return p.i+1 < len(p.toks) && p.toks[p.i+1].kind == tokWord && isUnit(p.toks[p.i+1].text)
	}
	_, w, _ := cutTimes(rest)
	return w == 0 && !isOneOf(rest, gpuWords)
}

// option reads one of the options of a request.
func (p *parser) option(s *RequestSpec, seen *uint8) *ParseError {
	kw := p.next()
	name, _ := lookupFold(kw.text, specKeywords)
	if *seen&keywordBit(name) != 0 {
		return p.failTok(kw, "", "%s given twice", name)
	}
	*seen |= keywordBit(name)
	t, err := p.value(name)
	if err != nil {
		return err
	}
	switch name {
	case "team":
		s.Team, err = p.checkWord(t, "team", p.v.Teams)
	case "priority":
		s.Priority, err = p.checkWord(t, "priority", p.v.Priorities)
	case "template":
		s.Template, err = p.checkWord(t, "template", p.v.Templates)
	case "topology":
		s.Topology, err = p.checkWord(t, "topology", topologies)
	case "flavor":
		s.Flavor, err = p.checkWord(t, "flavor", p.v.Flavors)
	case "reason":
		s.Reason = cleanText(t.text)
		if t.kind == tokWord {
			p.reasonAt = p.i - 1
		}
		if perr := p.checkReason(t, s.Reason); perr != nil {
			return perr
		}
	}
	return err
}

// value reads the value of option name: "name v", "name=v" or "name = v".
func (p *parser) value(name string) (token, *ParseError) {
	eq := false
	if p.more() && p.peek().kind == tokEquals {
		p.next()
		eq = true
	}
	if !p.more() {
		return token{}, p.missing("missing value for %s", name)
	}
	t := p.peek()
	switch {
	case t.kind == tokEquals:
		return token{}, p.failTok(t, "", "unexpected '='")
	case t.kind == tokOpenQuote:
		return token{}, p.failTok(t, "", "unterminated quote")
	case t.kind == tokWord && !eq && isOneOf(t.text, specKeywords):
		return token{}, p.missing("missing value for %s", name)
	}
	return p.next(), nil
}

// checkWord returns the spelling in list of t's text, or an error
// suggesting the closest. An empty list accepts any word, in lower case.
func (p *parser) checkWord(t token, what string, list []string) (string, *ParseError) {
	word := strings.TrimSpace(t.text)
	switch {
	case word == "":
		return "", p.failTok(t, "", "%s cannot be empty", what)
	case !utf8.ValidString(word) || strings.IndexFunc(word, unicode.IsControl) >= 0:
		return "", p.failTok(t, "", "%s %s has characters that are not allowed", what, quoteWord(word))
	case len(list) == 0:
		return strings.ToLower(word), nil
	}
	if s, ok := lookupFold(word, list); ok {
		return s, nil
	}
	s := Closest(word, list)
	msg := "unknown " + what + " " + quoteWord(word)
	if s == "" && len(list) <= 8 {
		msg += " (one of: " + strings.Join(list, ", ") + ")"
	}
	return "", p.failTok(t, s, "%s", msg)
}
