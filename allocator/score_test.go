package allocator

import (
	"testing"
	"time"
)

func TestScoreEstimates(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	outs := []EstimateOutcome{
		{Earliest: at(10), Latest: at(20), Start: at(15)}, // inside: width 10, error 0, score 10
		{Earliest: at(10), Latest: at(20), Start: at(30)}, // 10 late: score 10 + 10·10 = 110, error 15
		{Earliest: at(0), Latest: at(40), Start: at(-2)},  // 2 early: 40 + 10·2 = 60, error 22
		{Earliest: at(30), Latest: at(20), Start: at(21)}, // reversed: inside, width 10, score 10, error 4
		{Earliest: at(5), Latest: at(5), Start: at(5)},    // exact: width 0, score 0
	}
	sc := ScoreEstimates(outs, time.Minute)
	if sc.N != 5 || sc.Inside != 3 || sc.Coverage != 0.6 || sc.InsideExactly != 3 || sc.CoverageExactly != 0.6 {
		t.Errorf("coverage: %+v; want 3 of 5", sc)
	}
	// Scores 10, 110, 60, 10, 0: mean 38 minutes.
	if sc.IntervalScore != 38*time.Minute {
		t.Errorf("interval score %v; want 38m", sc.IntervalScore)
	}
	// Widths 0, 10, 10, 10, 40: median 10. Errors 0, 0, 4, 15, 22: median 4, p90 22.
	if sc.MedianWidth != 10*time.Minute || sc.MedianAbsError != 4*time.Minute || sc.P90AbsError != 22*time.Minute {
		t.Errorf("width %v, error %v / %v; want 10m, 4m / 22m", sc.MedianWidth, sc.MedianAbsError, sc.P90AbsError)
	}
	// Within the tolerance counts as inside but still scores the miss.
	tol := ScoreEstimates([]EstimateOutcome{{Earliest: at(10), Latest: at(20), Start: at(20).Add(30 * time.Second)}}, time.Minute)
	if tol.Inside != 1 || tol.InsideExactly != 0 || tol.CoverageExactly != 0 || tol.IntervalScore != 15*time.Minute {
		t.Errorf("tolerance: %+v; want inside (not exactly), score 10m + 10·30s", tol)
	}
	if z := ScoreEstimates(nil, 0); z != (EstimateScore{}) {
		t.Errorf("no outcomes: %+v", z)
	}
}
