package allocator

import (
	"testing"
	"time"
)

// TestSnapshotTimesAreWallClock: times handed to a snapshot with a
// monotonic clock reading (time.Now's) are kept without it — Now, every
// Created, every Admission.At, and the times an estimate simulation
// moves to — so that workloads from the store (no reading) and this
// process's (with one) are ordered by the same clock everywhere.
func TestSnapshotTimesAreWallClock(t *testing.T) {
	now := time.Now() // has a monotonic reading
	if now == now.Round(0) {
		t.Skip("this platform's time.Now has no monotonic reading")
	}
	wallOnly := func(what string, x time.Time) {
		t.Helper()
		if x != x.Round(0) {
			t.Errorf("%s = %v keeps a monotonic clock reading", what, x)
		}
	}
	c := MakeCluster().Flavor("h100", 8).Nodes("h100", 2, 8, 0, 0).
		Queue(MakeQueue("a").Quota("h100", 16)).Obj()
	running := MakeWorkload("run").Queue("a").GPUs(8).Duration(time.Hour).Obj()
	running.Created = now.Add(-2 * time.Hour)
	running.Admission = &Admission{Flavor: "h100", At: now.Add(-time.Hour), Nodes: []string{"h100-00"}}
	s, err := NewSnapshot(c, now, []Workload{running}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wallOnly("Now", s.Now())
	w, _ := s.Workload("run")
	wallOnly("Created of a workload from NewSnapshot", w.Created)
	wallOnly("Admission.At from NewSnapshot", w.Admission.At)

	added := MakeWorkload("new").Queue("a").GPUs(8).Duration(time.Hour).Obj()
	added.Created = now
	if _, err := s.Add(added); err != nil {
		t.Fatal(err)
	}
	w, _ = s.Workload("new")
	wallOnly("Created of an added workload", w.Created)
	if _, err := s.Reserve("new", Admission{Flavor: "h100", At: now, Nodes: []string{"h100-01"}}); err != nil {
		t.Fatal(err)
	}
	w, _ = s.Workload("new")
	wallOnly("Admission.At from Reserve", w.Admission.At)

	s.Advance(now.Add(30*time.Minute), func(w Workload) time.Time { return w.Admission.At.Add(w.Duration) })
	wallOnly("Now after Advance", s.Now())
	for _, w := range s.Workloads() {
		if w.Admission != nil {
			wallOnly("Admission.At of "+w.ID+" after Advance", w.Admission.At)
		}
	}
}
