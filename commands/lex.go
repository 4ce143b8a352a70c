package commands

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// isSpace reports whether r separates words: Unicode spaces and the
// zero-width characters chat clients insert.
func isSpace(r rune) bool {
	return unicode.IsSpace(r) || r == '\u200b' || r == '\u2060' || r == '\ufeff'
}

// Lexer.

type tokenKind uint8

const (
	tokWord      tokenKind = iota
	tokQuoted              // text is what is between the quotes
	tokEquals              // "="
	tokOpenQuote           // a quote that is never closed; pos..end is the quote
)

// token is a word of the input. pos and end are byte offsets in the
// input, quotes included.
type token struct {
	kind     tokenKind
	text     string
	pos, end int
}

// lex splits in into words, quoted texts and "=" signs. It never fails:
// an unclosed quote becomes a tokOpenQuote that ends the list.
func lex(in string) []token {
	toks := make([]token, 0, 8)
	q := quoteCloser{in: in, unclosed: [2]int{len(in) + 1, len(in) + 1}}
	for i := 0; i < len(in); {
		r, w := utf8.DecodeRuneInString(in[i:])
		switch {
		case isSpace(r):
			i += w
		case r == '=':
			toks = append(toks, token{kind: tokEquals, text: "=", pos: i, end: i + 1})
			i++
		case quoteFamily(r) != 0:
			closeAt, closeW := q.find(i+w, quoteFamily(r))
			if closeAt < 0 {
				return append(toks, token{kind: tokOpenQuote, text: in[i : i+w], pos: i, end: i + w})
			}
			toks = append(toks, token{kind: tokQuoted, text: in[i+w : closeAt], pos: i, end: closeAt + closeW})
			i = closeAt + closeW
		default:
			j := i
			for j < len(in) {
				r, w := utf8.DecodeRuneInString(in[j:])
				if isSpace(r) || r == '=' {
					break
				}
				j += w
			}
			toks = append(toks, token{kind: tokWord, text: in[i:j], pos: i, end: j})
			i = j
		}
	}
	return toks
}

// quoteFamily returns the ASCII double quote for any double quote, the
// ASCII single quote for any single quote, and 0 for anything else.
func quoteFamily(r rune) rune {
	switch r {
	case '"', '“', '”', '„':
		return '"'
	case '\'', '‘', '’':
		return '\''
	}
	return 0
}

// quoteCloser finds closing quotes. It remembers, for each family, from
// where on no quote is followed by a space, so that lexing stays linear.
type quoteCloser struct {
	in       string
	unclosed [2]int // by family: from here on no closing quote is followed by a space
}

// find returns the offset and width of the quote of family fam that
// closes a text starting at from: the first one followed by a space or the
// end of input, else the first one at all, else -1.
func (q *quoteCloser) find(from int, fam rune) (int, int) {
	f := 0
	if fam == '\'' {
		f = 1
	}
	first, firstW := -1, 0
	for i := from; i < len(q.in); {
		r, w := utf8.DecodeRuneInString(q.in[i:])
		if quoteFamily(r) == fam {
			if first < 0 {
				first, firstW = i, w
				if from >= q.unclosed[f] {
					break
				}
			}
			if next, _ := utf8.DecodeRuneInString(q.in[i+w:]); i+w == len(q.in) || isSpace(next) {
				return i, w
			}
		}
		i += w
	}
	if from < q.unclosed[f] {
		q.unclosed[f] = from
	}
	return first, firstW
}

// Small helpers.

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func isAlnum(b byte) bool { return isDigit(b) || 'a' <= b|0x20 && b|0x20 <= 'z' }

func startsWithDigit(s string) bool { return s != "" && isDigit(s[0]) }

func countDigits(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

func isDigits(s string) bool { return s != "" && countDigits(s) == len(s) }

// atoiMax parses ASCII digits, reporting false if the value exceeds limit.
func atoiMax(digits string, limit int) (int, bool) {
	n := 0
	for i := 0; i < len(digits); i++ {
		n = n*10 + int(digits[i]-'0')
		if n > limit {
			return 0, false
		}
	}
	return n, true
}

func skipSpace(s string, i int) int {
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !isSpace(r) {
			break
		}
		i += w
	}
	return i
}

// cutTimes reports whether s starts with a multiplication sign (x, X or ×)
// and returns what follows it and its width (0 if there is none).
func cutTimes(s string) (after string, width int, empty bool) {
	for _, x := range []string{"x", "X", "×"} {
		if strings.HasPrefix(s, x) {
			return s[len(x):], len(x), len(s) == len(x)
		}
	}
	return "", 0, false
}

func isTimes(s string) bool { _, w, empty := cutTimes(s); return w > 0 && empty }

func isOneOf(word string, list []string) bool {
	_, ok := lookupFold(word, list)
	return ok
}

// lookupFold returns the element of list equal to word without regard to
// case.
func lookupFold(word string, list []string) (string, bool) {
	for _, s := range list {
		if strings.EqualFold(word, s) {
			return s, true
		}
	}
	return "", false
}
