package app

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// progressBar draws the combined progress of gpubot simulate's runs on a
// terminal, with an estimate of the time left. The runs announce
// themselves (done 0) before any starts, so the total does not grow; the
// bar never goes backwards even if it did.
type progressBar struct {
	w       io.Writer
	on      bool
	clk     clock.PassiveClock
	mu      sync.Mutex
	runs    map[string][2]int
	start   time.Time
	last    int // percent last drawn, -1 before the first
	drawn   time.Time
	printed bool
}

func newProgressBar(w io.Writer, on bool, clk clock.PassiveClock) *progressBar {
	return &progressBar{w: w, on: on, clk: clk, runs: map[string][2]int{}, last: -1, start: clk.Now()}
}

// update records that run has done done of total steps, and redraws the
// bar when the percentage moved or a second has passed.
func (b *progressBar) update(run string, done, total int) {
	if !b.on {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.runs[run]; ok && old[1] == total {
		done = max(done, old[0])
	}
	b.runs[run] = [2]int{done, total}
	d, t := 0, 0
	for _, x := range b.runs {
		d += x[0]
		t += x[1]
	}
	if t == 0 {
		return
	}
	pct := max(b.last, 100*d/t)
	now := b.clk.Now()
	if pct == b.last && now.Sub(b.drawn) < time.Second {
		return
	}
	b.last, b.drawn = pct, now
	const width = 30
	fill := width * pct / 100
	fmt.Fprintf(b.w, "\r[%s%s] %3d%%  %d runs%s\033[K", strings.Repeat("#", fill), strings.Repeat(".", width-fill), pct, len(b.runs),
		eta(now.Sub(b.start), float64(d)/float64(t)))
	b.printed = true
}

// eta says how long is left after elapsed for a fraction f of the work,
// at the same pace; nothing until there is a pace to go by.
func eta(elapsed time.Duration, f float64) string {
	if f <= 0 || f >= 1 || elapsed < time.Second {
		return ""
	}
	left := time.Duration(float64(elapsed) * (1 - f) / f).Round(time.Second)
	switch {
	case left < time.Minute:
		return fmt.Sprintf("  about %ds left", int(left.Seconds()))
	case left < time.Hour:
		return fmt.Sprintf("  about %dm%02ds left", int(left.Minutes()), int(left.Seconds())%60)
	}
	return fmt.Sprintf("  about %dh%02dm left", int(left.Hours()), int(left.Minutes())%60)
}

func (b *progressBar) done() {
	if b.printed {
		fmt.Fprint(b.w, "\r\033[K")
	}
}
