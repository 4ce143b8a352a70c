package allocator

import (
	"cmp"
	"slices"
	"strings"
)

// The orders of pending and admitted workloads, and the admitted lists
// (per queue and flavor, in preemption candidate order) with their sort
// keys.

// admList keeps a queue's admitted workloads on one flavor in preemption
// candidate order, with GPU totals per priority for quick bounds.
type admList struct {
	slots     []int32
	byCreated []int32   // the same, by priority, Created and ID
	prio      []prioSum // ascending priority
	// The sort keys of slots (priority, admission time) and of byCreated
	// (priority, Created), so that a search reads no workload slots but
	// on ties.
	vkeys, ckeys []admKey
	// The windows that slots, vkeys and byCreated, ckeys are the views
	// of; only insertAdmitted and removeAdmitted change them.
	vwin, cwin window
}

// clone is a deep copy of l.
func (l *admList) clone() admList {
	out := admList{prio: slices.Clone(l.prio), vwin: l.vwin.clone(), cwin: l.cwin.clone()}
	out.setViews()
	return out
}

func (l *admList) setViews() {
	if l.vwin.n == 0 {
		l.slots, l.vkeys = nil, nil
	} else {
		l.slots, l.vkeys = l.vwin.views()
	}
	if l.cwin.n == 0 {
		l.byCreated, l.ckeys = nil, nil
	} else {
		l.byCreated, l.ckeys = l.cwin.views()
	}
}

// admKey is a sort key of the admitted lists: a priority and a time,
// ascending. For the victim order (most recently admitted first) the
// time is the admission time negated (victimKey), so that both lists
// compare their keys the same way, inline in searchAdm.
type admKey struct {
	prio int32
	ns   int32
	sec  int64
}

// victimKey is x's key in the victim order.
func victimKey(x *wl) admKey { return admKey{prio: x.w.Priority, ns: -x.atNs, sec: -x.atSec} }

// createdKeyCmp is createdCmp on keys, without the ID, and victimCmp on
// victim keys.
func createdKeyCmp(a, b admKey) int {
	if a.prio != b.prio {
		return cmp.Compare(a.prio, b.prio)
	}
	if a.sec != b.sec {
		return cmp.Compare(a.sec, b.sec)
	}
	return cmp.Compare(a.ns, b.ns)
}

// searchAdm is where slot x, of key k, goes in (or is in) slots, ordered
// by keys and then by ID.
func (s *Snapshot) searchAdm(slots []int32, keys []admKey, k admKey, x int32) (int, bool) {
	lo, hi := 0, len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		km := &keys[m]
		var less bool
		switch {
		case km.prio != k.prio:
			less = km.prio < k.prio
		case km.sec != k.sec:
			less = km.sec < k.sec
		case km.ns != k.ns:
			less = km.ns < k.ns
		default:
			less = s.idCmp(slots[m], x) < 0
		}
		if less {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(keys) && keys[lo] == k && slots[lo] == x
}

// idCmp compares the IDs of live slots a and b (the sign of the result):
// by slot while the slots are in ID order (Snapshot.idOrder).
func (s *Snapshot) idCmp(a, b int32) int {
	if s.idOrder {
		return int(a) - int(b)
	}
	return s.idCmpRead(a, b)
}

func (s *Snapshot) idCmpRead(a, b int32) int { return strings.Compare(s.ws[a].w.ID, s.ws[b].w.ID) }

// idLess is idCmp(a, b) < 0.
func (s *Snapshot) idLess(a, b int32) bool {
	if s.idOrder {
		return a < b
	}
	return s.idCmpRead(a, b) < 0
}

// staticCmp orders pending workloads of one queue: priority descending
// (not in FirstComeFirstServed mode), then Created, then ID.
func (s *Snapshot) staticCmp(a, b *wl) int {
	if pa, pb := s.oprio(&a.w), s.oprio(&b.w); pa != pb {
		return cmp.Compare(pb, pa)
	}
	if c := cmpCreated(a, b); c != 0 {
		return c
	}
	return strings.Compare(a.w.ID, b.w.ID)
}

// cmpCreated compares the Created of a and b (the wall clock, as the
// integers kept for it).
func cmpCreated(a, b *wl) int {
	if a.crSec != b.crSec {
		return cmp.Compare(a.crSec, b.crSec)
	}
	return cmp.Compare(a.crNs, b.crNs)
}

// victimCmp orders admitted workloads as preemption candidates: lower
// priority first, then most recently admitted first, then ID.
func victimCmp(a, b *wl) int {
	if a.w.Priority != b.w.Priority {
		return cmp.Compare(a.w.Priority, b.w.Priority)
	}
	if a.atSec != b.atSec {
		return cmp.Compare(b.atSec, a.atSec)
	}
	if a.atNs != b.atNs {
		return cmp.Compare(b.atNs, a.atNs)
	}
	return strings.Compare(a.w.ID, b.w.ID)
}

// createdCmp orders workloads by priority, Created and ID.
func createdCmp(a, b *wl) int {
	if a.w.Priority != b.w.Priority {
		return cmp.Compare(a.w.Priority, b.w.Priority)
	}
	if c := cmpCreated(a, b); c != 0 {
		return c
	}
	return strings.Compare(a.w.ID, b.w.ID)
}

func (s *Snapshot) insertMember(c int32, slot int32) {
	cl := &s.classes[c]
	x := &s.ws[slot]
	i, _ := slices.BinarySearchFunc(cl.members, slot, func(m, _ int32) int { return s.staticCmp(&s.ws[m], x) })
	cl.members = slices.Insert(cl.members, i, slot)
}

func (s *Snapshot) removeMember(c int32, slot int32) {
	cl := &s.classes[c]
	x := &s.ws[slot]
	i, ok := slices.BinarySearchFunc(cl.members, slot, func(m, _ int32) int { return s.staticCmp(&s.ws[m], x) })
	if ok {
		cl.members = slices.Delete(cl.members, i, i+1)
	}
}

func (s *Snapshot) insertAdmitted(slot int32) {
	x := &s.ws[slot]
	l := &s.adm[x.q][x.fl]
	vk := victimKey(x)
	i, _ := s.searchAdm(l.slots, l.vkeys, vk, slot)
	l.vwin.insert(i, slot, vk)
	ck := admKey{prio: x.w.Priority, ns: x.crNs, sec: x.crSec}
	i, _ = s.searchAdm(l.byCreated, l.ckeys, ck, slot)
	l.cwin.insert(i, slot, ck)
	l.setViews()
	j, ok := slices.BinarySearchFunc(l.prio, x.w.Priority, func(p prioSum, t int32) int { return cmp.Compare(p.prio, t) })
	if !ok {
		l.prio = slices.Insert(l.prio, j, prioSum{prio: x.w.Priority})
	}
	l.prio[j].gpus += x.w.GPUs
	l.prio[j].n++
}

func (s *Snapshot) removeAdmitted(slot int32) {
	x := &s.ws[slot]
	l := &s.adm[x.q][x.fl]
	vk := victimKey(x)
	i, ok := s.searchAdm(l.slots, l.vkeys, vk, slot)
	if ok {
		l.vwin.remove(i)
	}
	ck := admKey{prio: x.w.Priority, ns: x.crNs, sec: x.crSec}
	i, ok = s.searchAdm(l.byCreated, l.ckeys, ck, slot)
	if ok {
		l.cwin.remove(i)
	}
	l.setViews()
	j, ok := slices.BinarySearchFunc(l.prio, x.w.Priority, func(p prioSum, t int32) int { return cmp.Compare(p.prio, t) })
	if ok {
		l.prio[j].gpus -= x.w.GPUs
		l.prio[j].n--
		if l.prio[j].n == 0 {
			l.prio = slices.Delete(l.prio, j, j+1)
		}
	}
}
