package commands

import (
	"log/slog"
	"time"
)

// WithLatencyClock sets the clock that times each command for its log
// line. Default: the wall clock (the service's own clock may be
// simulated, and stands still during a command).
func WithLatencyClock(c Clock) Option { return func(s *Service) { s.watch = c } }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// logCall writes the one log line of a handled command or button press:
// who, the verb, the request, the outcome and how long it took. What the
// person typed is added at debug level only: it may say more than the
// operator needs to keep.
func (s *Service) logCall(c *call, took time.Duration) {
	verb, outcome := c.verb, c.outcome
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
		slog.String("request", c.target), slog.String("outcome", outcome),
		slog.Float64("latencyMs", float64(took.Microseconds())/1000), slog.Int("replies", len(c.outs)),
	}
	if s.log.Enabled(c.ctx, slog.LevelDebug) {
		attrs = append(attrs, slog.String("text", c.in.Text))
	}
	s.log.LogAttrs(c.ctx, slog.LevelInfo, "command handled", attrs...)
}
