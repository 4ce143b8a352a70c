package commands

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpubot/gpubot/records"
)

// fmtDuration writes d the way people type it: 45m, 4h, 1h30m, 2d, 2d6h.
// Seconds are rounded to the nearest minute.
func fmtDuration(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDuration(-d)
	}
	d = d.Round(time.Minute)
	if d < time.Minute {
		return "0m"
	}
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	hours := d / time.Hour
	d -= hours * time.Hour
	mins := d / time.Minute
	var b strings.Builder
	if days > 0 {
		fmt.Fprintf(&b, "%dd", days)
	}
	if hours > 0 {
		fmt.Fprintf(&b, "%dh", hours)
	}
	if mins > 0 && days == 0 {
		fmt.Fprintf(&b, "%dm", mins)
	}
	if b.Len() == 0 {
		// Only minutes were dropped (days > 0): round to hours shown.
		fmt.Fprintf(&b, "%dd", days)
	}
	return b.String()
}

// clock shows a time of day in the configured zone, with the weekday when
// it is not today.
func (s *Service) clock(t time.Time) string {
	t = t.In(s.set.Location)
	now := s.deps.Clock.Now().In(s.set.Location)
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04")
	}
	if t.Sub(now) < 6*24*time.Hour && t.After(now) {
		return t.Format("Mon 15:04")
	}
	return t.Format("Jan 2 15:04")
}

// window shows a start range relative to now: "in 40m–1h10m (10:40–11:10)".
func (s *Service) window(from, to time.Time) string {
	now := s.deps.Clock.Now()
	a, b := from.Sub(now), to.Sub(now)
	if b <= time.Minute {
		return "any moment now"
	}
	rel := "in " + fmtDuration(a) + "–" + fmtDuration(b)
	if fmtDuration(a) == fmtDuration(b) {
		rel = "in about " + fmtDuration(b)
	}
	if a <= time.Minute {
		rel = "within " + fmtDuration(b)
	}
	abs := s.clock(from) + "–" + s.clock(to)
	if s.clock(from) == s.clock(to) {
		abs = s.clock(to)
	}
	return rel + " (" + abs + ")"
}

// estimateWindow is the window of a posted estimate, or "unknown".
func (s *Service) estimateWindow(e *records.Estimate) string {
	if e == nil || !e.Known {
		return "no estimate"
	}
	return s.window(e.Earliest, e.Latest)
}

// absWindow is a posted estimate as clock times only: "10:40–11:10".
func (s *Service) absWindow(e *records.Estimate) string {
	if e == nil || !e.Known {
		return "no estimate"
	}
	if s.clock(e.Earliest) == s.clock(e.Latest) {
		return s.clock(e.Latest)
	}
	return s.clock(e.Earliest) + "–" + s.clock(e.Latest)
}

// estimateText: "starts in 40m–1h10m (10:40–11:10), position 3".
func (s *Service) estimateText(e *records.Estimate) string {
	if !e.Known {
		return fmt.Sprintf("no start within the next %s at the current load; position %d", fmtDuration(s.horizon), e.Position)
	}
	t := "starts " + s.window(e.Earliest, e.Latest)
	if e.Position > 1 {
		t += fmt.Sprintf(", %d ahead of it", e.Position-1)
	} else {
		t += ", next in line"
	}
	return t
}

func placement(r records.Request) string {
	if len(r.Nodes) == 0 {
		return r.AdmittedFlavor
	}
	nodes := uniq(r.Nodes)
	if len(nodes) <= 3 {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%d %s nodes (%s, …)", len(nodes), r.AdmittedFlavor, strings.Join(nodes[:2], ", "))
}

func uniq(xs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// size: "8× h100" or "16× h100|a100".
func size(r records.Request, flavors []string) string {
	f := r.Flavor
	if f == "" {
		f = strings.Join(flavors, "|")
	}
	return fmt.Sprintf("%d× %s", r.GPUs, f)
}

// FormatDuration writes d as gpubot shows durations everywhere: 45m, 4h,
// 1h30m, 2d, 2d6h (seconds rounded to the minute).
func FormatDuration(d time.Duration) string { return fmtDuration(d) }
