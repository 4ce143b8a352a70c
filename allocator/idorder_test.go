package allocator

import (
	"maps"
	"testing"
	"time"
)

// TestIDOrderAfterAdds: ties on priority and Created go to the lower ID,
// also after Adds that recycle a slot or come out of ID order (where the
// slots' order is no longer the IDs', Snapshot.idOrder), as on a fresh
// snapshot of the same workloads. Heads of two classes tie (6 and 8
// GPUs, one 8-GPU node), so the lower ID is admitted and the other
// waits.
func TestIDOrderAfterAdds(t *testing.T) {
	running := MakeWorkload("a1").Queue("a").GPUs(8).Admitted("f", 0, "n").Duration(time.Hour).Obj()
	for _, fair := range []bool{false, true} {
		cw := MakeCluster().Flavor("f", 8).Node("n", "f", 8, "", "").Queue(MakeQueue("a").Quota("f", 8))
		if fair {
			cw = cw.Fair(time.Hour, 0)
		}
		c := cw.Obj()
		cases := map[string]struct {
			first    []Workload // in the snapshot from the start
			added    []Workload // added later
			addFirst bool       // added before a1 is released, else after
			want     string     // the one admitted
		}{
			"a recycled slot, ID above the others": {
				first: []Workload{running, MakeWorkload("b").Queue("a").GPUs(8).Obj()},
				added: []Workload{MakeWorkload("e").Queue("a").GPUs(6).Obj()},
				want:  "b",
			},
			"appended, ID below the others": {
				first:    []Workload{running, MakeWorkload("m").Queue("a").GPUs(8).Obj()},
				added:    []Workload{MakeWorkload("c").Queue("a").GPUs(6).Obj()},
				addFirst: true,
				want:     "c",
			},
		}
		for name, tc := range cases {
			s := newSnapshot(t, c, tc.first...)
			add := func() {
				for _, w := range tc.added {
					if _, err := s.Add(w); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.addFirst {
				add()
			}
			if _, err := s.Release("a1"); err != nil {
				t.Fatal(err)
			}
			if !tc.addFirst {
				add()
			}
			fresh := newSnapshot(t, c, append(slicesWithout(tc.first, "a1"), tc.added...)...)
			s.Schedule()
			fresh.Schedule()
			got, want := admittedOn(s), admittedOn(fresh)
			if !maps.Equal(got, want) {
				t.Errorf("fair=%v, %s: admitted %v, on a fresh snapshot %v", fair, name, got, want)
			}
			if _, ok := got[tc.want]; !ok || len(got) != 1 {
				t.Errorf("fair=%v, %s: admitted %v, want only %s (the lower ID)", fair, name, got, tc.want)
			}
		}
	}
}

func slicesWithout(ws []Workload, id string) []Workload {
	var out []Workload
	for _, w := range ws {
		if w.ID != id {
			out = append(out, w)
		}
	}
	return out
}
