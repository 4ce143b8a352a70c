package commands

import (
	"fmt"
	"slices"
	"strings"
)

// Kueue's word: on a real cluster Kueue admits, and where it has said
// something about a pending request, that is shown next to gpubot's
// category and estimate. When Kueue cannot admit a request as it is, the
// request "will not start as it is" and gets no estimate.

// WithKueueView lets the service show what Kueue says about pending
// requests and which of the cluster's Kueue features its estimates do not
// model. Default: none (the simulated cluster, where the allocator admits).
func WithKueueView(v KueueView) Option { return func(s *Service) { s.kueue = v } }

// kueueReport returns the KueueView's report, read once per call until
// the next operation on the cluster; an empty report without a view or
// when reading it fails (logged).
func (s *Service) kueueReport(c *call) KueueReport {
	if s.kueue == nil {
		return KueueReport{}
	}
	if c.kueue != nil {
		return *c.kueue
	}
	r, err := s.kueue.KueueReport(c.ctx)
	if err != nil {
		s.log.Error("reading what Kueue says", "err", err)
		r = KueueReport{}
	}
	c.kueue = &r
	return r
}

// kueueWord is what Kueue says about pending request id, if anything.
func (s *Service) kueueWord(c *call, id string) (KueueWord, bool) {
	w, ok := s.kueueReport(c).Pending[id]
	return w, ok
}

// neverStarts is Kueue's word on id when Kueue cannot admit it as it is.
func (s *Service) neverStarts(c *call, id string) (KueueWord, bool) {
	w, ok := s.kueueWord(c, id)
	return w, ok && w.Never
}

// approximate names the Kueue features the cluster uses for team that
// the estimates do not model: "approximate: the cluster uses StrictFIFO
// and Fair Sharing, which gpubot does not model", or "".
func (s *Service) approximate(c *call, team string) string {
	var names []string
	for _, u := range s.kueueReport(c).Approximate {
		if len(u.Queues) == 0 || slices.Contains(u.Queues, team) {
			if !slices.Contains(names, u.Feature) {
				names = append(names, u.Feature)
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("approximate: the cluster uses %s, which gpubot does not model", andList(names))
}

// willNotStart is the sentence for a request Kueue cannot admit as it is.
func willNotStart(w KueueWord) string {
	return "Will not start as it is: " + strings.TrimRight(w.Why, ".") + "."
}

// kueueSays is "Kueue says: …." for a word that is not the never case.
func kueueSays(w KueueWord) string {
	return strings.TrimRight(w.Plain, ".") + "."
}

func andList(xs []string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// kueueKey is what records.Request.KueueSaid keeps of a word: its plain
// sentence, or "never: <why>" when Kueue cannot admit the request as it
// is; "" when Kueue said nothing.
func kueueKey(w KueueWord, said bool) string {
	switch {
	case !said:
		return ""
	case w.Never:
		return "never: " + w.Why
	}
	return w.Plain
}

// clip shortens s to at most n runes, ending with "…".
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
