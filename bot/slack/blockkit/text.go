package blockkit

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// escape makes s safe as Slack mrkdwn: &, < and > become entities, so
// that user text cannot form a mention ("<!channel>", "<@U…>"), a channel
// link or a URL with hidden text; invalid UTF-8 becomes U+FFFD; control
// characters other than newline and tab are dropped, and so are the
// bidirectional overrides that could make text read differently from
// what it is.
func escape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case unicode.IsControl(r) || isBidi(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// clean prepares s as plain_text: invalid UTF-8 replaced, control and
// bidirectional characters dropped, line breaks and tabs turned into
// spaces. Slack does not parse plain_text for mentions, so &, < and >
// stay as they are.
func clean(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '\n' || r == '\t':
			b.WriteByte(' ')
		case unicode.IsControl(r) || isBidi(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isBidi(r rune) bool {
	return r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069' || r == '\u200e' || r == '\u200f'
}

// runes is Slack's length of s: its characters.
func runes(s string) int { return utf8.RuneCountInString(s) }

// cut shortens s to at most n characters, ending it with "…" if anything
// was dropped. It never splits an entity (&amp; &lt; &gt;) that escape
// made. It reports whether it dropped anything.
func cut(s string, n int) (string, bool) {
	if runes(s) <= n {
		return s, false
	}
	if n <= 0 {
		return "", true
	}
	end := byteOffset(s, n-1)
	end = entitySafe(s, end)
	return strings.TrimRightFunc(s[:end], unicode.IsSpace) + "…", true
}

// byteOffset is the byte offset of the n-th character of s (len(s) if s
// is shorter).
func byteOffset(s string, n int) int {
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return i
}

// entitySafe moves end back to the start of an entity it would split.
func entitySafe(s string, end int) int {
	if amp := strings.LastIndexByte(s[:end], '&'); amp >= 0 && end-amp < len("&amp;") {
		if semi := strings.IndexByte(s[amp:], ';'); semi >= 0 && amp+semi >= end {
			return amp
		}
	}
	return end
}

// split breaks escaped text into parts of at most n characters, at line
// breaks where it can, else anywhere but inside an entity.
func split(s string, n int) []string {
	var parts []string
	for runes(s) > n {
		end := byteOffset(s, n)
		if nl := strings.LastIndexByte(s[:end], '\n'); nl > 0 {
			parts = append(parts, s[:nl])
			s = s[nl+1:]
			continue
		}
		end = entitySafe(s, end)
		parts = append(parts, s[:end])
		s = s[end:]
	}
	return append(parts, s)
}

// unfence keeps text from closing a ``` block early: a zero-width space
// goes between backticks that would otherwise make a fence.
func unfence(s string) string {
	return strings.ReplaceAll(s, "``", "`\u200b`")
}
