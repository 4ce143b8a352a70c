package commands

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var (
	requestIDPattern = regexp.MustCompile(`^r[0-9]+$`)
	zombieIDPattern  = regexp.MustCompile(`^z[0-9]+$`)
)

// FuzzParse checks that Parse never panics, that its errors point inside
// the input, and that what it accepts makes sense.
func FuzzParse(f *testing.F) {
	for in := range validParses {
		f.Add(in, true)
	}
	for in := range parseErrorCases {
		f.Add(in, true)
		f.Add(in, false)
	}
	for _, in := range []string{
		"request 8xh100 4h reason '",
		"request 8xh100 4h reason “”",
		"request 8xh100 4h reason \"a\"\"b\"",
		"request 8xh100 4h reason=\"",
		"deny r12 '",
		"deny r12 reason",
		"deny r12 reason =",
		"request =",
		"= = =",
		"request 8x×h100 4h",
		"request 8×",
		"request ×",
		"request 1e9 4h",
		"request 8 for 1.0000000000000000001h",
		"request 8 for 99999999999999999999999999999d",
		"request 8 for 1d 1d 1d 1d 1d 1d 1d",
		"whatif -",
		"whatif -9999999999999999999xh100",
		"status #",
		"status #r",
		"track a/b/c/d",
		"track " + strings.Repeat("a", 300) + "/b",
		"request \xff\xfe 4h",
		"request 8x\xe2\x80 4h",
		"\u200b\u200brequest\u2060 8 4h",
		"request 8xh100 4h team \U0001F600",
		"queue \u212Aube",
		"help \u0130",
	} {
		f.Add(in, true)
		f.Add(in, false)
	}
	f.Fuzz(func(t *testing.T, text string, withVocab bool) {
		v := Vocabulary{}
		if withVocab {
			v = parseVocab
		}
		cmd, err := Parse(text, v)
		if err != nil {
			checkParseError(t, text, err)
		} else {
			checkCommand(t, text, cmd, v)
		}
		// A "/gpu" prefix and surrounding spaces change nothing.
		if !strings.HasPrefix(strings.ToLower(strings.TrimLeftFunc(text, isSpace)), "/gpu") {
			cmd2, err2 := Parse(" /gpu "+text+" ", v)
			if diff := cmp.Diff(cmd, cmd2); diff != "" {
				t.Errorf("Parse(%q) and with /gpu differ (-bare +prefixed):\n%s", text, diff)
			}
			if fmt.Sprint(err) != fmt.Sprint(err2) {
				t.Errorf("Parse(%q) error %v, with /gpu %v", text, err, err2)
			}
		}
	})
}

func checkParseError(t *testing.T, text string, err error) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("Parse(%q) error %T %v, want *ParseError", text, err, err)
	}
	if errors.Is(err, errInternal) {
		t.Fatalf("Parse(%q) panicked: %v", text, errors.Unwrap(err))
	}
	in := pe.Input
	if !strings.Contains(text, in) {
		t.Errorf("Parse(%q): Input %q is not part of the text", text, in)
	}
	if pe.Pos < 0 || pe.Len < 0 || pe.Pos > len(in) || pe.Pos+pe.Len > len(in) {
		t.Fatalf("Parse(%q): Pos %d, Len %d outside input of %d bytes", text, pe.Pos, pe.Len, len(in))
	}
	if utf8.ValidString(in) && (!utf8.ValidString(in[:pe.Pos]) || !utf8.ValidString(in[pe.Pos:pe.Pos+pe.Len])) {
		t.Errorf("Parse(%q): Pos %d, Len %d cut a character", text, pe.Pos, pe.Len)
	}
	if pe.Msg == "" || !strings.HasPrefix(pe.Example, "/gpu ") {
		t.Errorf("Parse(%q): error %+v lacks a message or an example", text, pe)
	}
	if !utf8.ValidString(pe.Error()) {
		t.Errorf("Parse(%q): error %q is not valid UTF-8", text, pe.Error())
	}
	if c := pe.Caret(); strings.Count(c, "\n") != 1 || !strings.Contains(c, "^") {
		t.Errorf("Parse(%q): Caret() = %q, want two lines with a caret", text, c)
	}
}

func checkCommand(t *testing.T, text string, c Command, v Vocabulary) {
	t.Helper()
	if !slices.Contains(Verbs, c.Verb) {
		t.Fatalf("Parse(%q) verb %q", text, c.Verb)
	}
	if c.ID != "" && !requestIDPattern.MatchString(c.ID) && !(c.Verb == VerbKeep && zombieIDPattern.MatchString(c.ID)) {
		t.Errorf("Parse(%q) ID %q", text, c.ID)
	}
	needsID := slices.Contains([]Verb{VerbCancel, VerbRelease, VerbExtend, VerbApprove, VerbDeny, VerbPreempt, VerbKeep}, c.Verb)
	if needsID && c.ID == "" {
		t.Errorf("Parse(%q) %s without an ID", text, c.Verb)
	}
	switch c.Verb {
	case VerbRequest, VerbWhatIf:
		if (c.Spec == nil) == (c.Delta == nil) {
			t.Fatalf("Parse(%q): want one of Spec and Delta, got %+v", text, c)
		}
		if c.Verb == VerbRequest && c.Spec == nil {
			t.Fatalf("Parse(%q): request without Spec", text)
		}
		if c.Spec != nil {
			checkSpec(t, text, *c.Spec, v)
		}
		if d := c.Delta; d != nil {
			if d.GPUs == 0 || d.GPUs < -maxGPUs || d.GPUs > maxGPUs || d.Flavor == "" {
				t.Errorf("Parse(%q) delta %+v", text, *d)
			}
			checkVocabWord(t, text, d.Flavor, v.Flavors)
		}
	case VerbExtend:
		checkPositiveDuration(t, text, c.Duration)
	case VerbUsage:
		if c.Days < 0 || c.Days > maxUsageDays {
			t.Errorf("Parse(%q) days %d", text, c.Days)
		}
		checkVocabWord(t, text, c.Team, v.Teams)
	case VerbQueue:
		if c.Team != "" && c.Flavor != "" {
			t.Errorf("Parse(%q) queue of team %q and flavor %q", text, c.Team, c.Flavor)
		}
	case VerbTrack:
		if !isK8sName(c.Namespace, 63, false) || !isK8sName(c.Job, 253, true) ||
			c.Namespace != strings.ToLower(c.Namespace) || c.Job != strings.ToLower(c.Job) {
			t.Errorf("Parse(%q) track %q/%q", text, c.Namespace, c.Job)
		}
	case VerbHelp:
		if c.Topic != "" && !slices.Contains(Verbs, c.Topic) {
			t.Errorf("Parse(%q) help topic %q", text, c.Topic)
		}
	}
}

func checkSpec(t *testing.T, text string, s RequestSpec, v Vocabulary) {
	t.Helper()
	if s.GPUs < 1 || s.GPUs > maxGPUs {
		t.Errorf("Parse(%q) GPUs %d", text, s.GPUs)
	}
	checkPositiveDuration(t, text, s.Duration)
	if s.Topology != "" && !slices.Contains(topologies, s.Topology) {
		t.Errorf("Parse(%q) topology %q", text, s.Topology)
	}
	checkVocabWord(t, text, s.Flavor, v.Flavors)
	checkVocabWord(t, text, s.Team, v.Teams)
	checkVocabWord(t, text, s.Priority, v.Priorities)
	checkVocabWord(t, text, s.Template, v.Templates)
	if len(v.Flavors) == 0 || strings.ContainsFunc(s.Reason, func(r rune) bool { return quoteFamily(r) != 0 }) {
		return
	}
	// What a spec says, written out plainly, parses back to it.
	again := fmt.Sprintf("request %d", s.GPUs)
	if s.Flavor != "" {
		again += "x" + s.Flavor
	}
	again += fmt.Sprintf(" for %dm", s.Duration/time.Minute)
	for _, o := range [][2]string{{"team", s.Team}, {"priority", s.Priority}, {"topology", s.Topology}, {"template", s.Template}} {
		if o[1] != "" {
			again += " " + o[0] + "=" + o[1]
		}
	}
	again += ` reason "` + s.Reason + `"`
	c, err := Parse(again, v)
	if err != nil || c.Spec == nil {
		t.Fatalf("Parse(%q) = %+v; writing it out as %q gives error %v", text, s, again, err)
	}
	if diff := cmp.Diff(s, *c.Spec); diff != "" {
		t.Errorf("Parse(%q) and Parse(%q) differ (-first +second):\n%s", text, again, diff)
	}
}

func checkPositiveDuration(t *testing.T, text string, d time.Duration) {
	t.Helper()
	if d <= 0 || d > maxDuration || d%time.Minute != 0 {
		t.Errorf("Parse(%q) duration %v", text, d)
	}
}

// checkWord checks that word is "" or spelt as in a non-empty list.
func checkVocabWord(t *testing.T, text, word string, list []string) {
	t.Helper()
	if word != "" && len(list) > 0 && !slices.Contains(list, word) {
		t.Errorf("Parse(%q) gave %q, not in %q", text, word, list)
	}
}
