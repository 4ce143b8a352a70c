package allocator

import (
	"fmt"
	"math/bits"
	"slices"
	"time"
)

// This file holds the snapshot's mutations: the public ones, which return
// an undo function, and the primitives every other file builds on.

// undoable wraps the reversal of the mutation that just bumped s.ver.
// The undo function restores the snapshot exactly if it is called before
// any other mutation of s (undo functions nest: call them in reverse
// order); called later, or twice, it does nothing.
func (s *Snapshot) undoable(reverse func()) func() {
	after := s.ver
	done := false
	return func() {
		if done || s.ver != after {
			return
		}
		done = true
		reverse()
		s.ver = after - 1
	}
}

// Add adds a workload. With Admission nil it is pending; with Admission
// set it is validated (flavor, one node per pod, node capacity) and placed
// as given, without checking quota or topology, as a real cluster
// reports it.
func (s *Snapshot) Add(w Workload) (undo func(), err error) {
	recycled := len(s.freeSlots) > 0
	slot, err := s.add(w)
	if err != nil {
		return nil, err
	}
	s.ver++
	return s.undoable(func() {
		s.remove(slot)
		if !recycled { // the slot was appended: drop it again
			s.freeSlots = s.freeSlots[:len(s.freeSlots)-1]
			s.ws = s.ws[:len(s.ws)-1]
		}
	}), nil
}

// ScheduleWith adds w, pending, and runs Schedule: the question "what
// would happen if w were submitted now", for what-ifs that ask it of
// many workloads in turn on one copy of a snapshot. When the cycles
// admitted nothing but w (or nothing at all), undo takes w out again and
// puts back what its admission changed (the fair-sharing entry penalty),
// so that s is as it was: the next question can be asked on it. When they
// changed anything else (preempted or admitted other work), undo is nil
// and s stays as it is. As with every undo function, it must be called
// before any other mutation of s; reads (EstimateFor, Workload) may come
// between. On an error s is unchanged.
func (s *Snapshot) ScheduleWith(w Workload) (events []Event, undo func(), err error) {
	before, usage, idOrder, maxID := s.ver, slices.Clone(s.usage), s.idOrder, s.maxID
	recycled := len(s.freeSlots) > 0
	slot, err := s.add(w)
	if err != nil {
		return nil, nil, err
	}
	s.ver++
	events = s.Schedule()
	for _, e := range events {
		if e.ID != w.ID {
			return events, nil, nil
		}
	}
	after, done := s.ver, false
	return events, func() {
		if done || s.ver != after {
			return
		}
		done = true
		s.remove(slot)
		if !recycled {
			s.freeSlots = s.freeSlots[:len(s.freeSlots)-1]
			s.ws = s.ws[:len(s.ws)-1]
		}
		copy(s.usage, usage)
		s.idOrder, s.maxID, s.ver = idOrder, maxID, before
	}, nil
}

// add validates and inserts w, returning its slot.
func (s *Snapshot) add(w Workload) (int32, error) {
	if w.ID == "" {
		return 0, invalidf("workload has no ID")
	}
	if _, dup := s.byID[w.ID]; dup {
		return 0, invalidf("workload %q already exists", w.ID)
	}
	q, pin, cands, err := s.resolve(&w)
	if err != nil {
		return 0, err
	}
	var (
		a     *Admission
		c     cand
		nodes []int32
	)
	if w.Admission != nil {
		a = copyAdmission(w.Admission)
		c, nodes, err = s.checkPlacement(&w, a, cands)
		if err != nil {
			return 0, err
		}
	}
	w.Admission = nil
	w.Created = wall(w.Created)
	cls := s.classFor(q, reqOf(&w), w.Topology, pin, cands)
	if len(s.freeSlots) > 0 || (len(s.ws) > 0 && w.ID <= s.maxID) {
		s.idOrder = false
	}
	s.maxID = max(s.maxID, w.ID)
	slot := s.newSlot()
	s.ws[slot] = wl{w: w, live: true, q: int32(q), cls: cls, fl: -1, crSec: w.Created.Unix(), crNs: int32(w.Created.Nanosecond())}
	s.byID[w.ID] = slot
	s.makePending(slot)
	if a != nil {
		s.admit(slot, c, nodes, a)
	}
	return slot, nil
}

func (s *Snapshot) newSlot() int32 {
	if n := len(s.freeSlots); n > 0 {
		slot := s.freeSlots[n-1]
		s.freeSlots = s.freeSlots[:n-1]
		return slot
	}
	s.ws = append(s.ws, wl{})
	return int32(len(s.ws) - 1)
}

// remove deletes the workload in slot entirely, freeing its GPUs.
func (s *Snapshot) remove(slot int32) {
	s.touch(slot)
	x := &s.ws[slot]
	if x.fl >= 0 {
		s.unadmit(slot, false) // now pending, outside its class
	} else {
		s.removeMember(x.cls, slot)
	}
	s.mixPending(slot, -1)
	s.nPending[x.q]--
	if s.lean {
		s.nLive-- // byID is shared (Snapshot.lean)
	} else {
		delete(s.byID, x.w.ID)
	}
	s.ws[slot] = wl{}
	s.freeSlots = append(s.freeSlots, slot)
}

// checkPlacement validates admission a for workload w: its flavor is one
// of w's candidates, it names one existing node of that flavor per pod,
// and the nodes have room. It returns the candidate and node ids.
func (s *Snapshot) checkPlacement(w *Workload, a *Admission, cands []cand) (cand, []int32, error) {
	var c cand
	found := false
	for _, k := range cands {
		if s.ix.flavors[k.f].name == a.Flavor {
			c, found = k, true
			break
		}
	}
	if !found {
		return c, nil, invalidf("workload %q: admission flavor %q is not one it can use in queue %q", w.ID, a.Flavor, w.Queue)
	}
	if len(a.Nodes) != int(c.pods) {
		return c, nil, invalidf("workload %q: %d GPUs on flavor %q are %d pods of %d, but the admission names %d nodes", w.ID, w.GPUs, a.Flavor, c.pods, c.per, len(a.Nodes))
	}
	nodes := make([]int32, len(a.Nodes))
	need := map[int32]int32{}
	for i, name := range a.Nodes {
		n, ok := s.ix.nodeIdx[name]
		if !ok {
			return c, nil, invalidf("workload %q: unknown node %q", w.ID, name)
		}
		if s.ix.nodes[n].flavor != int(c.f) {
			return c, nil, invalidf("workload %q: node %q is not of flavor %q", w.ID, name, a.Flavor)
		}
		nodes[i] = int32(n)
		need[int32(n)] += c.per
	}
	for n, g := range need {
		if g > s.nodeFree[n] {
			return c, nil, fmt.Errorf("%w: workload %q needs %d GPUs on node %q, which has %d free", ErrState, w.ID, g, s.ix.nodes[n].name, s.nodeFree[n])
		}
	}
	return c, nodes, nil
}

// Reserve admits the pending workload id with admission a, after checking
// the flavor, one node per pod, node capacity, the topology requirement
// and the queue's quota (see Available). A zero a.At means Now. Reserve
// does not add the fair-sharing entry penalty (Schedule and Preempt do).
func (s *Snapshot) Reserve(id string, a Admission) (undo func(), err error) {
	slot, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	x := &s.ws[slot]
	if x.fl >= 0 {
		return nil, fmt.Errorf("%w: workload %q is already admitted", ErrState, id)
	}
	ad := copyAdmission(&a)
	if ad.At.IsZero() {
		ad.At = s.now
	}
	c, nodes, err := s.checkPlacement(&x.w, ad, s.classes[x.cls].cands)
	if err != nil {
		return nil, err
	}
	if !s.sameDomain(x.w.Topology, nodes) {
		return nil, fmt.Errorf("%w: workload %q requires one %s, but the admission spans several", ErrState, id, x.w.Topology)
	}
	if avail := s.available(int(x.q), int(c.f)); s.ix.simple && x.w.GPUs > avail {
		return nil, fmt.Errorf("%w: workload %q needs %d GPUs of flavor %q but queue %q has %d available", ErrState, id, x.w.GPUs, a.Flavor, x.w.Queue, max(0, avail))
	}
	if !s.ix.simple {
		for r, v := range reqOf(&x.w) {
			if avail := s.tAvailable(int(x.q), fr(int(c.f), Resource(r))); v > 0 && v > avail {
				return nil, fmt.Errorf("%w: workload %q needs %d %s of flavor %q but queue %q has %d available", ErrState, id, v, Resource(r), a.Flavor, x.w.Queue, max(0, avail))
			}
		}
	}
	s.admit(slot, c, nodes, ad)
	s.ver++
	return s.undoable(func() { s.unadmit(slot, true) }), nil
}

// Release removes a workload entirely (pending or admitted), freeing its
// GPUs.
func (s *Snapshot) Release(id string) (undo func(), err error) {
	slot, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	old := s.ws[slot]
	s.remove(slot)
	s.ver++
	return s.undoable(func() {
		s.freeSlots = s.freeSlots[:len(s.freeSlots)-1]
		s.restore(slot, old)
	}), nil
}

// restore puts a removed workload back in its old slot and state.
func (s *Snapshot) restore(slot int32, old wl) {
	a := old.w.Admission
	old.w.Admission = nil
	fl, per, nodes := old.fl, old.per, old.nodes
	old.fl, old.per, old.nodes = -1, 0, nil
	s.ws[slot] = old
	s.byID[old.w.ID] = slot
	s.makePending(slot)
	if fl >= 0 {
		s.admit(slot, cand{f: fl, pods: int32(len(nodes)), per: per}, nodes, a)
	}
}

// Evict turns an admitted workload back into a pending one (keeping its
// Created time), freeing its GPUs.
func (s *Snapshot) Evict(id string) (undo func(), err error) {
	slot, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	x := &s.ws[slot]
	if x.fl < 0 {
		return nil, fmt.Errorf("%w: workload %q is not admitted", ErrState, id)
	}
	c := cand{f: x.fl, pods: int32(len(x.nodes)), per: x.per}
	nodes, a := x.nodes, x.w.Admission
	s.unadmit(slot, true)
	s.ver++
	return s.undoable(func() { s.admit(slot, c, nodes, a) }), nil
}

// Extend sets a workload's requested Duration.
func (s *Snapshot) Extend(id string, d time.Duration) (undo func(), err error) {
	slot, err := s.lookup(id)
	if err != nil {
		return nil, err
	}
	if d < 0 {
		return nil, invalidf("workload %q: negative duration %v", id, d)
	}
	old := s.ws[slot].w.Duration
	s.ws[slot].w.Duration = d
	s.ver++
	return s.undoable(func() { s.ws[slot].w.Duration = old }), nil
}

// makePending files a slot (with fl == -1) as pending.
func (s *Snapshot) makePending(slot int32) {
	x := &s.ws[slot]
	s.insertMember(x.cls, slot)
	s.mixPending(slot, 1)
	s.nPending[x.q]++
}

// admit turns pending slot into an admitted one on candidate c, nodes.
func (s *Snapshot) admit(slot int32, c cand, nodes []int32, a *Admission) {
	s.touch(slot)
	x := &s.ws[slot]
	s.removeMember(x.cls, slot)
	s.mixPending(slot, -1)
	s.nPending[x.q]--
	x.fl, x.per, x.nodes = c.f, c.per, nodes
	x.w.Admission = a
	x.atSec, x.atNs = a.At.Unix(), int32(a.At.Nanosecond())
	was := s.borrowing(int(x.q), int(c.f))
	s.occupy(slot)
	if now := s.borrowing(int(x.q), int(c.f)); now != was {
		s.flipGen[c.f]++
	} else if now {
		s.reclaimGen[c.f]++
	}
	s.shadowUpdate(slot, 1)
	s.insertAdmitted(slot)
	s.mixAdmitted(slot, 1)
}

// unadmit turns admitted slot into a pending one; toClass=false leaves it
// out of its class (the caller files it later, or removes it).
func (s *Snapshot) unadmit(slot int32, toClass bool) {
	s.touch(slot)
	x := &s.ws[slot]
	s.mixAdmitted(slot, -1)
	s.removeAdmitted(slot)
	was := s.borrowing(int(x.q), int(x.fl))
	s.vacate(slot)
	if s.borrowing(int(x.q), int(x.fl)) != was {
		s.flipGen[x.fl]++
	}
	s.freedGPUs[x.fl] += int64(x.w.GPUs)
	s.shadowUpdate(slot, -1)
	x.fl, x.per, x.nodes = -1, 0, nil
	x.w.Admission = nil
	s.mixPending(slot, 1)
	s.nPending[x.q]++
	if toClass {
		s.insertMember(x.cls, slot)
	}
}

// occupy takes the GPUs and quota of admitted slot; vacate gives them
// back. Preemption searches use the pair directly.
func (s *Snapshot) occupy(slot int32) {
	x := &s.ws[slot]
	for _, n := range x.nodes {
		s.setFree(int(n), s.nodeFree[n]-x.per)
	}
	s.addUsed(int(x.q), int(x.fl), x.w.GPUs)
	s.occupyRes(x, 1)
}

func (s *Snapshot) vacate(slot int32) {
	x := &s.ws[slot]
	for i := len(x.nodes) - 1; i >= 0; i-- {
		n := x.nodes[i]
		s.setFree(int(n), s.nodeFree[n]+x.per)
	}
	s.addUsed(int(x.q), int(x.fl), -x.w.GPUs)
	s.occupyRes(x, -1)
}

// occupyRes keeps the general engine's state in step: the tree's usage
// and the nodes' free CPU and memory.
func (s *Snapshot) occupyRes(x *wl, sign int64) {
	if s.tuse != nil {
		s.tAddReq(int(x.q), int(x.fl), reqOf(&x.w), sign)
	}
	if s.nodeCPU != nil && (x.w.CPU > 0 || x.w.Memory > 0) && len(x.nodes) > 0 {
		per := reqOf(&x.w).perPod(int32(len(x.nodes)))
		for _, n := range x.nodes {
			s.nodeCPU[n] -= sign * per[ResourceCPU]
			s.nodeMem[n] -= sign * per[ResourceMemory]
		}
	}
}

// setFree changes node n's free count, keeping every bucket in step.
func (s *Snapshot) setFree(n int, v int32) {
	ni := &s.ix.nodes[n]
	old := s.nodeFree[n]
	if old == v {
		return
	}
	s.nodeFree[n] = v
	st := &s.fl[ni.flavor]
	st.cnt[old]--
	st.cnt[v]++
	w, b := ni.pos/64, uint(ni.pos%64)
	st.bits[old][w] &^= 1 << b
	st.bits[v][w] |= 1 << b
	d := int(v - old)
	st.free += d
	s.rackCnt[ni.rack][old]--
	s.rackCnt[ni.rack][v]++
	s.blockCnt[ni.block][old]--
	s.blockCnt[ni.block][v]++
	s.rackFree[ni.rack] += d
	s.blockFree[ni.block] += d
	if old >= v {
		return
	}
	if t := s.ix.flavors[ni.flavor].rises; t != nil {
		for b := t[int(old)*(len(st.cnt))+int(v)]; b != 0; b &= b - 1 {
			st.rise[bits.TrailingZeros64(b)]++
		}
		return
	}
	for m := int32(1); m <= v; m++ {
		if v/m > old/m {
			st.rise[m]++
		}
	}
}

// riseMasks tabulates setFree's rise step for free counts 0..maxGPUs
// (nil for more than 63): entry old·(maxGPUs+1)+v, old < v, has bit m
// set when v/m > old/m, 1 ≤ m ≤ v, i.e. when rise[m] moves.
func riseMasks(maxGPUs int) []uint64 {
	if maxGPUs > 63 {
		return nil
	}
	n := maxGPUs + 1
	t := make([]uint64, n*n)
	for old := range n {
		for v := old + 1; v < n; v++ {
			for m := 1; m <= v; m++ {
				if v/m > old/m {
					t[old*n+v] |= 1 << m
				}
			}
		}
	}
	return t
}

func (s *Snapshot) mixPending(slot int32, delta int32) {
	for _, c := range s.classes[s.ws[slot].cls].cands {
		st := &s.fl[c.f]
		st.mix[c.per] += delta
		st.dirty = true
	}
}

func (s *Snapshot) mixAdmitted(slot int32, delta int32) {
	x := &s.ws[slot]
	st := &s.fl[x.fl]
	st.mix[x.per] += delta
	st.dirty = true
}
