package allocator

import (
	"cmp"
)

// The GPU-only engine's class heaps (schedule.go): per queue, its live
// classes ordered by their heads' recorded keys.

// refreshHead records class c's head's key, before c takes a new place
// in its heap: a class's head changes only while it is out of its heap
// or at its top (a victim goes back to its class after the cycle, one
// head a cycle, or before the heaps are rebuilt, after a release).
func (s *Snapshot) refreshHead(cy *cycleState, c int32) {
	slot := s.head(cy, c)
	x := &s.ws[slot]
	cy.hk[c] = headKey{prio: s.oprio(&x.w), crNs: x.crNs, crSec: x.crSec, slot: slot}
}

// headKeyCmp is cmpKey of the heads recorded as a and b, whose queues'
// shares are sa and sb; the heads' IDs are read only on a tie.
func (s *Snapshot) headKeyCmp(a *headKey, sa float64, b *headKey, sb float64) int {
	if a.prio != b.prio {
		return cmp.Compare(b.prio, a.prio)
	}
	if sa != sb {
		return cmp.Compare(sa, sb)
	}
	if a.crSec != b.crSec {
		return cmp.Compare(a.crSec, b.crSec)
	}
	if a.crNs != b.crNs {
		return cmp.Compare(a.crNs, b.crNs)
	}
	return s.idCmp(a.slot, b.slot)
}

// headLess is staticCmp(head of a, head of b) < 0 on the recorded keys.
func (s *Snapshot) headLess(cy *cycleState, a, b int32) bool {
	ka, kb := &cy.hk[a], &cy.hk[b]
	if ka.prio != kb.prio {
		return ka.prio > kb.prio
	}
	if ka.crSec != kb.crSec {
		return ka.crSec < kb.crSec
	}
	if ka.crNs != kb.crNs {
		return ka.crNs < kb.crNs
	}
	if s.idOrder {
		return ka.slot < kb.slot
	}
	return s.ws[ka.slot].w.ID < s.ws[kb.slot].w.ID
}

func (s *Snapshot) siftDown(cy *cycleState, h []int32, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && s.headLess(cy, h[r], h[l]) {
			m = r
		}
		if !s.headLess(cy, h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (s *Snapshot) pushClass(cy *cycleState, c int32) {
	q := s.classes[c].key.q
	s.refreshHead(cy, c)
	h := append(cy.heaps[q], c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.headLess(cy, h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	cy.heaps[q] = h
}

// popClass removes queue q's top class from its heap. The last class
// takes the top's place the bottom-up way (it mostly belongs near the
// bottom): the hole goes down along the lesser children to a leaf, one
// comparison a level, and the class then rises from there.
func (s *Snapshot) popClass(cy *cycleState, q int) int32 {
	h := cy.heaps[q]
	c := h[0]
	last := len(h) - 1
	x := h[last]
	h = h[:last]
	cy.heaps[q] = h
	if last == 0 {
		return c
	}
	j := 0
	for {
		l := 2*j + 1
		if l >= last {
			break
		}
		m := l
		if r := l + 1; r < last && s.headLess(cy, h[r], h[l]) {
			m = r
		}
		h[j] = h[m]
		j = m
	}
	for j > 0 {
		p := (j - 1) / 2
		if !s.headLess(cy, x, h[p]) {
			break
		}
		h[j] = h[p]
		j = p
	}
	h[j] = x
	return c
}

// fixTop restores queue q's heap after its top class's head was tried:
// the class goes down to its new head's place, or out if it is dropped
// or has no untried members left.
func (s *Snapshot) fixTop(cy *cycleState, q int) {
	h := cy.heaps[q]
	c := h[0]
	if cy.dropped[c] || int(cy.cursor[c]) >= len(s.classes[c].members) {
		s.popClass(cy, q)
		return
	}
	s.refreshHead(cy, c)
	s.siftDown(cy, h, 0)
}

func (s *Snapshot) requeueClass(cy *cycleState, c int32) {
	if !cy.dropped[c] && int(cy.cursor[c]) < len(s.classes[c].members) {
		s.pushClass(cy, c)
	}
}
