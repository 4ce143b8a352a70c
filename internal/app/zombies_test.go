package app

import (
	"io"
	"log/slog"
	"testing"
	"time"
)

// The sweep clock runs at multiples of the schedule's interval, not at
// start, and once per due time however often it is asked.
func TestSweepClock(t *testing.T) {
	for spec, want := range map[string]time.Duration{
		"*/10 * * * *": 10 * time.Minute, "*/15 * * * *": 15 * time.Minute, "* * * * *": time.Minute,
		"@hourly": time.Hour, "@every 90s": 90 * time.Second, "@every 2h": 2 * time.Hour,
		"0 9 * * 1-5": 10 * time.Minute, "*/7 * * * *": 10 * time.Minute, "*/10 8-18 * * *": 10 * time.Minute,
	} {
		if got := newSweepClock(spec, slog.New(slog.NewTextHandler(io.Discard, nil))).every; got != want {
			t.Errorf("%q: every %s, want %s", spec, got, want)
		}
	}
	c := newSweepClock("*/10 * * * *", slog.New(slog.NewTextHandler(io.Discard, nil)))
	t0 := time.Date(2026, 12, 1, 8, 3, 0, 0, time.UTC)
	if c.due(t0) {
		t.Error("due at start")
	}
	if got := c.next(t0); !got.Equal(t0.Add(7 * time.Minute)) {
		t.Errorf("next %s, want 08:10", got)
	}
	for _, tc := range []struct {
		at  time.Duration
		due bool
	}{{6 * time.Minute, false}, {7 * time.Minute, true}, {8 * time.Minute, false}, {16 * time.Minute, false}, {45 * time.Minute, true}, {46 * time.Minute, false}} {
		if got := c.due(t0.Add(tc.at)); got != tc.due {
			t.Errorf("due at 08:03+%s = %v, want %v", tc.at, got, tc.due)
		}
	}
}
