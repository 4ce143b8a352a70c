package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestProgressBarNeverGoesBack: runs announce themselves, advance, and a
// late or stale report does not move the bar back; the estimate of the
// time left follows the pace.
func TestProgressBarNeverGoesBack(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var out strings.Builder
	b := newProgressBar(&out, true, clk)
	b.update("a", 0, 100)
	b.update("b", 0, 100)
	clk.SetTime(clk.Now().Add(10 * time.Second))
	b.update("a", 50, 100) // 25 % after 10 s: 30 s left
	if got := lastFrame(out.String()); !strings.Contains(got, " 25%") || !strings.Contains(got, "about 30s left") {
		t.Errorf("frame %q; want 25%% and about 30s left", got)
	}
	b.update("a", 40, 100) // stale report from run a
	b.update("c", 0, 100)  // a run that was not announced: the share would fall
	clk.SetTime(clk.Now().Add(2 * time.Second))
	b.update("b", 0, 100)
	if got := lastFrame(out.String()); !strings.Contains(got, " 25%") {
		t.Errorf("frame %q; want the bar to stay at 25%%", got)
	}
	var last int
	for _, f := range strings.Split(out.String(), "\r") {
		i := strings.Index(f, "%")
		if i < 0 {
			continue
		}
		var p int
		if _, err := fmt.Sscan(f[i-3:i], &p); err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		if p < last {
			t.Errorf("the bar went back from %d%% to %d%%: %q", last, p, out.String())
		}
		last = p
	}
	b.done()
	if !strings.HasSuffix(out.String(), "\r\033[K") {
		t.Errorf("done does not clear the line: %q", out.String())
	}
}

func TestProgressBarOff(t *testing.T) {
	var out strings.Builder
	b := newProgressBar(&out, false, clocktesting.NewFakePassiveClock(time.Now()))
	b.update("a", 5, 10)
	b.done()
	if out.Len() != 0 {
		t.Errorf("an off bar wrote %q", out.String())
	}
}

func TestETA(t *testing.T) {
	for _, tc := range []struct {
		elapsed time.Duration
		f       float64
		want    string
	}{
		{0, 0.5, ""},
		{10 * time.Second, 0, ""},
		{10 * time.Second, 1, ""},
		{10 * time.Second, 0.5, "  about 10s left"},
		{time.Minute, 0.25, "  about 3m00s left"},
		{time.Hour, 0.5, "  about 1h00m left"},
	} {
		if got := eta(tc.elapsed, tc.f); got != tc.want {
			t.Errorf("eta(%v, %v) = %q; want %q", tc.elapsed, tc.f, got, tc.want)
		}
	}
}

func lastFrame(s string) string {
	i := strings.LastIndex(s, "\r")
	return s[i+1:]
}
