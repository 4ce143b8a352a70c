package app

import (
	"log/slog"
	"os"
	"runtime"
	"testing"
)

// TestSlackProcs: Slack mode runs more Go processors than CPUs (so that an
// ack's goroutines, woken by the network or an fsync, do not queue behind
// the estimates' computations), unless GOMAXPROCS is set or a CPU limit
// holds Go below the machine's CPUs; and asking again does not raise it
// further.
func TestSlackProcs(t *testing.T) {
	for _, tc := range []struct {
		name                string
		env                 string
		current, cpus, want int
	}{
		{"the default on 2 CPUs", "", 2, 2, 4 * 2},
		{"already raised", "", 4 * 2, 2, 4 * 2},
		{"GOMAXPROCS set", "2", 2, 2, 0},
		{"a CPU limit below the machine", "", 2, 16, 0},
	} {
		if got := slackProcs(tc.env, tc.current, tc.cpus); got != tc.want {
			t.Errorf("%s: slackProcs(%q, %d, %d) = %d, want %d", tc.name, tc.env, tc.current, tc.cpus, got, tc.want)
		}
	}
}

// TestSlackProcsPutBack: the last Slack bot of the process to stop puts
// GOMAXPROCS back to what the first found, so that one bot's setting does
// not outlive it (tests run many bots in one process).
func TestSlackProcsPutBack(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" || before != runtime.NumCPU() {
		t.Skipf("GOMAXPROCS is %d (env %q) on %d CPUs: Slack mode leaves it", before, os.Getenv("GOMAXPROCS"), runtime.NumCPU())
	}
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	log := slog.New(slog.DiscardHandler)
	first, second := raiseProcs(log), raiseProcs(log)
	if got := runtime.GOMAXPROCS(0); got != procsPerCPU*before {
		t.Fatalf("with two bots: GOMAXPROCS %d, want %d", got, procsPerCPU*before)
	}
	first()
	if got := runtime.GOMAXPROCS(0); got != procsPerCPU*before {
		t.Errorf("with one bot left: GOMAXPROCS %d, want %d", got, procsPerCPU*before)
	}
	second()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("with none: GOMAXPROCS %d, want %d back", got, before)
	}
}
