package commands

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Help text for the parser: each verb's syntax and an example, the
// closest-word suggestion and the caret drawing of errors.

// usages are the lines of DESIGN.md's grammar.
var usages = map[Verb]string{
	VerbRequest:  `request <N>[x<flavor>] [for] <duration> [team <t>] [priority <p>] [topology <level>] [template <name>] [reason "<text>"]`,
	VerbTrack:    `track <namespace>/<job>`,
	VerbStatus:   `status [<id>]`,
	VerbQueue:    `queue [<team>|<flavor>]`,
	VerbCapacity: `capacity`,
	VerbUsage:    `usage [<team>] [<days>d]`,
	VerbWhatIf:   `whatif <N>[x<flavor>] [for] <duration> [options of request] | +<N>x<flavor> | -<N>x<flavor>`,
	VerbCancel:   `cancel <id>`,
	VerbRelease:  `release <id>`,
	VerbExtend:   `extend <id> <duration>`,
	VerbApprove:  `approve <id>`,
	VerbDeny:     `deny <id> [reason]`,
	VerbPreempt:  `preempt <id>`,
	VerbKeep:     `keep <id>`,
	VerbSwitch:   `switch <id> <flavor>`,
	VerbDigest:   `digest [<team>]`,
	VerbReport:   `report`,
	VerbHelp:     `help [<verb>]`,
}

// Usage returns the one-line syntax of a verb, as in DESIGN.md, or "" for
// an unknown verb.
func Usage(v Verb) string { return usages[v] }

// example returns a correct command for verb, using the first flavor and
// team of the vocabulary when there are some.
func verbExample(verb Verb, v Vocabulary) string {
	flavor, team := exampleFlavor(v), "nlp"
	if len(v.Teams) > 0 && v.Teams[0] != "" {
		team = v.Teams[0]
	}
	switch verb {
	case VerbRequest:
		return "/gpu request 8x" + flavor + " for 4h team " + team
	case VerbWhatIf:
		return "/gpu whatif 16x" + flavor + " for 8h"
	case VerbTrack:
		return "/gpu track " + team + "/train-llama"
	case VerbStatus, VerbCancel, VerbRelease, VerbApprove, VerbPreempt:
		return "/gpu " + string(verb) + " r12"
	case VerbQueue:
		return "/gpu queue " + flavor
	case VerbCapacity:
		return "/gpu capacity"
	case VerbDigest:
		return "/gpu digest " + team
	case VerbReport:
		return "/gpu report"
	case VerbUsage:
		return "/gpu usage " + team + " 30d"
	case VerbExtend:
		return "/gpu extend r12 2h"
	case VerbSwitch:
		return "/gpu switch r12 " + flavor
	case VerbKeep:
		return "/gpu keep r12"
	case VerbDeny:
		return "/gpu deny r12 too big for a weekend"
	case VerbHelp:
		return "/gpu help request"
	}
	return "/gpu help"
}

func exampleFlavor(v Vocabulary) string {
	if len(v.Flavors) > 0 && v.Flavors[0] != "" {
		return v.Flavors[0]
	}
	return "h100"
}

func verbNames() []string {
	names := make([]string, len(Verbs))
	for i, v := range Verbs {
		names[i] = string(v)
	}
	return names
}

// quoteWord puts word in single quotes for a message, shortened to 40
// characters, with invalid and control characters replaced.
func quoteWord(word string) string {
	const limit = 40
	if utf8.RuneCountInString(word) > limit {
		i, n := 0, 0
		for n < limit-1 {
			_, w := utf8.DecodeRuneInString(word[i:])
			i += w
			n++
		}
		word = word[:i] + "…"
	}
	word = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(word, "\uFFFD"))
	return "'" + word + "'"
}

// Closest returns the candidate nearest to word, ignoring case: an exact
// match; else the nearest by edit distance (insertions, deletions,
// substitutions and swaps of neighbours each count 1) if that distance is
// at most max(1, len(word)/3) characters, the first such in candidates
// when several tie; else the only candidate that starts with word.
// It returns "" when none is close enough, and for words of more than 64
// characters.
func Closest(word string, candidates []string) string {
	if word == "" || len(word) > 4*64 {
		return ""
	}
	w := foldRunes(word)
	if len(w) > 64 {
		return ""
	}
	limit := max(1, len(w)/3)
	best, bestDist := "", limit+1
	prefix, prefixes := "", 0
	for _, c := range candidates {
		cr := foldRunes(c)
		if len(cr) == 0 {
			continue
		}
		if d := len(cr) - len(w); d <= limit && -d <= limit {
			if dist := editDistance(w, cr); dist < bestDist {
				if dist == 0 {
					return c
				}
				best, bestDist = c, dist
			}
		}
		if len(cr) > len(w) && string(cr[:len(w)]) == string(w) && !strings.EqualFold(c, prefix) {
			prefix = c
			prefixes++
		}
	}
	switch {
	case best != "":
		return best
	case prefixes == 1:
		return prefix
	}
	return ""
}

func foldRunes(s string) []rune {
	r := []rune(s)
	for i := range r {
		r[i] = unicode.ToLower(r[i])
	}
	return r
}

// editDistance is the optimal string alignment distance between a and b.
func editDistance(a, b []rune) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// Caret returns two lines: the input, then carets under the offending
// word (one caret under the end of the input, or where the word should
// be, when something is missing). Spaces, tabs and line breaks in the
// input are shown as single spaces; wide characters such as CJK and emoji
// count as two columns and combining marks as none, which lines the
// carets up in a monospaced font in most cases.
func (e *ParseError) Caret() string {
	pos := min(max(e.Pos, 0), len(e.Input))
	end := min(max(pos+e.Len, pos), len(e.Input))
	var line, marks strings.Builder
	carets := false
	for i := 0; i < len(e.Input); {
		r, w := utf8.DecodeRuneInString(e.Input[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			r = '\uFFFD'
		case isSpace(r) || unicode.IsControl(r):
			r = ' '
		}
		line.WriteRune(r)
		mark := ""
		switch {
		case i < pos:
			mark = " "
		case i < end:
			mark = "^"
		}
		if mark != "" {
			for range runeColumns(r) {
				marks.WriteString(mark)
				carets = carets || mark == "^"
			}
		}
		i += w
	}
	if !carets {
		marks.WriteByte('^')
	}
	return line.String() + "\n" + marks.String()
}

// columns estimates how many columns r takes in a monospaced font.
func runeColumns(r rune) int {
	switch {
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	case 0x1100 <= r && r <= 0x115F, 0x2E80 <= r && r <= 0xA4CF && r != 0x303F,
		0xAC00 <= r && r <= 0xD7A3, 0xF900 <= r && r <= 0xFAFF, 0xFE30 <= r && r <= 0xFE4F,
		0xFF00 <= r && r <= 0xFF60, 0xFFE0 <= r && r <= 0xFFE6,
		0x1F300 <= r && r <= 0x1F64F, 0x1F900 <= r && r <= 0x1F9FF, 0x20000 <= r && r <= 0x3FFFD:
		return 2
	}
	return 1
}
