package allocator

import "slices"

// A window keeps a sorted list of slots and their keys in the middle of
// larger arrays, with room on both sides, so that an insertion or a
// removal moves the shorter side of the list rather than always its
// tail. The admitted lists need it: a new admission is the most recent
// of its priority and goes near the front of the victim order, and the
// workloads that end are anywhere, so with a plain slice every change
// moved half a list or more (BENCHMARKS.md, issue 12, "two-sided
// admitted lists"). The live part is slots[off:off+n]; readers use the
// views the admitted list keeps of it.
type window struct {
	slots  []int32 // len == cap; the live part is [off, off+n)
	keys   []admKey
	off, n int
}

// clone is a deep copy of w, laid out as w is.
func (w *window) clone() window {
	return window{slots: slices.Clone(w.slots), keys: slices.Clone(w.keys), off: w.off, n: w.n}
}

// views are the live parts of the arrays.
func (w *window) views() ([]int32, []admKey) {
	return w.slots[w.off : w.off+w.n : w.off+w.n], w.keys[w.off : w.off+w.n : w.off+w.n]
}

// insert puts slot, with key k, at position i of the live part.
func (w *window) insert(i int, slot int32, k admKey) {
	front := i < w.n-i
	switch {
	case front && w.off == 0:
		front = false
	case !front && w.off+w.n == len(w.slots):
		front = true
	}
	if (front && w.off == 0) || (!front && w.off+w.n == len(w.slots)) {
		s, ks := w.views()
		w.grow(i, slot, k, s, ks)
		return
	}
	o := w.off
	if front {
		copy(w.slots[o-1:], w.slots[o:o+i])
		copy(w.keys[o-1:], w.keys[o:o+i])
		w.off--
	} else {
		copy(w.slots[o+i+1:], w.slots[o+i:o+w.n])
		copy(w.keys[o+i+1:], w.keys[o+i:o+w.n])
	}
	w.slots[w.off+i], w.keys[w.off+i] = slot, k
	w.n++
}

// remove takes out position i of the live part.
func (w *window) remove(i int) {
	o := w.off
	if i < w.n-1-i {
		copy(w.slots[o+1:], w.slots[o:o+i])
		copy(w.keys[o+1:], w.keys[o:o+i])
		w.off++
	} else {
		copy(w.slots[o+i:], w.slots[o+i+1:o+w.n])
		copy(w.keys[o+i:], w.keys[o+i+1:o+w.n])
	}
	w.n--
}

// grow moves the live part, s and ks, with slot and k inserted at i,
// into new arrays of twice the size plus some, centred so that both
// sides have room.
func (w *window) grow(i int, slot int32, k admKey, s []int32, ks []admKey) {
	n := len(s) + 1
	size := 2*n + 8
	slots, keys := make([]int32, size), make([]admKey, size)
	off := (size - n) / 2
	copy(slots[off:], s[:i])
	copy(keys[off:], ks[:i])
	slots[off+i], keys[off+i] = slot, k
	copy(slots[off+i+1:], s[i:])
	copy(keys[off+i+1:], ks[i:])
	w.slots, w.keys, w.off, w.n = slots, keys, off, n
}
