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
	"What-If 16xh100 for 8h":     parsedSpec(16, "h100", durH(8)).WhatIf(),
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
	"":                        wantHelp(""), // /gpu alone is the help
	"/gpu":                    wantHelp(""),
	"help":                    wantHelp(""),
	"help request":            wantHelp(VerbRequest),
	"HELP WhatIf":             wantHelp(VerbWhatIf),
	"help what-if":            wantHelp(VerbWhatIf),
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
