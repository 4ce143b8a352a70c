package allocator

import (
	"cmp"
	"slices"
	"strings"
)

// orderKey is a pending workload's place in the admission order:
// priority descending (FirstComeFirstServed: ignored), then
// (FairSharing) the queue's share ascending, then Created, then ID.
type orderKey struct {
	prio  int32
	share float64
	crSec int64 // Created, as wl keeps it
	crNs  int32
	id    string
}

func cmpKey(a, b *orderKey) int {
	if a.prio != b.prio {
		return cmp.Compare(b.prio, a.prio)
	}
	if a.share != b.share {
		return cmp.Compare(a.share, b.share)
	}
	if a.crSec != b.crSec {
		return cmp.Compare(a.crSec, b.crSec)
	}
	if a.crNs != b.crNs {
		return cmp.Compare(a.crNs, b.crNs)
	}
	return strings.Compare(a.id, b.id)
}

// share is what FairSharing orders queues by: decayed usage over weight.
// It is 0 for every queue in BestEffortFIFO mode.
func (s *Snapshot) share(q int) float64 {
	if !s.ix.fair {
		return 0
	}
	return s.usage[q] / s.ix.queues[q].weight
}

// shares returns every queue's share.
func (s *Snapshot) shares() []float64 {
	out := make([]float64, len(s.ix.queues))
	for q := range out {
		out[q] = s.share(q)
	}
	return out
}

// oprio is the priority the admission order goes by: the workload's, or
// 0 for every workload in FirstComeFirstServed mode.
func (s *Snapshot) oprio(w *Workload) int32 {
	if s.ix.fcfs {
		return 0
	}
	return w.Priority
}

func (s *Snapshot) keyOf(slot int32) orderKey {
	x := &s.ws[slot]
	return orderKey{prio: s.oprio(&x.w), share: s.share(int(x.q)), crSec: x.crSec, crNs: x.crNs, id: x.w.ID}
}

// pendingInOrder returns every pending slot in admission order at Now.
func (s *Snapshot) pendingInOrder() []int32 {
	var out []int32
	for _, c := range s.classes {
		out = append(out, c.members...)
	}
	shares := s.shares()
	slices.SortFunc(out, func(a, b int32) int { return s.cmpOrder(shares, a, b) })
	return out
}

// cmpOrder compares pending slots a and b in admission order (see Order)
// under the queues' shares.
func (s *Snapshot) cmpOrder(shares []float64, a, b int32) int {
	x, y := &s.ws[a], &s.ws[b]
	if px, py := s.oprio(&x.w), s.oprio(&y.w); px != py {
		return cmp.Compare(py, px)
	}
	if sx, sy := shares[x.q], shares[y.q]; sx != sy {
		return cmp.Compare(sx, sy)
	}
	if c := cmpCreated(x, y); c != 0 {
		return c
	}
	return strings.Compare(x.w.ID, y.w.ID)
}

// Order returns the IDs of the pending workloads in admission order under
// the policy at Now: priority descending (not in FirstComeFirstServed
// mode); in FairSharing mode then the queue's Usage/Weight ascending
// (weight 0 counts as 1); then Created; then ID. It is the order Schedule
// tries them in (entry penalties added during a cycle can reorder the
// rest of that cycle).
func (s *Snapshot) Order() []string {
	slots := s.pendingInOrder()
	out := make([]string, len(slots))
	for i, slot := range slots {
		out[i] = s.ws[slot].w.ID
	}
	return out
}
