package allocator

import (
	"testing"
	"time"
)

// An elastic flavor (spot, provisioned) takes only the work pinned to it:
// work that asks for any flavor waits for reserved capacity instead of
// spending money unasked, while pinned work is admitted there at once.
func TestElasticFlavorOnlyForPinnedWork(t *testing.T) {
	c := MakeCluster().Flavor("h100", 8).Nodes("h100", 1, 8, 0, 0).
		Queue(MakeQueue("nlp").Quota("h100", 8).Quota("h100-spot", 16)).Obj()
	c.Flavors = append(c.Flavors, Flavor{Name: "h100-spot", GPUsPerNode: 8, Elastic: true})
	for _, n := range []string{"spot-1", "spot-2"} {
		c.Nodes = append(c.Nodes, Node{Name: n, Flavor: "h100-spot", GPUs: 8, Rack: "s", Block: "s"})
	}
	running := MakeWorkload("run").Queue("nlp").GPUs(8).Duration(2*time.Hour).Admitted("h100", 0).Obj()
	running.Admission.Nodes = []string{"h100-00"}
	s, err := NewSnapshot(c, t0, []Workload{running}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(MakeWorkload("any").Queue("nlp").GPUs(8).Obj()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(MakeWorkload("pinned").Queue("nlp").GPUs(8).Flavor("h100-spot").Obj()); err != nil {
		t.Fatal(err)
	}
	admitted := map[string]string{}
	for _, ev := range s.Schedule() {
		if ev.Kind == EventAdmitted {
			admitted[ev.ID] = ev.Admission.Flavor
		}
	}
	if admitted["pinned"] != "h100-spot" {
		t.Errorf("pinned work admitted on %q, want h100-spot", admitted["pinned"])
	}
	if f, ok := admitted["any"]; ok {
		t.Errorf("work asking for any flavor was admitted on %s; it must wait for reserved h100", f)
	}
	if a, why := s.Fit(MakeWorkload("probe").Queue("nlp").GPUs(8).Obj()); why == ReasonNone {
		t.Errorf("an unpinned probe fits on %s; the spot nodes are not for it", a.Flavor)
	}
	e := EstimateFor(s, "any", EstimateOptions{Horizon: 24 * time.Hour})
	if !e.Known || e.Earliest.Before(t0.Add(time.Hour)) {
		t.Errorf("estimate for the unpinned work = %+v; want it to start when the reserved node frees (2h)", e)
	}
}
