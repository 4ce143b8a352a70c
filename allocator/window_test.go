package allocator

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWindowMatchesSlice: a window's views stay what slices.Insert and
// slices.Delete make of a plain slice, through growth and through
// changes at both ends, and a clone is independent of its original.
func TestWindowMatchesSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 12))
	var w window
	var want []int32
	var fronts, backs int
	for step := range 5000 {
		if len(want) > 0 && r.IntN(5) < 2 {
			i := r.IntN(len(want))
			off := w.off
			w.remove(i)
			if w.off != off {
				fronts++
			} else {
				backs++
			}
			want = slices.Delete(want, i, i+1)
		} else {
			i := r.IntN(len(want) + 1)
			v := int32(step)
			w.insert(i, v, admKey{prio: v, sec: int64(v)})
			want = slices.Insert(want, i, v)
		}
		slots, keys := w.views()
		if !slices.Equal(slots, want) {
			t.Fatalf("step %d: window holds %v, want %v", step, slots, want)
		}
		for i, k := range keys {
			if k.prio != slots[i] || k.sec != int64(slots[i]) {
				t.Fatalf("step %d: key %d is %v for slot %d", step, i, k, slots[i])
			}
		}
		if cap(slots) != len(slots) {
			t.Fatalf("step %d: a view has room to append into the window", step)
		}
	}
	if fronts == 0 || backs == 0 {
		t.Errorf("removals moved the front %d times and the back %d times; want both sides used", fronts, backs)
	}
	c := w.clone()
	w.insert(0, -1, admKey{})
	w.remove(w.n - 1)
	if got, _ := c.views(); !slices.Equal(got, want) {
		t.Errorf("the clone changed with its original: %v, want %v", got, want)
	}
}

// TestWindowMovesTheShorterSide: an insertion near the front of a long
// list moves only the elements before it.
func TestWindowMovesTheShorterSide(t *testing.T) {
	var w window
	for i := range 100 {
		w.insert(w.n, int32(i), admKey{})
	}
	off := w.off
	w.insert(1, 1000, admKey{})
	if w.off != off-1 {
		t.Errorf("insert at 1 of 100: offset %d → %d, want the front moved by one", off, w.off)
	}
	w.remove(w.n - 2)
	if w.off != off-1 {
		t.Errorf("remove near the end: offset moved to %d", w.off)
	}
	slots, _ := w.views()
	if slots[1] != 1000 || slots[0] != 0 || len(slots) != 100 || slots[99] != 99 || slots[98] != 97 {
		t.Errorf("after the changes: %v", slots)
	}
}
