package app

import "testing"

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
