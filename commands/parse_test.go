package commands

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// parseVocab is the vocabulary of the parser tests. A100 and Speech are
// spelt with capitals to check that the vocabulary's spelling comes back.
var parseVocab = Vocabulary{
	Flavors:    []string{"h100", "A100", "l4"},
	Teams:      []string{"nlp", "vision", "Speech"},
	Priorities: []string{"low", "normal", "high"},
	Templates:  []string{"pytorch", "jax"},
}

// parsedSpecBuilder builds the RequestSpec a test expects.
type parsedSpecBuilder struct{ s RequestSpec }

func parsedSpec(gpus int, flavor string, d time.Duration) *parsedSpecBuilder {
	return &parsedSpecBuilder{RequestSpec{GPUs: gpus, Flavor: flavor, Duration: d}}
}

func (b *parsedSpecBuilder) Team(t string) *parsedSpecBuilder     { b.s.Team = t; return b }
func (b *parsedSpecBuilder) Priority(p string) *parsedSpecBuilder { b.s.Priority = p; return b }
func (b *parsedSpecBuilder) Topology(t string) *parsedSpecBuilder { b.s.Topology = t; return b }
func (b *parsedSpecBuilder) Template(t string) *parsedSpecBuilder { b.s.Template = t; return b }
func (b *parsedSpecBuilder) Reason(r string) *parsedSpecBuilder   { b.s.Reason = r; return b }

func (b *parsedSpecBuilder) Request() Command { s := b.s; return Command{Verb: VerbRequest, Spec: &s} }
func (b *parsedSpecBuilder) WhatIf() Command  { s := b.s; return Command{Verb: VerbWhatIf, Spec: &s} }

// Commands a test expects.

func wantRequest(gpus int, flavor string, d time.Duration) Command {
	return parsedSpec(gpus, flavor, d).Request()
}

func wantDelta(gpus int, flavor string) Command {
	return Command{Verb: VerbWhatIf, Delta: &CapacityDelta{GPUs: gpus, Flavor: flavor}}
}

func wantVerb(v Verb) Command            { return Command{Verb: v} }
func wantID(v Verb, id string) Command   { return Command{Verb: v, ID: id} }
func wantDeny(id, reason string) Command { return Command{Verb: VerbDeny, ID: id, Reason: reason} }
func wantExtend(id string, d time.Duration) Command {
	return Command{Verb: VerbExtend, ID: id, Duration: d}
}
func wantUsage(team string, days int) Command {
	return Command{Verb: VerbUsage, Team: team, Days: days}
}
func wantQueue(team, flavor string) Command {
	return Command{Verb: VerbQueue, Team: team, Flavor: flavor}
}
func wantTrack(ns, job string) Command { return Command{Verb: VerbTrack, Namespace: ns, Job: job} }
func wantHelp(topic Verb) Command      { return Command{Verb: VerbHelp, Topic: topic} }

func durM(m int) time.Duration { return time.Duration(m) * time.Minute }
func durH(h int) time.Duration { return time.Duration(h) * time.Hour }
func durD(d int) time.Duration { return time.Duration(d) * 24 * time.Hour }

// validParses maps inputs to what Parse(input, parseVocab) returns.
var validParses = map[string]Command{
	// request: sizes
	"/gpu request 8xh100 for 4h team nlp": parsedSpec(8, "h100", durH(4)).Team("nlp").Request(),
	"request 8xh100 for 4h":               wantRequest(8, "h100", durH(4)),
	"request 8Xh100 4h":                   wantRequest(8, "h100", durH(4)),
	"request 8×h100 4h":                   wantRequest(8, "h100", durH(4)),
	"request 8 × h100 4h":                 wantRequest(8, "h100", durH(4)),
	"request 8 x h100 4h":                 wantRequest(8, "h100", durH(4)),
	"request 8x h100 4h":                  wantRequest(8, "h100", durH(4)),
	"request 8 h100 4h":                   wantRequest(8, "h100", durH(4)),
	"request 8 H100 4h":                   wantRequest(8, "h100", durH(4)),
	"request 8xa100 4h":                   wantRequest(8, "A100", durH(4)),
	"request 8 4h":                        wantRequest(8, "", durH(4)),
	"request 8 gpus 4h":                   wantRequest(8, "", durH(4)),
	"request 8gpus 4h":                    wantRequest(8, "", durH(4)),
	"request 8 GPU for 4h":                wantRequest(8, "", durH(4)),
	"request 8xh100 gpus for 4h":          wantRequest(8, "h100", durH(4)),
	"request 1 4h":                        wantRequest(1, "", durH(4)),
	"request 4096xl4 4h":                  wantRequest(4096, "l4", durH(4)),
	"request 008xl4 4h":                   wantRequest(8, "l4", durH(4)),
	"request 8 flavor h100 4h":            wantRequest(8, "h100", durH(4)),
	"request 8 4h flavor=l4":              wantRequest(8, "l4", durH(4)),
	// request: durations and their place
	"request 8xh100 90m":             wantRequest(8, "h100", durM(90)),
	"request 8xh100 2d":              wantRequest(8, "h100", durD(2)),
	"request 8xh100 for 1h30m":       wantRequest(8, "h100", durM(90)),
	"request 8xh100 for 1d12h":       wantRequest(8, "h100", durH(36)),
	"request 8xh100 for 45min":       wantRequest(8, "h100", durM(45)),
	"request 8xh100 for 2hours":      wantRequest(8, "h100", durH(2)),
	"request 8xh100 for 2 hours":     wantRequest(8, "h100", durH(2)),
	"request 8xh100 for 1h 30m":      wantRequest(8, "h100", durM(90)),
	"request 8xh100 for 1 day 2 hrs": wantRequest(8, "h100", durH(26)),
	"request 8xh100 for 1.5h":        wantRequest(8, "h100", durM(90)),
	"request 8xh100 for 4H":          wantRequest(8, "h100", durH(4)),
	"request 8xh100 for 366d":        wantRequest(8, "h100", durD(366)),
	"request for 4h 8xh100":          wantRequest(8, "h100", durH(4)),
	"request 4h 8xh100":              wantRequest(8, "h100", durH(4)),
	"request 4 hours 8 gpus":         wantRequest(8, "", durH(4)),
	"request 8xh100 team nlp for 4h": parsedSpec(8, "h100", durH(4)).Team("nlp").Request(),
	// request: options
	"request 8xh100 4h team=vision priority=HIGH topology=Rack template=JAX reason=finetune": parsedSpec(8, "h100", durH(4)).
		Team("vision").Priority("high").Topology("rack").Template("jax").Reason("finetune").Request(),
	"REQUEST 8XH100 FOR 4H TEAM SPEECH PRIORITY LOW": parsedSpec(8, "h100", durH(4)).Team("Speech").Priority("low").Request(),
	"request 8xh100 4h team = nlp":                   parsedSpec(8, "h100", durH(4)).Team("nlp").Request(),
	"request 8xh100 4h topology host":                parsedSpec(8, "h100", durH(4)).Topology("host").Request(),
	"request 8xh100 4h topology block":               parsedSpec(8, "h100", durH(4)).Topology("block").Request(),
	"request 8xh100 4h team 'nlp'":                   parsedSpec(8, "h100", durH(4)).Team("nlp").Request(),
	// request: reasons
	`request 8xh100 4h reason "fine-tune llama 3"`:    parsedSpec(8, "h100", durH(4)).Reason("fine-tune llama 3").Request(),
	`request 8xh100 4h reason="fine-tune llama 3"`:    parsedSpec(8, "h100", durH(4)).Reason("fine-tune llama 3").Request(),
	"request 8xh100 4h reason 'it's urgent'":          parsedSpec(8, "h100", durH(4)).Reason("it's urgent").Request(),
	"request 8xh100 4h reason “fine tune”":            parsedSpec(8, "h100", durH(4)).Reason("fine tune").Request(),
	"request 8xh100 4h reason ‘fine tune’ team nlp":   parsedSpec(8, "h100", durH(4)).Reason("fine tune").Team("nlp").Request(),
	`request 8xh100 4h reason "team=nlp 8x"`:          parsedSpec(8, "h100", durH(4)).Reason("team=nlp 8x").Request(),
	`request 8xh100 4h reason ""`:                     wantRequest(8, "h100", durH(4)),
	"request 8xh100 4h reason \"line one\nline two\"": parsedSpec(8, "h100", durH(4)).Reason("line one\nline two").Request(),
	// request: spaces
	"  /GPU   request\t8xh100\u00a0for 4h  ": wantRequest(8, "h100", durH(4)),
	"request\u200b8xh100 4h":                 wantRequest(8, "h100", durH(4)),

	// whatif
	"whatif 16xh100 for 8h":      parsedSpec(16, "h100", durH(8)).WhatIf(),
	"whatif 16 8h priority high": parsedSpec(16, "", durH(8)).Priority("high").WhatIf(),
	"whatif +8xh100":             wantDelta(8, "h100"),
	"whatif -16xA100":            wantDelta(-16, "A100"),
	"whatif -16 x a100":          wantDelta(-16, "A100"),
	"whatif +8 l4":               wantDelta(8, "l4"),
	"whatif + 8×l4":              wantDelta(8, "l4"),
	"whatif +8xh100 gpus":        wantDelta(8, "h100"),
	"/gpu WhatIf +4096xh100":     wantDelta(4096, "h100"),

	// IDs
	"status":             wantVerb(VerbStatus),
	"status r12":         wantID(VerbStatus, "r12"),
	"status R12":         wantID(VerbStatus, "r12"),
	"status #r12":        wantID(VerbStatus, "r12"),
	"status #12":         wantID(VerbStatus, "r12"),
	"status 12":          wantID(VerbStatus, "r12"),
	"status r007":        wantID(VerbStatus, "r007"),
	"cancel r3":          wantID(VerbCancel, "r3"),
	"release #R44":       wantID(VerbRelease, "r44"),
	"approve 7":          wantID(VerbApprove, "r7"),
	"preempt r9":         wantID(VerbPreempt, "r9"),
	"keep r9":            wantID(VerbKeep, "r9"),
	"keep #9":            wantID(VerbKeep, "r9"),
	"keep z3":            wantID(VerbKeep, "z3"),
	"/gpu KEEP Z12":      wantID(VerbKeep, "z12"),
	"extend r12 2h":      wantExtend("r12", durH(2)),
	"extend r12 by 2h":   wantExtend("r12", durH(2)),
	"extend r12 for 90m": wantExtend("r12", durM(90)),
	"extend r12 +30m":    wantExtend("r12", durM(30)),
	"extend 12 1 day":    wantExtend("r12", durD(1)),

	// deny
	"deny r12":                             wantDeny("r12", ""),
	"deny r12 too big for a weekend":       wantDeny("r12", "too big for a weekend"),
	"deny r12 it's   over budget":          wantDeny("r12", "it's   over budget"),
	`deny r12 "over budget"`:               wantDeny("r12", "over budget"),
	"deny r12 “over budget”":               wantDeny("r12", "over budget"),
	`deny r12 reason="over budget"`:        wantDeny("r12", "over budget"),
	`deny r12 reason "over budget"`:        wantDeny("r12", "over budget"),
	"deny r12 reason=over budget":          wantDeny("r12", "over budget"),
	"deny r12 reason is quota":             wantDeny("r12", "reason is quota"),
	`deny r12 use the "spot" template`:     wantDeny("r12", `use the "spot" template`),
	"deny r12 team=nlp has used its share": wantDeny("r12", "team=nlp has used its share"),

	// queue, usage, track, capacity, help
	"queue":                   wantVerb(VerbQueue),
	"queue nlp":               wantQueue("nlp", ""),
	"queue SPEECH":            wantQueue("Speech", ""),
	"queue a100":              wantQueue("", "A100"),
	"queue team nlp":          wantQueue("nlp", ""),
	"queue flavor=l4":         wantQueue("", "l4"),
	"usage":                   wantUsage("", 0),
	"usage nlp":               wantUsage("nlp", 0),
	"usage 7d":                wantUsage("", 7),
	"usage 7 days":            wantUsage("", 7),
	"usage 1 day":             wantUsage("", 1),
	"usage 30":                wantUsage("", 30),
	"usage nlp 30d":           wantUsage("nlp", 30),
	"usage 365d vision":       wantUsage("vision", 365),
	"usage team=nlp 7d":       wantUsage("nlp", 7),
	"track nlp/train-llama":   wantTrack("nlp", "train-llama"),
	"track NLP/Train.Llama-2": wantTrack("nlp", "train.llama-2"),
	"capacity":                wantVerb(VerbCapacity),
	"help":                    wantHelp(""),
	"help request":            wantHelp(VerbRequest),
	"HELP WhatIf":             wantHelp(VerbWhatIf),
}

func TestParse(t *testing.T) {
	for in, want := range validParses {
		t.Run(in, func(t *testing.T) {
			got, err := Parse(in, parseVocab)
			if err != nil {
				t.Fatalf("Parse(%q) error: %v\n%s", in, err, caretOfError(err))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", in, diff)
			}
		})
	}
}

func caretOfError(err error) string {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe.Caret()
	}
	return ""
}

func TestParseEmptyVocabulary(t *testing.T) {
	cases := map[string]Command{
		"request 8xH200 4h team Infra priority Urgent template Custom": parsedSpec(8, "h200", durH(4)).
			Team("infra").Priority("urgent").Template("custom").Request(),
		"request 8 mi300x 4h":         wantRequest(8, "mi300x", durH(4)),
		"queue anything":              wantQueue("anything", ""),
		"usage Infra 7d":              wantUsage("infra", 7),
		"whatif +8xTPU":               wantDelta(8, "tpu"),
		`request 8 4h team "my team"`: parsedSpec(8, "", durH(4)).Team("my team").Request(),
	}
	errs := map[string]string{
		"request 8x\xff 4h":      "flavor '\uFFFD' has characters that are not allowed",
		"request 8 4h team \"\"": "team cannot be empty",
		"queue ''":               "team cannot be empty",
	}
	for in, want := range errs {
		if _, err := Parse(in, Vocabulary{}); fmt.Sprint(err) != want {
			t.Errorf("Parse(%q) error = %v, want %q", in, err, want)
		}
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			got, err := Parse(in, Vocabulary{})
			if err != nil {
				t.Fatalf("Parse(%q) error: %v\n%s", in, err, caretOfError(err))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", in, diff)
			}
		})
	}
}

// wantParseError is what a ParseError says: its Error() and its Caret().
type wantParseError struct {
	err   string
	caret string
}

// parseErrorCases maps inputs to the error Parse(input, parseVocab) returns.
var parseErrorCases = map[string]wantParseError{
	// verbs
	"":     {"no command given: try /gpu help", "\n\n^"},
	"/gpu": {"no command given: try /gpu help", "\n\n^"},
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

func TestParseDuration(t *testing.T) {
	valid := map[string]time.Duration{
		"90m":               durM(90),
		"6h":                durH(6),
		"2d":                durD(2),
		"1h30m":             durM(90),
		"1d12h":             durH(36),
		"1d2h3m":            durD(1) + durH(2) + durM(3),
		"45min":             durM(45),
		"45 mins":           durM(45),
		"1 minute":          durM(1),
		"2hours":            durH(2),
		"2 hours":           durH(2),
		"1 hour 30 minutes": durM(90),
		"1h 30m":            durM(90),
		"3 hrs":             durH(3),
		"1 day":             durD(1),
		"1.5h":              durM(90),
		"0.5d":              durH(12),
		"1.25 hours":        durM(75),
		"2H":                durH(2),
		"+2h":               durH(2),
		" 2h ":              durH(2),
		"366d":              durD(366),
		"8784h":             durD(366),
		"1.009m":            durM(1),
		"0.99m":             durM(1),
	}
	for in, want := range valid {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	invalid := map[string]string{
		"":                         `invalid duration "": expected a number, as in 4h`,
		"4":                        `invalid duration "4": missing unit (m, h or d) (did you mean 4h?)`,
		"h":                        `invalid duration "h": expected a number, as in 4h`,
		"0":                        `invalid duration "0": missing unit (m, h or d) (did you mean 0h?)`,
		"0m":                       `invalid duration "0m": must be more than zero`,
		"0d0h":                     `invalid duration "0d0h": must be more than zero`,
		"10s":                      `invalid duration "10s": unknown unit 's' (use m, h or d)`,
		"-1h":                      `invalid duration "-1h": negative durations are not allowed`,
		"367d":                     `invalid duration "367d": must be at most 366 days`,
		"366d1m":                   `invalid duration "366d1m": must be at most 366 days`,
		"99999999999999999999999d": `invalid duration "99999999999999999999999d": must be at most 366 days`,
		"1h1h":                     `invalid duration "1h1h": put units from largest to smallest, each once, as in 1d12h`,
		"30m1h":                    `invalid duration "30m1h": put units from largest to smallest, each once, as in 1d12h`,
		"1h30":                     `invalid duration "1h30": missing unit (m, h or d)`,
		"0.2m":                     `invalid duration "0.2m": must be at least 1m`,
		"1 hour and 30 minutes":    `invalid duration "1 hour and 30 minutes": expected a number, as in 4h`,
		"4 часа":                   `invalid duration "4 часа": unknown unit 'часа' (use m, h or d)`,
		".":                        `invalid duration ".": expected a number, as in 4h`,
	}
	for in, want := range invalid {
		got, err := ParseDuration(in)
		if err == nil {
			t.Errorf("ParseDuration(%q) = %v, want error %q", in, got, want)
			continue
		}
		if err.Error() != want {
			t.Errorf("ParseDuration(%q) error = %q, want %q", in, err, want)
		}
	}
}

func TestParseClosest(t *testing.T) {
	verbs := []string{"request", "track", "status", "queue", "capacity", "usage", "whatif",
		"cancel", "release", "extend", "approve", "deny", "preempt", "help"}
	options := []string{"team", "priority", "topology", "template", "reason"}
	cases := map[string]struct {
		word       string
		candidates []string
		want       string
	}{
		"exact":               {"request", verbs, "request"},
		"case":                {"REQUEST", verbs, "request"},
		"canonical spelling":  {"a100", []string{"A100"}, "A100"},
		"one deletion":        {"reqest", verbs, "request"},
		"swap":                {"reqeust", verbs, "request"},
		"substitution":        {"teem", options, "team"},
		"prefix":              {"prio", options, "priority"},
		"prefix of two":       {"t", options, ""},
		"prefix of two verbs": {"re", verbs, ""},
		"too far":             {"launch", verbs, ""},
		"empty word":          {"", verbs, ""},
		"no candidates":       {"team", nil, ""},
		"empty candidates":    {"x", []string{""}, ""},
		"short word":          {"h10", []string{"h100", "l4"}, "h100"},
		"tie goes to first":   {"h200", []string{"h100", "h300"}, "h100"},
		"unicode":             {"ÉQUIPE", []string{"équipe"}, "équipe"},
		"duplicate prefix":    {"pri", []string{"priority", "Priority"}, "priority"},
		"long word":           {strings.Repeat("a", 1000), verbs, ""},
	}
	for name, tc := range cases {
		if got := Closest(tc.word, tc.candidates); got != tc.want {
			t.Errorf("%s: Closest(%q) = %q, want %q", name, tc.word, got, tc.want)
		}
	}
}

func TestParseUsage(t *testing.T) {
	want := `request <N>[x<flavor>] [for] <duration> [team <t>] [priority <p>] [topology <level>] [template <name>] [reason "<text>"]`
	if got := Usage(VerbRequest); got != want {
		t.Errorf("Usage(request) = %q, want %q", got, want)
	}
	for _, v := range Verbs {
		if u := Usage(v); !strings.HasPrefix(u, string(v)) {
			t.Errorf("Usage(%s) = %q, want the verb's syntax", v, u)
		}
		ex := verbExample(v, parseVocab)
		if _, err := Parse(ex, parseVocab); err != nil {
			t.Errorf("example %q for %s does not parse: %v", ex, v, err)
		}
	}
	if got := Usage("launch"); got != "" {
		t.Errorf("Usage(launch) = %q, want empty", got)
	}
}

func TestParseIsBare(t *testing.T) {
	cases := map[string]struct {
		verb Verb
		bare bool
	}{
		"request":           {VerbRequest, true},
		"/gpu request":      {VerbRequest, true},
		" /gpu  Request  ":  {VerbRequest, true},
		"status":            {VerbStatus, true},
		"request 8xh100 4h": {"", false},
		"/gpu":              {"", false},
		"":                  {"", false},
		"reqest":            {"", false},
		"/gpurequest":       {"", false},
	}
	for in, tc := range cases {
		verb, bare := IsBare(in)
		if verb != tc.verb || bare != tc.bare {
			t.Errorf("IsBare(%q) = %q, %v; want %q, %v", in, verb, bare, tc.verb, tc.bare)
		}
	}
}
