package simcluster

import (
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// tracked is the snapshot a change works on, with the workloads its
// mutations touched: the saved state a commit writes (persist.go) is the
// touched workloads' and the rest of the state's, not every workload's.
// Every mutating method of allocator.Snapshot that the cluster uses is
// wrapped here to mark what it changes; the read-only ones are promoted.
// A workload an operation changes without a mark here would not be
// saved (TestOwnerSavesEveryKindOfChange finds it: a restart loads
// another cluster).
type tracked struct {
	*allocator.Snapshot
	touched map[string]struct{}
}

func track(s *allocator.Snapshot) *tracked {
	return &tracked{Snapshot: s, touched: map[string]struct{}{}}
}

func (t *tracked) mark(id string) { t.touched[id] = struct{}{} }

// marked marks the workload of every event (an admission, a preemption,
// an end, pods reported not ready) and returns evs.
func (t *tracked) marked(evs []allocator.Event) []allocator.Event {
	for _, ev := range evs {
		t.mark(ev.ID)
	}
	return evs
}

// Add adds w (see allocator.Snapshot.Add).
func (t *tracked) Add(w allocator.Workload) (func(), error) {
	t.mark(w.ID)
	return t.Snapshot.Add(w)
}

// Reserve admits id on a (see allocator.Snapshot.Reserve).
func (t *tracked) Reserve(id string, a allocator.Admission) (func(), error) {
	t.mark(id)
	return t.Snapshot.Reserve(id, a)
}

// Release removes id (see allocator.Snapshot.Release).
func (t *tracked) Release(id string) (func(), error) {
	t.mark(id)
	return t.Snapshot.Release(id)
}

// Evict makes admitted id pending again (see allocator.Snapshot.Evict).
func (t *tracked) Evict(id string) (func(), error) {
	t.mark(id)
	return t.Snapshot.Evict(id)
}

// Extend sets id's duration (see allocator.Snapshot.Extend).
func (t *tracked) Extend(id string, d time.Duration) (func(), error) {
	t.mark(id)
	return t.Snapshot.Extend(id, d)
}

// Preempt evicts victims for id (see allocator.Snapshot.Preempt): each
// victim's eviction and id's admission is an event; on an error nothing
// changed.
func (t *tracked) Preempt(id string, victims []string) ([]allocator.Event, error) {
	evs, err := t.Snapshot.Preempt(id, victims)
	return t.marked(evs), err
}

// Schedule runs a scheduling cycle (see allocator.Snapshot.Schedule).
func (t *tracked) Schedule() []allocator.Event { return t.marked(t.Snapshot.Schedule()) }

// Advance moves time to to (see allocator.Snapshot.Advance).
func (t *tracked) Advance(to time.Time, end func(allocator.Workload) time.Time) []allocator.Event {
	return t.marked(t.Snapshot.Advance(to, end))
}
