package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is one problem found in a configuration file, with where it is.
type Error struct {
	File string
	// Line and Column are 1-based; 0 means unknown (for example a
	// required key missing from an empty file).
	Line, Column int
	// Field is the path of the offending value, like
	// "teams[1].quota.h100.nominal" (list indexes count from 0); empty
	// for problems with the file as a whole.
	Field string
	Msg   string
}

// Error formats e as "file:line:column: field: message", leaving out the
// parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteString(":" + strconv.Itoa(e.Column))
		}
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Errors is every problem found in one file, in file order. Parse and
// Load return it as a value of type Errors; errors.As finds it with a
// target of type *Errors or **Errors, and each *Error with a target of
// type **Error.
type Errors []*Error

// Error joins the errors, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the errors one by one, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// As lets errors.As fill a **Errors target too.
func (es Errors) As(target any) bool {
	if p, ok := target.(**Errors); ok {
		c := es
		*p = &c
		return true
	}
	return false
}

// sort orders es by position, keeping the order of errors at one place.
func (es Errors) sort() {
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}

// closest returns the candidate nearest to word, or "" if none is close
// enough to be a plausible typo. Case, '-' and '_' are ignored, so that
// "gpus_per_node" suggests "gpusPerNode".
func closest(word string, candidates []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	w := norm(word)
	best, bestDist := "", -1
	for _, c := range candidates {
		nc := norm(c)
		d := distance(w, nc)
		if d > max(1, len([]rune(nc))/3) || d >= len([]rune(nc)) {
			continue
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of adjacent
// runes each cost one.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j].
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// unknown formats the message for a word that is not one of known, with a
// suggestion when one is close, or the list of known words when short.
func unknown(what, word string, known []string) string {
	msg := fmt.Sprintf("unknown %s %q", what, word)
	if s := closest(word, known); s != "" {
		return msg + fmt.Sprintf("; did you mean %q?", s)
	}
	if len(known) > 0 && len(known) <= 12 {
		return msg + " (known: " + strings.Join(known, ", ") + ")"
	}
	return msg
}
