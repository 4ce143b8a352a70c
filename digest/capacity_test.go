package digest_test

import (
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// nlpWaits: nlp runs 16 GPUs admitted an hour ago for 4h, and a
// high-priority request of 8 GPUs waits. With the default runtime range
// (half to all of the requested time) the running work ends in 1h–3h, so
// the wait's estimate is 1h–3h: 2h in the middle.
func nlpWaits(now time.Time) []allocator.Workload {
	return []allocator.Workload{
		{ID: "r1", Queue: "nlp", Priority: prio["normal"], GPUs: 16, Created: now.Add(-time.Hour), Duration: 4 * time.Hour,
			Admission: &allocator.Admission{Flavor: "h100", At: now.Add(-time.Hour), Nodes: []string{"h100-n1", "h100-n2"}}},
		{ID: "r2", Queue: "nlp", Priority: prio["high"], GPUs: 8, Created: now.Add(-30 * time.Minute), Duration: 2 * time.Hour},
	}
}

func TestCapacitySentence(t *testing.T) {
	for name, tc := range map[string]struct {
		cluster *allocator.Cluster
		team    string
		want    string
	}{
		// r1 ends 1h15m to 3h from now: a quarter of its 4h has run, and
		// the one finished request (r9) ran all its time, which moves the
		// learned runtimes from half-to-all up a little; the estimate is
		// the middle, 2h11m.
		//
		// nlp may not borrow: its own quota binds. More GPUs do nothing;
		// a higher borrowing limit starts it at once from the 16 GPUs
		// vision does not use.
		"quota-bound": {
			cluster: cluster(4, map[string][2]int{"nlp": {16, 0}, "vision": {16, 16}}),
			want: "For the 1 high-priority request waiting, its estimated wait now is 2h11m; more GPUs would not shorten it " +
				"(they wait for quota or their turn, not hardware); raising nlp's h100 borrowing limit by 16 would take it to 0m.",
		},
		// Quota is promised beyond the hardware: one more node starts it.
		"capacity-bound": {
			cluster: cluster(2, map[string][2]int{"nlp": {32, 0}, "vision": {0, 0}}),
			team:    "nlp",
			want:    "For the 1 high-priority request waiting, its estimated wait now is 2h11m; +8 h100 would take it to 0m.",
		},
		"nothing of the team waits": {
			cluster: cluster(4, map[string][2]int{"nlp": {16, 0}, "vision": {16, 16}}),
			team:    "vision",
			want:    "Nothing of vision waits now, so no what-if applies.",
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			now := due
			e.put(records.Request{ID: "r9", Requester: "alice", Team: "nlp", GPUs: 8, Priority: "normal", State: records.StateFinished,
				CreatedAt: at(30, 8, 0), AdmittedAt: at(30, 8, 0), EndedAt: at(30, 9, 0), Duration: time.Hour,
				Waits: []records.Wait{{From: at(30, 8, 0), To: at(30, 8, 0)}}})
			e.use(records.UsageRecord{Request: "r9", Team: "nlp", Requester: "alice", GPUs: 8, Start: at(30, 8, 0), End: at(30, 9, 0)},
				records.UsageRecord{Request: "r8", Team: "vision", Requester: "dave", GPUs: 8, Start: at(30, 8, 0), End: at(30, 9, 0)})
			eng := e.engine(tc.cluster, now, nlpWaits(now), nil)
			r, err := eng.Digest(e.ctx, tc.team, now)
			if err != nil {
				t.Fatal(err)
			}
			has(t, text(r), "Capacity: The queue was not sampled yesterday, so what it waited for is not known. "+tc.want)
		})
	}
}
