package commands

import "time"

// The parser's values: sizes and flavors, capacity deltas, durations.

// gpuWords may follow a size.
var gpuWords = []string{"gpus", "gpu"}

// size reads <N>[x<flavor>] [gpus] from the next token, starting at byte
// off of it (after a sign). Besides 8xh100 it reads 8×h100, 8 x h100,
// 8x h100, 8 h100, 8, 8gpus and 8 gpus. The flavor is "" if not given.
func (p *parser) size(off int) (int, string, *ParseError) {
	t := p.next()
	start := t.pos + off
	s := t.text[off:]
	n := countDigits(s)
	if n == 0 {
		return 0, "", p.fail(start, t.end, "", "expected a number of GPUs, as in 8x%s", exampleFlavor(p.v))
	}
	gpus, ok := atoiMax(s[:n], maxGPUs)
	if !ok || gpus < 1 {
		return 0, "", p.fail(start, start+n, "", "the number of GPUs must be from 1 to %d, not %s", maxGPUs, quoteWord(s[:n]))
	}
	rest := s[n:]
	var flavor string
	var err *ParseError
	switch x, w, _ := cutTimes(rest); {
	case rest == "":
		switch {
		case p.more() && p.peek().kind == tokWord && isTimes(p.peek().text):
			p.next()
			flavor, err = p.flavorAfter()
		case p.more() && p.looksLikeFlavor(p.peek()):
			flavor, err = p.checkWord(p.next(), "flavor", p.v.Flavors)
		}
	case w > 0 && x == "":
		flavor, err = p.flavorAfter()
	case w > 0:
		at := start + n + w
		flavor, err = p.checkWord(token{kind: tokWord, text: x, pos: at, end: t.end}, "flavor", p.v.Flavors)
	case isOneOf(rest, gpuWords):
		return gpus, "", nil
	default:
		return 0, "", p.fail(start, t.end, "", "expected a number of GPUs and a flavor, as in %sx%s, not %s", s[:n], exampleFlavor(p.v), quoteWord(s))
	}
	if err != nil {
		return 0, "", err
	}
	if p.peekWord(gpuWords...) {
		p.next()
	}
	return gpus, flavor, nil
}

// flavorAfter reads the flavor that must follow an "x".
func (p *parser) flavorAfter() (string, *ParseError) {
	if !p.more() || p.peek().kind == tokEquals ||
		p.peek().kind == tokWord && (isOneOf(p.peek().text, specKeywords) || durationish(p.peek().text)) {
		return "", p.missing("missing flavor after 'x'")
	}
	if p.peek().kind == tokOpenQuote {
		return "", p.failTok(p.peek(), "", "unterminated quote")
	}
	return p.checkWord(p.next(), "flavor", p.v.Flavors)
}

// looksLikeFlavor reports whether t, which follows a bare count as in
// "8 h100", is meant as a flavor.
func (p *parser) looksLikeFlavor(t token) bool {
	if t.kind != tokWord || isOneOf(t.text, specKeywords) || isOneOf(t.text, gpuWords) ||
		durationish(t.text) || p.optionFor(t.text) != "" {
		return false
	}
	if len(p.v.Flavors) == 0 {
		return Closest(t.text, specKeywords) == ""
	}
	_, ok := lookupFold(t.text, p.v.Flavors)
	return ok || Closest(t.text, p.v.Flavors) != ""
}

// delta reads whatif's +<N>x<flavor> or -<N>x<flavor>.
func (p *parser) delta() (*CapacityDelta, *ParseError) {
	t := p.peek()
	flavor := exampleFlavor(p.v)
	p.example = "/gpu whatif " + t.text[:1] + "8x" + flavor
	sign := 1
	if t.text[0] == '-' {
		sign = -1
	}
	off := 1
	if len(t.text) == 1 { // "+ 8xh100"
		p.next()
		if !p.more() || p.peek().kind != tokWord {
			return nil, p.missing("missing size after %s, as in %s8x%s", t.text, t.text, flavor)
		}
		off = 0
	}
	n, got, err := p.size(off)
	if err != nil {
		return nil, err
	}
	if got == "" {
		return nil, p.missing("missing flavor: a capacity what-if needs one, as in %s%dx%s", t.text[:1], n, flavor)
	}
	return &CapacityDelta{GPUs: sign * n, Flavor: got}, nil
}

// Durations.

// duration reads a duration from one or more tokens: 4h, 1h30m, "4 hours",
// "1h 30m", "1 day 12 hours".
func (p *parser) duration() (time.Duration, *ParseError) {
	first := p.peek()
	best, bestSec := -1, int64(0)
	for j := p.i; j < len(p.toks) && j < p.i+6; j++ {
		t := p.toks[j]
		if t.kind != tokWord || !durationish(t.text) {
			break
		}
		if sec, err := scanDuration(p.in[first.pos:t.end]); err == nil {
			best, bestSec = j, sec
		}
	}
	if best < 0 {
		if n := countDigits(first.text); n > 0 {
			if f, ok := lookupFold(first.text[n:], p.v.Flavors); ok {
				return 0, p.failTok(first, first.text[:n]+"x"+f, "%s is neither a size nor a duration", quoteWord(first.text))
			}
		}
		msg, suggest := "expected a number, as in 4h", ""
		if _, err := scanDuration(first.text); err != nil {
			msg, suggest = err.msg, err.suggest
		}
		return 0, p.failTok(first, suggest, "invalid duration %s: %s", quoteWord(first.text), msg)
	}
	end := p.toks[best].end
	p.i = best + 1
	d, err := checkDuration(bestSec)
	if err != nil {
		return 0, p.fail(first.pos, end, "", "invalid duration %s: %s", quoteWord(p.in[first.pos:end]), err.msg)
	}
	return d, nil
}

// extension reads extend's duration, with an optional "by" or "for".
func (p *parser) extension() (time.Duration, *ParseError) {
	if p.peekWord("by", "for") {
		p.next()
	}
	if !p.more() {
		return 0, p.missing("missing duration, as in 2h")
	}
	if t := p.peek(); t.kind != tokWord || !durationish(t.text) {
		return 0, p.failTok(t, "", "expected a duration like 2h, not %s", quoteWord(t.text))
	}
	return p.duration()
}
