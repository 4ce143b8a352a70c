package commands

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// wantParseError is what a ParseError says: its Error() and its Caret().
type wantParseError struct {
	err   string
	caret string
}

// parseErrorCases maps inputs to the error Parse(input, parseVocab) returns.
var parseErrorCases = map[string]wantParseError{
	// verbs
	"reqest 8xh100 4h": {"unknown command 'reqest'; did you mean request?", `
reqest 8xh100 4h
^^^^^^`},
	"stat": {"unknown command 'stat'; did you mean status?", `
stat
^^^^`},
	"launch 8xh100": {"unknown command 'launch'", `
launch 8xh100
^^^^^^`},
	`"request`: {"unterminated quote", `
"request
^`},

	// request: missing parts
	"request": {"missing size and duration", `
request
       ^`},
	"request 8xh100": {"missing duration (as in for 4h)", `
request 8xh100
              ^`},
	"request for 4h": {"missing size (a number of GPUs, as in 8 or 8xh100)", `
request for 4h
              ^`},
	"request 8xh100 for": {"missing duration after 'for'", `
request 8xh100 for
                  ^`},
	"request 8xh100 for team nlp": {"expected a duration after 'for', like 4h", `
request 8xh100 for team nlp
                   ^^^^`},
	"request 8xh100 4h team": {"missing value for team", `
request 8xh100 4h team
                      ^`},
	"request 8xh100 4h team priority high": {"missing value for team", `
request 8xh100 4h team priority high
                       ^`},
	"request 8x for 4h": {"missing flavor after 'x'", `
request 8x for 4h
           ^`},
	"request 8 x": {"missing flavor after 'x'", `
request 8 x
           ^`},

	// request: sizes
	"request 0xh100 4h": {"the number of GPUs must be from 1 to 4096, not '0'", `
request 0xh100 4h
        ^`},
	"request 4097 4h": {"the number of GPUs must be from 1 to 4096, not '4097'", `
request 4097 4h
        ^^^^`},
	"request 99999999999999999999999xh100 4h": {"the number of GPUs must be from 1 to 4096, not '99999999999999999999999'", `
request 99999999999999999999999xh100 4h
        ^^^^^^^^^^^^^^^^^^^^^^^`},
	"request 8xh10 for 4h": {"unknown flavor 'h10'; did you mean h100?", `
request 8xh10 for 4h
          ^^^`},
	"request 8×h10 for 4h": {"unknown flavor 'h10'; did you mean h100?", `
request 8×h10 for 4h
          ^^^`},
	"request 8 h10 for 4h": {"unknown flavor 'h10'; did you mean h100?", `
request 8 h10 for 4h
          ^^^`},
	"request 8xv100 4h": {"unknown flavor 'v100'; did you mean h100?", `
request 8xv100 4h
          ^^^^`},
	"request 8xtpu 4h": {"unknown flavor 'tpu' (one of: h100, A100, l4)", `
request 8xtpu 4h
          ^^^`},
	"request 8h100 4h": {"'8h100' is neither a size nor a duration; did you mean 8xh100?", `
request 8h100 4h
        ^^^^^`},
	"request 8xh100 4h 16xh100": {"size given twice", `
request 8xh100 4h 16xh100
                  ^^^^^^^`},
	"request flavor l4 8xh100 4h": {"flavor given twice", `
request flavor l4 8xh100 4h
                  ^^^^^^`},
	"request 8xh100 4h flavor l4": {"flavor given twice", `
request 8xh100 4h flavor l4
                  ^^^^^^`},
	"request 8-h100 4h": {"invalid duration '8-h100': unknown unit '-h' (use m, h or d)", `
request 8-h100 4h
        ^^^^^^`},

	// request: durations
	"request 8 for 4": {"invalid duration '4': missing unit (m, h or d); did you mean 4h?", `
request 8 for 4
              ^`},
	"request 8 4": {"invalid duration '4': missing unit (m, h or d); did you mean 4h?", `
request 8 4
          ^`},
	"request 8 for 0h": {"invalid duration '0h': must be more than zero", `
request 8 for 0h
              ^^`},
	"request 8 for 10s": {"invalid duration '10s': unknown unit 's' (use m, h or d)", `
request 8 for 10s
              ^^^`},
	"request 8 for 2w": {"invalid duration '2w': unknown unit 'w' (use m, h or d)", `
request 8 for 2w
              ^^`},
	"request 8 for 367 days": {"invalid duration '367 days': must be at most 366 days", `
request 8 for 367 days
              ^^^^^^^^`},
	"request 8 for 30m1h": {"invalid duration '30m1h': put units from largest to smallest, each once, as in 1d12h", `
request 8 for 30m1h
              ^^^^^`},
	"request 8 for -2h": {"invalid duration '-2h': negative durations are not allowed", `
request 8 for -2h
              ^^^`},
	"request 8 for 0.1m": {"invalid duration '0.1m': must be at least 1m", `
request 8 for 0.1m
              ^^^^`},
	"request 8 4h 2h": {"duration given twice", `
request 8 4h 2h
             ^^`},
	"request 8 for 4h for 2h": {"duration given twice", `
request 8 for 4h for 2h
                     ^^`},

	// request: options
	"request 8xh100 for 4h prio high": {"unknown option 'prio'; did you mean priority?", `
request 8xh100 for 4h prio high
                      ^^^^`},
	"request 8xh100 for 4h teem nlp": {"unknown option 'teem'; did you mean team?", `
request 8xh100 for 4h teem nlp
                      ^^^^`},
	"request 8 teem nlp 4h": {"unknown option 'teem'; did you mean team?", `
request 8 teem nlp 4h
          ^^^^`},
	"request 8xh100 4h topo=rack": {"unknown option 'topo'; did you mean topology?", `
request 8xh100 4h topo=rack
                  ^^^^`},
	"request 8xh100 4h color=red": {"unknown option 'color' (one of: team, priority, topology, template, reason, flavor)", `
request 8xh100 4h color=red
                  ^^^^^`},
	"request 8xh100 4h please": {"unexpected word 'please'", `
request 8xh100 4h please
                  ^^^^^^`},
	"request 8xh100 4h nlp": {"unexpected word 'nlp'; did you mean team nlp?", `
request 8xh100 4h nlp
                  ^^^`},
	"request 8xh100 4h rack": {"unexpected word 'rack'; did you mean topology rack?", `
request 8xh100 4h rack
                  ^^^^`},
	"request 8xh100 4h team nlpp": {"unknown team 'nlpp'; did you mean nlp?", `
request 8xh100 4h team nlpp
                       ^^^^`},
	"request 8xh100 4h team=nlp team=vision": {"team given twice", `
request 8xh100 4h team=nlp team=vision
                           ^^^^`},
	"request 8xh100 4h priority urgent": {"unknown priority 'urgent' (one of: low, normal, high)", `
request 8xh100 4h priority urgent
                           ^^^^^^`},
	"request 8xh100 4h priority hihg": {"unknown priority 'hihg'; did you mean high?", `
request 8xh100 4h priority hihg
                           ^^^^`},
	"request 8xh100 4h topology node": {"unknown topology 'node' (one of: host, rack, block)", `
request 8xh100 4h topology node
                           ^^^^`},
	"request 8xh100 4h template pytorh": {"unknown template 'pytorh'; did you mean pytorch?", `
request 8xh100 4h template pytorh
                           ^^^^^^`},
	"request 8xh100 4h team==nlp": {"unexpected '='", `
request 8xh100 4h team==nlp
                       ^`},
	"request 8xh100 4h = nlp": {"unexpected '='", `
request 8xh100 4h = nlp
                  ^`},

	// request: reasons and quotes
	`request 8xh100 4h reason "fine tune`: {"unterminated quote", `
request 8xh100 4h reason "fine tune
                         ^`},
	"request 8xh100 4h reason “fine tune": {"unterminated quote", `
request 8xh100 4h reason “fine tune
                         ^`},
	"request 8xh100 4h reason fine tune": {"unexpected word 'tune': put a reason of several words in quotes", `
request 8xh100 4h reason fine tune
                              ^^^^`},
	`request 8xh100 4h "fine tune"`: {`quoted text must follow reason, as in reason "…"`, `
request 8xh100 4h "fine tune"
                  ^^^^^^^^^^^`},
	"request 8xh100 4h reason": {"missing value for reason", `
request 8xh100 4h reason
                        ^`},

	`request 8xh100 4h team ""`: {"team cannot be empty", `
request 8xh100 4h team ""
                       ^^`},
	"request 8xh100 4h team 'a\x01b'": {"team 'a\uFFFDb' has characters that are not allowed", `
request 8xh100 4h team 'a b'
                       ^^^^^`},

	// request: Unicode
	"request 日本語 8xh100 4h": {"unexpected word '日本語'", `
request 日本語 8xh100 4h
        ^^^^^^`},
	"request 8xh100 4h team ünïcode": {"unknown team 'ünïcode' (one of: nlp, vision, Speech)", `
request 8xh100 4h team ünïcode
                       ^^^^^^^`},
	"request 8×h10 4h reason “déjà vu”": {"unknown flavor 'h10'; did you mean h100?", `
request 8×h10 4h reason “déjà vu”
          ^^^`},
	"request 8xh100\n4h\tteam nlpp": {"unknown team 'nlpp'; did you mean nlp?", `
request 8xh100 4h team nlpp
                       ^^^^`},

	// whatif
	"whatif +8": {"missing flavor: a capacity what-if needs one, as in +8xh100", `
whatif +8
         ^`},
	"whatif -8 for 4h": {"missing flavor: a capacity what-if needs one, as in -8xh100", `
whatif -8 for 4h
          ^`},
	"whatif +0xh100": {"the number of GPUs must be from 1 to 4096, not '0'", `
whatif +0xh100
        ^`},
	"whatif +xh100": {"expected a number of GPUs, as in 8xh100", `
whatif +xh100
        ^^^^^`},
	"whatif +8-h100": {"expected a number of GPUs and a flavor, as in 8xh100, not '8-h100'", `
whatif +8-h100
        ^^^^^^`},
	"whatif +8xh10": {"unknown flavor 'h10'; did you mean h100?", `
whatif +8xh10
          ^^^`},
	"whatif +8xh100 for 4h": {"unexpected word 'for'", `
whatif +8xh100 for 4h
               ^^^`},
	"whatif +": {"missing size after +, as in +8xh100", `
whatif +
        ^`},
	"whatif": {"missing size and duration", `
whatif
      ^`},

	// IDs
	"status foo": {"'foo' is not a request id (ids look like r12)", `
status foo
       ^^^`},
	"cancel": {"missing request id, as in r12", `
cancel
      ^`},
	"cancel r12 r13": {"unexpected word 'r13'", `
cancel r12 r13
           ^^^`},
	"approve x12": {"'x12' is not a request id (ids look like r12)", `
approve x12
        ^^^`},
	"preempt r": {"'r' is not a request id (ids look like r12)", `
preempt r
        ^`},
	"release r-1": {"'r-1' is not a request id (ids look like r12)", `
release r-1
        ^^^`},
	"cancel r123456789012345678901": {"'r123456789012345678901' is not a request id (ids look like r12)", `
cancel r123456789012345678901
       ^^^^^^^^^^^^^^^^^^^^^^`},
	"keep zz": {"'zz' is not a zombie check id (they look like z3)", `
keep zz
     ^^`},
	"keep": {"missing request id, as in r12", `
keep
    ^`},
	"keep z3 r4": {"unexpected word 'r4'", `
keep z3 r4
        ^^`},
	"extend r12": {"missing duration, as in 2h", `
extend r12
          ^`},
	"extend r12 soon": {"expected a duration like 2h, not 'soon'", `
extend r12 soon
           ^^^^`},
	"extend r12 2": {"invalid duration '2': missing unit (m, h or d); did you mean 2h?", `
extend r12 2
           ^`},
	"extend r12 2h please": {"unexpected word 'please'", `
extend r12 2h please
              ^^^^^^`},

	// deny
	`deny r12 "over budget`: {"unterminated quote", `
deny r12 "over budget
         ^`},
	`deny r12 "over budget" again`: {"unexpected word 'again'", `
deny r12 "over budget" again
                       ^^^^^`},
	"deny r12 reason=": {"missing value for reason", `
deny r12 reason=
                ^`},
	"deny": {"missing request id, as in r12", `
deny
    ^`},

	// queue, usage, track, capacity, help
	"queue nlpp": {"unknown team or flavor 'nlpp'; did you mean nlp?", `
queue nlpp
      ^^^^`},
	"queue h10": {"unknown team or flavor 'h10'; did you mean h100?", `
queue h10
      ^^^`},
	"queue nlp l4": {"unexpected word 'l4'", `
queue nlp l4
          ^^`},
	"queue team": {"missing value for team", `
queue team
          ^`},
	"usage 0d": {"days must be from 1 to 365", `
usage 0d
      ^^`},
	"usage 400 days": {"days must be from 1 to 365", `
usage 400 days
      ^^^^^^^^`},
	"usage 24h": {"usage counts whole days, as in 7d", `
usage 24h
      ^^^`},
	"usage 7 hours": {"usage counts whole days, as in 7d", `
usage 7 hours
        ^^^^^`},
	"usage 7d 30d": {"days given twice", `
usage 7d 30d
         ^^^`},
	"usage 7x": {"expected a number of days, as in 30d, not '7x'", `
usage 7x
      ^^`},
	"usage nlp vision": {"unexpected word 'vision'", `
usage nlp vision
          ^^^^^^`},
	"usage team nlp team vision": {"team given twice", `
usage team nlp team vision
               ^^^^`},
	"usage visoin": {"unknown team 'visoin'; did you mean vision?", `
usage visoin
      ^^^^^^`},
	"track": {"missing <namespace>/<job>", `
track
     ^`},
	"track nlp": {"expected <namespace>/<job>, not 'nlp'", `
track nlp
      ^^^`},
	"track /job": {"missing namespace before '/'", `
track /job
      ^`},
	"track nlp/": {"missing job name after '/'", `
track nlp/
          ^`},
	"track nlp_team/job": {"'nlp_team' is not a namespace name", `
track nlp_team/job
      ^^^^^^^^`},
	"track nlp/job/x": {"'job/x' is not a job name", `
track nlp/job/x
          ^^^^^`},
	"capacity h100": {"unexpected word 'h100'", `
capacity h100
         ^^^^`},
	"help reqest": {"unknown command 'reqest'; did you mean request?", `
help reqest
     ^^^^^^`},
	"help request now": {"unexpected word 'now'", `
help request now
             ^^^`},
}

func TestParseErrors(t *testing.T) {
	for in, want := range parseErrorCases {
		t.Run(in, func(t *testing.T) {
			got, err := Parse(in, parseVocab)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error %q", in, got, want.err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error is %T, want *ParseError", in, err)
			}
			if diff := cmp.Diff(Command{}, got); diff != "" {
				t.Errorf("Parse(%q) returned a command with its error (-want +got):\n%s", in, diff)
			}
			if diff := cmp.Diff(want, wantParseError{err.Error(), "\n" + pe.Caret()}, cmp.AllowUnexported(wantParseError{})); diff != "" {
				t.Errorf("Parse(%q) error mismatch (-want +got):\n%s", in, diff)
			}
			if !strings.HasPrefix(pe.Example, "/gpu ") {
				t.Errorf("Parse(%q) example = %q, want a /gpu command", in, pe.Example)
			}
		})
	}
}

// TestParseErrorExamples checks that the example of an error parses.
func TestParseErrorExamples(t *testing.T) {
	for _, v := range []Vocabulary{parseVocab, {}} {
		for in := range parseErrorCases {
			_, err := Parse(in, v)
			var pe *ParseError
			if !errors.As(err, &pe) {
				continue // with the empty vocabulary some are valid
			}
			if _, err := Parse(pe.Example, v); err != nil {
				t.Errorf("example %q of the error for %q does not parse: %v", pe.Example, in, err)
			}
		}
	}
}

func TestParseErrorFields(t *testing.T) {
	_, err := Parse("/gpu  request 8xh10 for 4h", parseVocab)
	want := &ParseError{
		Input:   "request 8xh10 for 4h",
		Pos:     10,
		Len:     3,
		Msg:     "unknown flavor 'h10'",
		Suggest: "h100",
		Example: "/gpu request 8xh100 for 4h team nlp",
	}
	if diff := cmp.Diff(want, err, cmp.AllowUnexported(ParseError{})); diff != "" {
		t.Errorf("ParseError mismatch (-want +got):\n%s", diff)
	}
	if errors.Unwrap(err) != nil {
		t.Errorf("an input error unwraps to %v, want nil", errors.Unwrap(err))
	}
}

func TestParseGuard(t *testing.T) {
	cmd, err := guard("request 8", func() (Command, *ParseError) {
		var toks []token
		_ = toks[1] // a bug
		return Command{Verb: VerbRequest}, nil
	})
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("guard error = %v (%T), want a *ParseError", err, err)
	}
	if diff := cmp.Diff(Command{}, cmd); diff != "" {
		t.Errorf("guard returned a command (-want +got):\n%s", diff)
	}
	if !errors.Is(err, errInternal) || !strings.Contains(errors.Unwrap(err).Error(), "index out of range") {
		t.Errorf("guard error unwraps to %v, want the panic", errors.Unwrap(err))
	}
	if pe.Input != "request 8" || pe.Msg == "" || strings.Contains(pe.Error(), "index") {
		t.Errorf("guard error = %+v, want a plain sentence about the input", pe)
	}
	if _, err := guard("", func() (Command, *ParseError) { return Command{Verb: VerbHelp}, nil }); err != nil {
		t.Errorf("guard without panic: error %v (%T), want nil", err, err)
	}
}

func TestParseErrorError(t *testing.T) {
	cases := map[string]struct {
		err  *ParseError
		want string
	}{
		"no suggestion": {&ParseError{Msg: "missing size and duration"}, "missing size and duration"},
		"suggestion":    {&ParseError{Msg: "unknown flavor 'h10'", Suggest: "h100"}, "unknown flavor 'h10'; did you mean h100?"},
	}
	for name, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s: Error() = %q, want %q", name, got, tc.want)
		}
	}
}

func TestParseErrorCaret(t *testing.T) {
	cases := map[string]struct {
		err  ParseError
		want string
	}{
		"word":            {ParseError{Input: "abc def", Pos: 4, Len: 3}, "abc def\n    ^^^"},
		"missing at end":  {ParseError{Input: "abc", Pos: 3}, "abc\n   ^"},
		"missing inside":  {ParseError{Input: "abc def", Pos: 4}, "abc def\n    ^"},
		"empty input":     {ParseError{}, "\n^"},
		"wide characters": {ParseError{Input: "日本 x", Pos: 7, Len: 1}, "日本 x\n     ^"},
		"under wide":      {ParseError{Input: "a 日本", Pos: 2, Len: 6}, "a 日本\n  ^^^^"},
		"combining mark":  {ParseError{Input: "e\u0301 x", Pos: 4, Len: 1}, "e\u0301 x\n  ^"},
		"line breaks":     {ParseError{Input: "a\nb\tc", Pos: 4, Len: 1}, "a b c\n    ^"},
		"invalid UTF-8":   {ParseError{Input: "\xff x", Pos: 2, Len: 1}, "\uFFFD x\n  ^"},
		"out of range":    {ParseError{Input: "abc", Pos: 10, Len: 5}, "abc\n   ^"},
		"negative":        {ParseError{Input: "abc", Pos: -1, Len: -1}, "abc\n^"},
		"zero-width word": {ParseError{Input: "a \u0301", Pos: 2, Len: 2}, "a \u0301\n  ^"},
	}
	for name, tc := range cases {
		if got := tc.err.Caret(); got != tc.want {
			t.Errorf("%s: Caret() =\n%s\nwant\n%s", name, got, tc.want)
		}
	}
}

// TestParseErrorReplyExample checks the hint under a parse error: the
// example when there is one worth showing, and no "Example: /gpu help ·
// /gpu help for all commands" saying the same thing twice.
func TestParseErrorReplyExample(t *testing.T) {
	for in, want := range map[string]string{
		"launch 8xh100":  "/gpu help lists the commands.",
		"reqest 8xh100":  "Example: /gpu request 8xh100 for 4h team nlp  ·  /gpu help for all commands",
		"request 8xh10 ": "Example: /gpu request 8xh100 for 4h team nlp  ·  /gpu help for all commands",
	} {
		_, err := Parse(in, parseVocab)
		if err == nil {
			t.Fatalf("%q parses", in)
		}
		r := parseErrorReply(err)
		if n := len(r.Blocks); n != 2 || r.Blocks[0].Kind != BlockCode || r.Blocks[1].Kind != BlockContext {
			t.Fatalf("%q: blocks %+v, want the caret and one context line", in, r.Blocks)
		}
		if got := r.Blocks[1].Text; got != want {
			t.Errorf("%q: context %q, want %q", in, got, want)
		}
	}
}
