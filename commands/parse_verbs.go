package commands

import (
	"strings"
	"unicode/utf8"
)

// Other verbs.

// id reads a request ID: r12, R12, #r12, #12 or 12, all meaning r12.
func (p *parser) id() (string, *ParseError) {
	if !p.more() {
		return "", p.missing("missing request id, as in r12")
	}
	t := p.next()
	s := strings.TrimPrefix(t.text, "#")
	if s != "" && (s[0] == 'r' || s[0] == 'R') {
		s = s[1:]
	}
	if t.kind != tokWord || !isDigits(s) || len(s) > maxIDDigits {
		return "", p.failTok(t, "", "%s is not a request id (ids look like r12)", quoteWord(t.text))
	}
	return "r" + s, nil
}

// zombieOrRequestID reads a zombie check's ID (z3, Z3) or a request ID.
func (p *parser) zombieOrRequestID() (string, *ParseError) {
	if p.more() {
		t := p.peek()
		if s := t.text; t.kind == tokWord && len(s) > 1 && (s[0] == 'z' || s[0] == 'Z') {
			if !isDigits(s[1:]) || len(s) > maxIDDigits+1 {
				return "", p.failTok(p.next(), "", "%s is not a zombie check id (they look like z3)", quoteWord(s))
			}
			p.next()
			return "z" + s[1:], nil
		}
	}
	return p.id()
}

// denyReason reads the rest of the line: as typed, or one quoted text,
// after an optional reason= or reason "…".
func (p *parser) denyReason() (string, *ParseError) {
	if !p.more() {
		return "", nil
	}
	if p.peekWord("reason") && p.i+1 < len(p.toks) && p.toks[p.i+1].kind != tokWord {
		p.next()
		if p.peek().kind == tokEquals {
			p.next()
		}
		if !p.more() {
			return "", p.missing("missing value for reason")
		}
	}
	switch t := p.peek(); t.kind {
	case tokOpenQuote:
		return "", p.failTok(t, "", "unterminated quote")
	case tokQuoted:
		p.next()
		reason := cleanText(t.text)
		return reason, p.checkReason(t, reason)
	case tokEquals:
		return "", p.failTok(t, "", "unexpected '='")
	}
	t := p.peek()
	reason := cleanText(p.in[t.pos:])
	p.i = len(p.toks)
	return reason, p.checkReason(t, reason)
}

// checkReason refuses a reason longer than MaxReason, pointing at its
// start (t).
func (p *parser) checkReason(t token, reason string) *ParseError {
	if n := utf8.RuneCountInString(reason); n > MaxReason {
		return p.fail(t.pos, t.pos, "", "the reason is %d characters long; keep it to %d", n, MaxReason)
	}
	return nil
}

// cutRunes returns the first n characters of s.
func cutRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// cleanText trims free text and replaces invalid UTF-8.
func cleanText(s string) string {
	return strings.ToValidUTF8(strings.TrimFunc(s, isSpace), "\uFFFD")
}

// track reads <namespace>/<job>.
func (p *parser) track() (string, string, *ParseError) {
	if !p.more() {
		return "", "", p.missing("missing <namespace>/<job>")
	}
	t := p.next()
	slash := strings.IndexByte(t.text, '/')
	if t.kind != tokWord || slash < 0 {
		return "", "", p.failTok(t, "", "expected <namespace>/<job>, not %s", quoteWord(t.text))
	}
	ns, job := t.text[:slash], t.text[slash+1:]
	switch {
	case ns == "":
		return "", "", p.fail(t.pos, t.pos, "", "missing namespace before '/'")
	case !isK8sName(ns, 63, false):
		return "", "", p.fail(t.pos, t.pos+slash, "", "%s is not a namespace name", quoteWord(ns))
	case job == "":
		return "", "", p.fail(t.end, t.end, "", "missing job name after '/'")
	case !isK8sName(job, 253, true):
		return "", "", p.fail(t.pos+slash+1, t.end, "", "%s is not a job name", quoteWord(job))
	}
	return strings.ToLower(ns), strings.ToLower(job), nil
}

// isK8sName reports whether s is a DNS-1123 label (or, with dots, a
// subdomain) of at most limit characters, ignoring case.
func isK8sName(s string, limit int, dots bool) bool {
	if s == "" || len(s) > limit || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '-' && !(dots && s[i] == '.') {
			return false
		}
	}
	return true
}

// queue reads [<team>|<flavor>], or "team <t>", or "flavor <f>".
func (p *parser) queue() (team, flavor string, err *ParseError) {
	if !p.more() {
		return "", "", nil
	}
	if p.peekWord("team", "flavor") {
		kw := strings.ToLower(p.next().text)
		t, err := p.value(kw)
		if err != nil {
			return "", "", err
		}
		if kw == "team" {
			team, err = p.checkWord(t, "team", p.v.Teams)
		} else {
			flavor, err = p.checkWord(t, "flavor", p.v.Flavors)
		}
		return team, flavor, err
	}
	if t := p.peek(); t.kind == tokOpenQuote || t.kind == tokEquals {
		return "", "", p.unexpected(t, nil)
	}
	t := p.next()
	if s, ok := lookupFold(t.text, p.v.Teams); ok {
		return s, "", nil
	}
	if s, ok := lookupFold(t.text, p.v.Flavors); ok {
		return "", s, nil
	}
	switch {
	case len(p.v.Teams) == 0:
		team, err = p.checkWord(t, "team", nil)
		return team, "", err
	case len(p.v.Flavors) == 0:
		flavor, err = p.checkWord(t, "flavor", nil)
		return "", flavor, err
	}
	both := append(append([]string(nil), p.v.Teams...), p.v.Flavors...)
	return "", "", p.failTok(t, Closest(t.text, both), "unknown team or flavor %s", quoteWord(t.text))
}

// usage reads [<team>] [<days>d] in either order.
func (p *parser) usage() (team string, days int, err *ParseError) {
	for p.more() {
		t := p.peek()
		switch {
		case t.kind == tokWord && startsWithDigit(t.text):
			if days != 0 {
				return "", 0, p.failTok(t, "", "days given twice")
			}
			if days, err = p.days(); err != nil {
				return "", 0, err
			}
		case t.kind == tokWord && isUnit(t.text):
			return "", 0, p.failTok(t, "", "usage counts whole days, as in 7d")
		case p.peekWord("team"):
			if team != "" {
				return "", 0, p.failTok(t, "", "team given twice")
			}
			p.next()
			v, err := p.value("team")
			if err != nil {
				return "", 0, err
			}
			if team, err = p.checkWord(v, "team", p.v.Teams); err != nil {
				return "", 0, err
			}
		case team == "" && t.kind != tokEquals && t.kind != tokOpenQuote:
			p.next()
			if team, err = p.checkWord(t, "team", p.v.Teams); err != nil {
				return "", 0, err
			}
		default:
			return "", 0, p.unexpected(t, nil)
		}
	}
	return team, days, nil
}

// days reads 7d, "7 days" or 7.
func (p *parser) days() (int, *ParseError) {
	t := p.next()
	n := countDigits(t.text)
	end := t.end
	switch rest := t.text[n:]; {
	case rest == "" && p.peekWord(dayWords...):
		end = p.next().end
	case rest == "" || isOneOf(rest, dayWords):
	case isUnit(rest):
		return 0, p.failTok(t, "", "usage counts whole days, as in 7d")
	default:
		return 0, p.failTok(t, "", "expected a number of days, as in 30d, not %s", quoteWord(t.text))
	}
	days, ok := atoiMax(t.text[:n], maxUsageDays)
	if !ok || days < 1 {
		return 0, p.fail(t.pos, end, "", "days must be from 1 to %d", maxUsageDays)
	}
	return days, nil
}

// digestTeam reads digest's optional team: <team> or "team <t>".
func (p *parser) digestTeam() (string, *ParseError) {
	if !p.more() {
		return "", nil
	}
	if p.peekWord("team") {
		p.next()
		t, err := p.value("team")
		if err != nil {
			return "", err
		}
		return p.checkWord(t, "team", p.v.Teams)
	}
	t := p.peek()
	if t.kind != tokWord {
		return "", p.unexpected(t, nil)
	}
	p.next()
	return p.checkWord(t, "team", p.v.Teams)
}

// topic reads help's optional verb.
func (p *parser) topic() (Verb, *ParseError) {
	if !p.more() {
		return "", nil
	}
	t := p.next()
	if v, ok := lookupVerb(t.text); ok && t.kind == tokWord {
		return v, nil
	}
	return "", p.failTok(t, Closest(t.text, verbNames()), "unknown command %s", quoteWord(t.text))
}

// switchFlavor is the flavor of switch <id> <flavor>.
func (p *parser) switchFlavor() (string, *ParseError) {
	if !p.more() {
		return "", p.missing("say which flavor to switch to, e.g. %s", verbExample(VerbSwitch, p.v))
	}
	t := p.next()
	if t.kind != tokWord {
		return "", p.unexpected(t, nil)
	}
	return p.checkWord(t, "flavor", p.v.Flavors)
}
