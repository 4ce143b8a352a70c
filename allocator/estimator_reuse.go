package allocator

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
)

// lastRun is what the Estimator's last full computation leaves for a
// rebuild: its pending order (slots of the snapshot it was given), their
// estimates and candidate-flavor sets in that order, both simulations'
// starts by slot, and the queues' shares and the time it was made at.
type lastRun struct {
	order     []int32
	list      []Estimate
	sets      flavorSets
	low, high []simStart
	shares    []float64
	now       time.Time
	// For ForNew: the key of the state computed, that of the state both
	// simulations reached after their first step (if nextOK), and the
	// simulations' trajectories.
	key, next uint64
	nextOK    bool
	traj      [2]*trajectory
}

// maxUncounted is how many admitted workloads a rebuild takes out of the
// counts of higher priority one by one, at O(n) each; beyond, it counts
// them again in O(n log n).
// (A variable for the tests.)
var maxUncounted = 32

// rebuild computes the estimates of s's pending workloads, s being in
// the state the last simulations reached after their first step, from
// what the last computation left (e.last): false if s is not in that
// state after all (a workload pending in s was not in the last order).
// Without a preemption in the first step, every workload pending after
// it was a target, and its simulated starts are kept; only what depends
// on which workloads wait and on the queues' shares is made again:
//
//   - The order. The first step admits and changes nothing else that
//     orders the pending workloads but the queues' shares (the entry
//     penalty). With the same shares, the order is the last one without
//     the admitted workloads; with others, see mergeByShare.
//   - The counts ahead, over the new order, from the last order's
//     candidate-flavor sets (the same workloads on the same cluster).
//     Those of higher priority that arrived later do not depend on the
//     order within a priority (all of a higher priority go first): the
//     last ones minus the admitted workloads among them; after many
//     admissions, they are counted again. (Under FirstComeFirstServed,
//     where priorities do not order, none ahead arrived later: they are
//     0, before and after.)
//   - The reasons, diagnosed again (the free capacity changed).
//
// Known, Earliest and Latest come from the last estimates but when the
// shares changed and work arrives (the arrivals that go first depend on
// the shares): they are made again from the kept starts then.
func (e *Estimator) rebuild(s *Snapshot, opts EstimateOptions) (map[string]Estimate, bool) {
	l := &e.last
	if !s.now.Equal(l.now) || len(l.shares) != len(s.ix.queues) {
		return nil, false
	}
	// The slots in s of the last order's workloads that still wait
	// (kept, and pos their places in the last order), and of those
	// admitted since (gone, goneAt).
	n := len(l.order)
	kept, pos := make([]int32, 0, n), make([]int32, 0, n)
	var gone, goneAt []int32
	for i, old := range l.order {
		id := l.list[i].ID
		slot := old
		if int(slot) >= len(s.ws) || !s.ws[slot].live || s.ws[slot].w.ID != id {
			var ok bool
			if slot, ok = s.byID[id]; !ok {
				return nil, false
			}
		}
		if s.ws[slot].fl >= 0 {
			gone, goneAt = append(gone, slot), append(goneAt, int32(i))
			continue
		}
		kept, pos = append(kept, slot), append(pos, int32(i))
	}
	if len(kept) != s.pendingCount() {
		return nil, false
	}

	shares := s.shares()
	same := true
	for q, sh := range shares {
		if math.IsNaN(sh) {
			return nil, false
		}
		same = same && sh == l.shares[q]
	}
	order := kept
	if !same {
		order, pos = s.mergeByShare(kept, pos, shares)
	}

	m := len(order)
	nsets := len(l.sets.overlap)
	ahead, higher := make([]int, m), make([]int, m)
	count := make([]int, nsets)
	for k, p := range pos {
		d := l.sets.set[p]
		for _, o := range l.sets.overlap[d] {
			ahead[k] += count[o]
		}
		count[d]++
	}
	if len(gone) <= maxUncounted {
		shared := make([]bool, nsets*nsets)
		for a, ov := range l.sets.overlap {
			for _, b := range ov {
				shared[a*nsets+int(b)] = true
			}
		}
		type admitted struct {
			prio    int32
			set     int
			created time.Time
		}
		adm := make([]admitted, len(gone))
		for g, slot := range gone {
			w := &s.ws[slot].w
			adm[g] = admitted{w.Priority, int(l.sets.set[goneAt[g]]) * nsets, w.Created}
		}
		for k, p := range pos {
			h := l.list[p].AheadHigherPriority
			if h > 0 {
				x, d := &s.ws[order[k]].w, int(l.sets.set[p])
				for _, y := range adm {
					if y.prio > x.Priority && shared[y.set+d] && y.created.After(x.Created) {
						h--
					}
				}
			}
			higher[k] = h
		}
	} else {
		fs := flavorSets{set: make([]int32, m), overlap: l.sets.overlap}
		for k, p := range pos {
			fs.set[k] = l.sets.set[p]
		}
		_, higher = s.aheadCounts(order, &fs)
	}
	reasons := s.reasonsOf(order)

	out := make(map[string]Estimate, m)
	again := !same && len(opts.Arrivals) > 0
	end := s.now.Add(horizon(opts))
	for k, p := range pos {
		var est Estimate
		if again {
			old := l.order[p]
			est = s.estimate(order[k], l.low[old], l.high[old], end, ahead[k], higher[k], reasons[k], opts.Arrivals)
		} else {
			est = l.list[p]
			est.setCounts(ahead[k], higher[k], reasons[k])
		}
		out[est.ID] = est
	}
	return out, true
}

// mergeByShare returns s's pending order, the slots kept in the order
// they had when the queues' shares were other ones, which is the
// admission order but for the shares (pos goes along: the places the
// kept had, in the new order). Within a priority, that order keeps each
// queue's workloads in the order of Created and ID, which the new one
// keeps too (they share their queue's share); so each priority's
// workloads come queue by queue in the order of the new shares, those of
// queues of equal shares merged by Created and ID.
func (s *Snapshot) mergeByShare(kept, pos []int32, shares []float64) (order, opos []int32) {
	order, opos = make([]int32, 0, len(kept)), make([]int32, 0, len(kept))
	runs := make([][]int32, len(shares)) // per queue: indexes into kept
	var qs []int32                       // the queues of a priority
	var heads []int                      // per queue of a merge: next of its run
	before := func(i, j int32) bool {
		x, y := &s.ws[kept[i]], &s.ws[kept[j]]
		if c := cmpCreated(x, y); c != 0 {
			return c < 0
		}
		return strings.Compare(x.w.ID, y.w.ID) < 0
	}
	for a := 0; a < len(kept); {
		prio := s.oprio(&s.ws[kept[a]].w)
		b := a
		for ; b < len(kept) && s.oprio(&s.ws[kept[b]].w) == prio; b++ {
			q := s.ws[kept[b]].q
			if len(runs[q]) == 0 {
				qs = append(qs, q)
			}
			runs[q] = append(runs[q], int32(b))
		}
		slices.SortFunc(qs, func(x, y int32) int { return cmp.Compare(shares[x], shares[y]) })
		for i := 0; i < len(qs); {
			j := i + 1
			for j < len(qs) && shares[qs[j]] == shares[qs[i]] {
				j++
			}
			heads = heads[:0]
			for range qs[i:j] {
				heads = append(heads, 0)
			}
			for {
				best := -1
				for h, q := range qs[i:j] {
					if heads[h] < len(runs[q]) && (best < 0 || before(runs[q][heads[h]], runs[qs[i+best]][heads[best]])) {
						best = h
					}
				}
				if best < 0 {
					break
				}
				next := runs[qs[i+best]][heads[best]]
				heads[best]++
				order, opos = append(order, kept[next]), append(opos, pos[next])
			}
			i = j
		}
		for _, q := range qs {
			runs[q] = runs[q][:0]
		}
		qs = qs[:0]
		a = b
	}
	return order, opos
}
