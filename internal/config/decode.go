package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpubot/gpubot/commands"
)

// decoder walks a yaml.Node tree, converting values and collecting every
// problem with its position instead of stopping at the first.
type decoder struct {
	file string
	errs Errors
}

// errorf records a problem at n (or at an unknown position if n is nil).
func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	e := &Error{File: d.file, Field: field, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// yamlLine matches the position prefix of go-yaml's syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError records an error from the YAML parser itself, at the line
// of the problem (see problemLine).
func (d *decoder) syntaxError(err error, data []byte) {
	msg := err.Error()
	e := &Error{File: d.file}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	if l := problemLine(data, err.Error()); l > 0 {
		e.Line = l
	}
	e.Msg = strings.TrimPrefix(msg, "yaml: ")
	d.errs = append(d.errs, e)
}

// maxSearchLines bounds the files problemLine searches (it parses each
// prefix: quadratic, but only on the way to an error message).
const maxSearchLines = 5000

// problemLine returns the line of data where the YAML syntax error whose
// message is msg lies, or 0 if it cannot tell. go-yaml reports the line
// where the construct it was parsing began (the mapping or list that the
// bad line breaks), and for errors of its parser (not its scanner)
// counts that line from 0: "did not find expected key" on line 5 of a
// list item begun on line 4 is reported as line 3. The problem is on the
// first line L at which the text up to and including line L fails with
// the same error: before it, the parser had not read the offending token.
func problemLine(data []byte, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxSearchLines {
		return 0
	}
	end := 0
	for i, l := range lines {
		end += len(l)
		if err := parseAll(data[:end]); err != nil && err.Error() == msg {
			return i + 1
		}
	}
	return 0
}

// parseAll parses every document of data and returns the first error.
func parseAll(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// field joins a path and a key: field("teams[0]", "name") is "teams[0].name".
func field(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// index is the path of a list element: index("teams", 1) is "teams[1]".
func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// resolve follows aliases, so that anchors work anywhere.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is absent or an explicit null ("key:" or "key: ~").
func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names the kind of value n holds, for "must be X, not Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!int":
			return "the integer " + n.Value
		case "!!float":
			return "the number " + n.Value
		case "!!bool":
			return n.Value
		case "!!null":
			return "empty"
		}
		return fmt.Sprintf("%q (%s)", n.Value, n.ShortTag())
	}
	return "a document"
}

// fields is a mapping whose keys have been checked: no duplicates and,
// unless any key is allowed, only known ones.
type fields struct {
	path  string
	node  *yaml.Node // the mapping, for positions of missing keys
	order []string   // keys as written
	keys  map[string]*yaml.Node
	vals  map[string]*yaml.Node
}

// mapping checks that n is a mapping with only the known keys and returns
// its fields. If n is not a mapping the error is recorded and the result
// has no fields, so callers go on to find further problems.
func (d *decoder) mapping(n *yaml.Node, path string, known ...string) *fields {
	return d.checkMapping(n, path, known, false)
}

// anyMapping is mapping for maps whose keys are data (flavor names).
func (d *decoder) anyMapping(n *yaml.Node, path string) *fields {
	return d.checkMapping(n, path, nil, true)
}

func (d *decoder) checkMapping(n *yaml.Node, path string, known []string, anyKey bool) *fields {
	n = resolve(n)
	f := &fields{path: path, node: n, keys: map[string]*yaml.Node{}, vals: map[string]*yaml.Node{}}
	if n == nil || isNull(n) {
		return f
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "must be a mapping, not %s", describe(n))
		return f
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "keys must be plain words, not %s", describe(k))
			continue
		}
		key := k.Value
		switch {
		case k.ShortTag() == "!!merge":
			d.errorf(k, path, "merge keys (<<) are not supported; repeat the keys instead")
			continue
		case !anyKey && !contains(known, key):
			d.errorf(k, field(path, key), "%s", unknownKey(key, known))
			continue
		}
		if first, ok := f.keys[key]; ok {
			d.errorf(k, field(path, key), "duplicate key (first at line %d)", first.Line)
			continue
		}
		f.order = append(f.order, key)
		f.keys[key] = k
		f.vals[key] = v
	}
	return f
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func unknownKey(key string, known []string) string {
	msg := fmt.Sprintf("unknown key %q", key)
	if s := closest(key, known); s != "" {
		return msg + fmt.Sprintf("; did you mean %q?", s)
	}
	return msg + " (known keys: " + strings.Join(known, ", ") + ")"
}

// get returns the value of key, or nil if it is absent or null.
func (f *fields) get(key string) *yaml.Node {
	v := f.vals[key]
	if isNull(v) {
		return nil
	}
	return resolve(v)
}

// pos is the node to report a problem with key at: its key if present,
// else the mapping itself.
func (f *fields) pos(key string) *yaml.Node {
	if k := f.keys[key]; k != nil {
		return k
	}
	return f.node
}

// required returns the value of key, recording an error if it is absent
// or empty.
func (d *decoder) required(f *fields, key string) *yaml.Node {
	v := f.get(key)
	if v == nil && f.node != nil && f.node.Kind != yaml.MappingNode && !isNull(f.node) {
		return nil // the mapping itself is wrong, and reported
	}
	if v == nil {
		if k := f.keys[key]; k != nil {
			d.errorf(k, field(f.path, key), "must not be empty")
		} else {
			d.errorf(f.node, field(f.path, key), "is required")
		}
	}
	return v
}

// scalar checks that n is a scalar with one of the given tags.
func (d *decoder) scalar(n *yaml.Node, path, want string, tags ...string) bool {
	if n.Kind == yaml.ScalarNode && contains(tags, n.ShortTag()) {
		return true
	}
	msg := fmt.Sprintf("must be %s, not %s", want, describe(n))
	if n.Kind == yaml.ScalarNode && want == "a string" {
		msg += "; quote it if you mean the text"
	}
	d.errorf(n, path, "%s", msg)
	return false
}

// str converts a string value.
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	if !d.scalar(n, path, "a string", "!!str") {
		return "", false
	}
	return n.Value, true
}

// integer converts an integer value within [lo, hi].
func (d *decoder) integer(n *yaml.Node, path string, lo, hi int) (int, bool) {
	if !d.scalar(n, path, "an integer", "!!int") {
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		d.errorf(n, path, "%s is out of range", n.Value)
		return 0, false
	}
	switch {
	case v < int64(lo) && lo == 0:
		d.errorf(n, path, "must not be negative")
	case v < int64(lo) && lo == 1:
		d.errorf(n, path, "must be at least 1")
	case v < int64(lo) || v > int64(hi):
		d.errorf(n, path, "must be between %d and %d", lo, hi)
	default:
		return int(v), true
	}
	return 0, false
}

// positive converts a positive finite number (an integer or a decimal).
func (d *decoder) positive(n *yaml.Node, path string) (float64, bool) {
	if !d.scalar(n, path, "a number", "!!int", "!!float") {
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.errorf(n, path, "must be a finite number")
		return 0, false
	}
	if v <= 0 {
		d.errorf(n, path, "must be more than 0")
		return 0, false
	}
	return v, true
}

// boolean converts true or false.
func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	if !d.scalar(n, path, "true or false", "!!bool") {
		return false, false
	}
	var v bool
	if err := n.Decode(&v); err != nil {
		d.errorf(n, path, "must be true or false")
		return false, false
	}
	return v, true
}

// duration converts a duration written as in chat ("90m", "6h", "2d",
// "1h30m"), with commands.ParseDuration, which accepts only durations
// more than zero.
func (d *decoder) duration(n *yaml.Node, path string) (time.Duration, bool) {
	return d.parseDuration(n, path, false)
}

// durationOrZero is duration for keys where zero makes sense: it also
// accepts "0m", "0h" or "0d".
func (d *decoder) durationOrZero(n *yaml.Node, path string) (time.Duration, bool) {
	return d.parseDuration(n, path, true)
}

func (d *decoder) parseDuration(n *yaml.Node, path string, zeroOK bool) (time.Duration, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.errorf(n, path, "must be a duration like 90m, 6h or 2d, not %s", describe(n))
		return 0, false
	}
	if zeroOK && isZero(n.Value) {
		return 0, true
	}
	v, err := commands.ParseDuration(n.Value)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	return v, true
}

// isZero reports whether s is a zero duration like "0m" or "0 h": zeros,
// then a unit that ParseDuration knows.
func isZero(s string) bool {
	s = strings.TrimSpace(s)
	unit := strings.TrimSpace(strings.TrimLeft(s, "0"))
	if len(unit) == len(s) || unit == "" || unit[0] < 'A' {
		return false
	}
	_, err := commands.ParseDuration("1" + unit)
	return err == nil
}

// list returns the elements of a sequence.
func (d *decoder) list(n *yaml.Node, path string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "must be a list, not %s", describe(n))
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = resolve(c)
	}
	return out
}

// entries returns the elements of a list that must have at least one.
func (d *decoder) entries(n *yaml.Node, path, what string) []*yaml.Node {
	items := d.list(n, path)
	if len(items) == 0 && n.Kind == yaml.SequenceNode {
		d.errorf(n, path, "must list at least one %s", what)
	}
	return items
}

// word is a string value and where it was written.
type word struct {
	s    string
	node *yaml.Node
	path string
}

// words converts a list of strings, dropping (and reporting) the others.
func (d *decoder) words(n *yaml.Node, path string) []word {
	var out []word
	for i, e := range d.list(n, path) {
		p := index(path, i)
		if s, ok := d.str(e, p); ok {
			out = append(out, word{s, e, p})
		}
	}
	return out
}
