package simulate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReplayHistoryByHand: one 4-GPU node of flavor x. j1 (team a, 4
// GPUs, asks for 1h, runs 12m) arrives at 0 and j2 (the same) at 1m, and
// waits for j1's end. The range posted for j2 is j1's end as learned:
//
//   - no history (a cold start): nothing has finished, so j1 ends at half
//     to all of its hour: 30m–1h, and j2's start at 12m misses.
//   - a history of 20 runs of team a asking for 1h that ran 12m (0.2 of
//     it): the cell's 10th and 90th percentiles are both 0.2 (its prior,
//     the team's and the template's, is 0.2 up to its 97th percentile),
//     so j1 ends at 12m–12m15s: the quantile (found by bisection, to
//     1e-6) is a hair above 0.2, and an end 11m after now is rounded onto
//     a grid of 15s (allocator.EstimateOptions.Step), down in the low
//     simulation and up in the high one. j2's start at 12m is inside.
//   - the same runs on flavor h100, which the cluster lacks: the replay
//     would not run them, and they are no history (as cold).
//
// Every policy replays from the same history: each appends its own
// finished runs (run under -race, three policies in parallel).
func TestReplayHistoryByHand(t *testing.T) {
	const nodes = "name,flavor,gpus\nn1,x,4\n"
	const jobs = "id,submit,duration,gpus,requested,team\nj1,0,12m,4,1h,a\nj2,60,1h,4,1h,a\n"
	hist := func(flavor string) string {
		var b strings.Builder
		b.WriteString("id,submit,duration,gpus,requested,team,flavor\n")
		for i := range 20 {
			fmt.Fprintf(&b, "h%d,%d,12m,1,1h,a,%s\n", i, i, flavor)
		}
		return b.String()
	}
	type est struct{ Earliest, Latest float64 }
	for name, tc := range map[string]struct {
		history string
		want    est
	}{
		"cold":           {"", est{1800, 3600}},
		"warm":           {hist("x"), est{720, 735}},
		"other hardware": {hist("h100"), est{1800, 3600}},
	} {
		t.Run(name, func(t *testing.T) {
			s := Setup{Policies: StandardPolicies(GpubotDefaults), Calibrate: -1}
			if tc.history != "" {
				h, err := ReadTrace(strings.NewReader(tc.history), "history.csv", ReadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				s.History = h
			}
			rep := replayCSV(t, nodes, jobs, s)
			for _, r := range rep.Runs {
				var got est
				for _, j := range r.Jobs {
					if j.ID == "j2" {
						got = est{j.EstEarliest, j.EstLatest}
					}
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s: j2's range (-want +got):\n%s", r.Name, diff)
				}
			}
		})
	}
}
