package commands

import (
	"errors"
	"log/slog"
	"time"

	"k8s.io/utils/clock"
)

// WithLatencyClock sets the clock that times each command for its log
// line. Default: the wall clock (the service's own clock may be
// simulated, and stands still during a command).
func WithLatencyClock(c clock.PassiveClock) Option { return func(s *Service) { s.watch = c } }

// logged is the middleware that writes each input's log line.
func (s *Service) logged(next stage) stage {
	return func(c *call) {
		began := s.watch.Now()
		defer func() { s.logCall(c, s.watch.Since(began)) }()
		next(c)
	}
}

// logCall writes the one log line of a handled command or button press:
// who, the verb, the request, the outcome and how long it took. What the
// person typed is added at debug level only: it may say more than the
// operator needs to keep.
func (s *Service) logCall(c *call, took time.Duration) {
	verb, outcome := c.logVerb, c.outcome
	if verb == "" {
		verb = "command"
	}
	if outcome == "" {
		outcome = "ok"
	}
	person := ""
	if c.who != nil {
		person = c.who.Name
	}
	attrs := []slog.Attr{
		slog.String("user", c.in.User), slog.String("person", person), slog.String("verb", verb),
		slog.String("request", c.logTarget), slog.String("outcome", outcome),
		slog.Float64("latencyMs", float64(took.Microseconds())/1000), slog.Int("replies", len(c.outs)),
	}
	if s.log.Enabled(c.ctx, slog.LevelDebug) {
		attrs = append(attrs, slog.String("text", c.in.Text))
	}
	s.log.LogAttrs(c.ctx, slog.LevelInfo, "command handled", attrs...)
}

// logAction writes the log line of one operation on the cluster (submit,
// remove, extend, preempt) made while handling a call.
func (s *Service) logAction(c *call, op Op, err error, took time.Duration) {
	id := op.ID
	if op.Kind == OpSubmit {
		id = op.Workload.ID
	}
	outcome, level := "ok", slog.LevelInfo
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal):
		outcome = "refused"
	case err != nil:
		outcome, level = "error", slog.LevelWarn
	}
	person := ""
	if c.who != nil {
		person = c.who.Name
	}
	attrs := []slog.Attr{slog.String("person", person), slog.String("action", string(op.Kind)), slog.String("request", id),
		slog.String("outcome", outcome), slog.Float64("latencyMs", float64(took.Microseconds())/1000)}
	if len(op.Victims) > 0 {
		attrs = append(attrs, slog.Any("victims", op.Victims))
	}
	if err != nil {
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	s.log.LogAttrs(c.ctx, level, "cluster action", attrs...)
}
