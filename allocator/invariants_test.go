package allocator

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// checkInvariants recomputes everything the snapshot maintains
// incrementally from its workloads alone and compares, and checks that no
// node and no queue exceeds its limits.
func checkInvariants(t testing.TB, s *Snapshot) {
	t.Helper()
	ix := s.ix
	nf := len(ix.flavors)
	free := make([]int32, len(ix.nodes))
	for n, ni := range ix.nodes {
		free[n] = int32(ni.gpus)
	}
	used := make([][]int, len(ix.queues))
	for q := range used {
		used[q] = make([]int, nf)
	}
	running := make([]int, len(ix.queues))
	pending := make([]int, len(ix.queues))
	mix := make([][]int32, nf)
	for f := range mix {
		mix[f] = make([]int32, ix.flavors[f].gpn+1)
	}
	members := map[int32][]int32{}
	admitted := map[[2]int][]int32{}
	for id, slot := range s.byID {
		x := &s.ws[slot]
		if !x.live || x.w.ID != id {
			t.Errorf("slot %d: live=%v id=%q, indexed as %q", slot, x.live, x.w.ID, id)
			continue
		}
		q := int(x.q)
		cl := &s.classes[x.cls]
		if cl.key != (classKey{q: x.q, gpus: x.w.GPUs, cpu: x.w.CPU, mem: x.w.Memory, topo: x.w.Topology, pin: cl.key.pin}) {
			t.Errorf("%s: in class %+v", id, cl.key)
		}
		if x.fl < 0 {
			if x.w.Admission != nil {
				t.Errorf("%s: pending with an admission", id)
			}
			pending[q]++
			members[x.cls] = append(members[x.cls], slot)
			for _, c := range cl.cands {
				mix[c.f][c.per]++
			}
			continue
		}
		a := x.w.Admission
		if a == nil || a.Flavor != ix.flavors[x.fl].name || len(a.Nodes) != len(x.nodes) {
			t.Errorf("%s: admission %+v does not match flavor %d nodes %v", id, a, x.fl, x.nodes)
			continue
		}
		var c cand
		for _, k := range cl.cands {
			if k.f == x.fl {
				c = k
			}
		}
		if c.per != x.per || int(c.pods) != len(x.nodes) {
			t.Errorf("%s: %d pods of %d, want %d of %d", id, len(x.nodes), x.per, c.pods, c.per)
		}
		for i, n := range x.nodes {
			if ix.nodes[n].name != a.Nodes[i] || ix.nodes[n].flavor != int(x.fl) {
				t.Errorf("%s: pod %d on %q, indexed node %q", id, i, a.Nodes[i], ix.nodes[n].name)
			}
			free[n] -= x.per
		}
		used[q][x.fl] += x.w.GPUs
		running[q] += x.w.GPUs
		mix[x.fl][x.per]++
		k := [2]int{q, int(x.fl)}
		admitted[k] = append(admitted[k], slot)
	}
	for n, v := range free {
		if v < 0 {
			t.Errorf("node %s over capacity: %d free", ix.nodes[n].name, v)
		}
	}
	if diff := cmpDiff(free, s.nodeFree); diff != "" {
		t.Errorf("node free counts (-recomputed +maintained):\n%s", diff)
	}
	// Buckets.
	for f, fi := range ix.flavors {
		cnt := make([]int32, fi.maxGPUs+1)
		bits := make([][]uint64, fi.maxGPUs+1)
		for v := range bits {
			bits[v] = make([]uint64, fi.words)
		}
		total := 0
		for _, n := range fi.nodes {
			v := free[n]
			cnt[v]++
			p := ix.nodes[n].pos
			bits[v][p/64] |= 1 << (p % 64)
			total += int(v)
		}
		st := &s.fl[f]
		if diff := cmpDiff(cnt, st.cnt); diff != "" {
			t.Errorf("flavor %s buckets:\n%s", fi.name, diff)
		}
		if diff := cmpDiff(bits, st.bits); diff != "" {
			t.Errorf("flavor %s bitsets:\n%s", fi.name, diff)
		}
		if total != st.free {
			t.Errorf("flavor %s free %d, maintained %d", fi.name, total, st.free)
		}
		if diff := cmpDiff(mix[f], st.mix); diff != "" {
			t.Errorf("flavor %s mix:\n%s", fi.name, diff)
		}
	}
	checkDomains(t, "rack", ix.racks, free, s.rackCnt, s.rackFree)
	checkDomains(t, "block", ix.blocks, free, s.blockCnt, s.blockFree)
	// Quota.
	if diff := cmpDiff(used, s.used); diff != "" {
		t.Errorf("queue usage:\n%s", diff)
	}
	if diff := cmpDiff(running, s.running); diff != "" {
		t.Errorf("running GPUs:\n%s", diff)
	}
	if diff := cmpDiff(pending, s.nPending); diff != "" {
		t.Errorf("pending counts:\n%s", diff)
	}
	for co, ci := range ix.cohorts {
		for f := range nf {
			c := 0
			for _, q := range ci.queues {
				c += max(0, used[q][f]-ix.queues[q].quota[f].guaranteed)
			}
			if c != s.cohortC[co][f] {
				t.Errorf("cohort %s flavor %s: use %d, maintained %d", ci.name, ix.flavors[f].name, c, s.cohortC[co][f])
			}
			if ix.simple && c > ci.pool[f] {
				t.Errorf("cohort %s flavor %s: use %d exceeds pool %d", ci.name, ix.flavors[f].name, c, ci.pool[f])
			}
		}
	}
	for q, qi := range ix.queues {
		for _, f := range qi.flavors {
			qt := qi.quota[f]
			switch {
			case qi.cohort < 0 && used[q][f] > qt.nominal:
				t.Errorf("queue %s flavor %s: %d used > nominal %d", qi.name, ix.flavors[f].name, used[q][f], qt.nominal)
			case qi.cohort >= 0 && qt.borrowSet && used[q][f] > qt.nominal+qt.borrow:
				t.Errorf("queue %s flavor %s: %d used > nominal+borrowingLimit %d", qi.name, ix.flavors[f].name, used[q][f], qt.nominal+qt.borrow)
			}
		}
	}
	checkGeneral(t, s)
	checkShadows(t, s)
	// Orders.
	for c := range s.classes {
		want := members[int32(c)]
		slices.SortFunc(want, func(a, b int32) int { return s.staticCmp(&s.ws[a], &s.ws[b]) })
		if diff := cmpDiff(idsOf(s, want), idsOf(s, s.classes[c].members)); diff != "" {
			t.Errorf("class %+v members:\n%s", s.classes[c].key, diff)
		}
	}
	for q := range ix.queues {
		for f := range nf {
			want := admitted[[2]int{q, f}]
			slices.SortFunc(want, func(a, b int32) int { return victimCmp(&s.ws[a], &s.ws[b]) })
			l := s.adm[q][f]
			if diff := cmpDiff(idsOf(s, want), idsOf(s, l.slots)); diff != "" {
				t.Errorf("admitted list %d/%d:\n%s", q, f, diff)
			}
			byCreated := slices.Clone(want)
			slices.SortFunc(byCreated, func(a, b int32) int { return createdCmp(&s.ws[a], &s.ws[b]) })
			if diff := cmpDiff(idsOf(s, byCreated), idsOf(s, l.byCreated)); diff != "" {
				t.Errorf("admitted list by Created %d/%d:\n%s", q, f, diff)
			}
			if len(l.vkeys) != len(l.slots) || len(l.ckeys) != len(l.byCreated) {
				t.Errorf("admitted list %d/%d: %d/%d keys for %d slots", q, f, len(l.vkeys), len(l.ckeys), len(l.slots))
			} else {
				for i, v := range l.slots {
					x := &s.ws[v]
					if k := victimKey(x); l.vkeys[i] != k {
						t.Errorf("admitted list %d/%d: key %d is %v, not %v", q, f, i, l.vkeys[i], k)
					}
				}
				for i, v := range l.byCreated {
					x := &s.ws[v]
					if k := (admKey{prio: x.w.Priority, ns: x.crNs, sec: x.crSec}); l.ckeys[i] != k {
						t.Errorf("admitted list by Created %d/%d: key %d is %v, not %v", q, f, i, l.ckeys[i], k)
					}
				}
			}
			var sums []prioSum
			for _, v := range want {
				w := &s.ws[v].w
				if len(sums) == 0 || sums[len(sums)-1].prio != w.Priority {
					sums = append(sums, prioSum{prio: w.Priority})
				}
				sums[len(sums)-1].gpus += w.GPUs
				sums[len(sums)-1].n++
			}
			if diff := cmpDiff(sums, l.prio, cmp.AllowUnexported(prioSum{})); diff != "" {
				t.Errorf("priority sums %d/%d:\n%s", q, f, diff)
			}
		}
	}
}

// checkGeneral recomputes the general engine's state (the cohort tree's
// usage, the nodes' free CPU and memory) from the admitted workloads and
// checks that no grant exceeds a quota in any resource (every queue's
// available quota is at least zero everywhere in its tree) nor a node's
// CPU or memory.
func checkGeneral(t testing.TB, s *Snapshot) {
	t.Helper()
	ix := s.ix
	if s.tuse != nil {
		want := &Snapshot{ix: ix, tuse: make([][]int64, len(ix.tree.nodes))}
		for n := range want.tuse {
			want.tuse[n] = make([]int64, ix.tree.nfr)
		}
		for _, slot := range s.byID {
			if x := &s.ws[slot]; x.fl >= 0 {
				want.tAddReq(int(x.q), int(x.fl), reqOf(&x.w), 1)
			}
		}
		if diff := cmpDiff(want.tuse, s.tuse); diff != "" {
			t.Errorf("tree usage (-recomputed +maintained):\n%s", diff)
		}
		for q := range ix.queues {
			for i := range ix.tree.nfr {
				if ix.tree.nodes[q].has[i] && s.tAvailable(q, i) < 0 {
					t.Errorf("queue %s: %s of flavor %s over quota (available %d)", ix.queues[q].name,
						frResource(i), ix.flavors[frFlavor(i)].name, s.tAvailable(q, i))
				}
			}
		}
	} else if !ix.simple {
		t.Errorf("a general snapshot without tree usage")
	}
	if s.nodeCPU != nil {
		cpu := make([]int64, len(ix.nodes))
		mem := make([]int64, len(ix.nodes))
		for n, ni := range ix.nodes {
			cpu[n], mem[n] = ni.cpu, ni.mem
		}
		for _, slot := range s.byID {
			x := &s.ws[slot]
			if x.fl < 0 || len(x.nodes) == 0 {
				continue
			}
			per := reqOf(&x.w).perPod(int32(len(x.nodes)))
			for _, n := range x.nodes {
				cpu[n] -= per[ResourceCPU]
				mem[n] -= per[ResourceMemory]
			}
		}
		if diff := cmpDiff(cpu, s.nodeCPU); diff != "" {
			t.Errorf("node free CPU (-recomputed +maintained):\n%s", diff)
		}
		if diff := cmpDiff(mem, s.nodeMem); diff != "" {
			t.Errorf("node free memory (-recomputed +maintained):\n%s", diff)
		}
		for n, ni := range ix.nodes {
			if (ni.cpu > 0 && cpu[n] < 0) || (ni.mem > 0 && mem[n] < 0) {
				t.Errorf("node %s over its CPU or memory: %d millicores, %d bytes free", ni.name, cpu[n], mem[n])
			}
		}
	}
}

func checkDomains(t testing.TB, kind string, doms []domainInfo, free []int32, cnt [][]int32, tot []int) {
	t.Helper()
	for d, di := range doms {
		want := make([]int32, len(cnt[d]))
		sum := 0
		for _, n := range di.nodes {
			want[free[n]]++
			sum += int(free[n])
		}
		if diff := cmpDiff(want, cnt[d]); diff != "" {
			t.Errorf("%s %q buckets:\n%s", kind, di.name, diff)
		}
		if sum != tot[d] {
			t.Errorf("%s %q free %d, maintained %d", kind, di.name, sum, tot[d])
		}
	}
}

func idsOf(s *Snapshot, slots []int32) []string {
	out := make([]string, len(slots))
	for i, v := range slots {
		out[i] = s.ws[v].w.ID
	}
	return out
}

// stateView is everything a snapshot maintains, in a canonical form
// independent of slot numbers, for exact comparisons (undo tests).
type stateView struct {
	Now                 time.Time
	Workloads           []Workload
	NodeFree            []int32
	Buckets             [][]int32
	Bits                [][][]uint64
	Free                []int
	Mix                 [][]int32
	RackCnt, BlockCnt   [][]int32
	RackFree, BlockFree []int
	Used, CohortC       [][]int
	Running, Pending    []int
	Usage               []float64
	TreeUse             [][]int64
	NodeCPU, NodeMem    []int64
	Classes             map[string][]string
	Admitted            map[string][]string
	PrioSums            map[string]string
}

func viewOf(s *Snapshot) stateView {
	v := stateView{
		Now:       s.now,
		Workloads: s.Workloads(),
		NodeFree:  slices.Clone(s.nodeFree),
		RackCnt:   clone2(s.rackCnt),
		BlockCnt:  clone2(s.blockCnt),
		RackFree:  slices.Clone(s.rackFree),
		BlockFree: slices.Clone(s.blockFree),
		Used:      clone2(s.used),
		CohortC:   clone2(s.cohortC),
		Running:   slices.Clone(s.running),
		Pending:   slices.Clone(s.nPending),
		Usage:     slices.Clone(s.usage),
		TreeUse:   clone2(s.tuse),
		NodeCPU:   slices.Clone(s.nodeCPU),
		NodeMem:   slices.Clone(s.nodeMem),
		Classes:   map[string][]string{},
		Admitted:  map[string][]string{},
		PrioSums:  map[string]string{},
	}
	for _, st := range s.fl {
		v.Buckets = append(v.Buckets, slices.Clone(st.cnt))
		v.Bits = append(v.Bits, clone2(st.bits))
		v.Free = append(v.Free, st.free)
		v.Mix = append(v.Mix, slices.Clone(st.mix))
	}
	for _, c := range s.classes {
		if len(c.members) > 0 {
			v.Classes[fmt.Sprintf("%+v", c.key)] = idsOf(s, c.members)
		}
	}
	for q := range s.adm {
		for f, l := range s.adm[q] {
			if len(l.slots) > 0 {
				k := fmt.Sprintf("%d/%d", q, f)
				v.Admitted[k] = idsOf(s, l.slots)
				v.PrioSums[k] = fmt.Sprint(l.prio)
			}
		}
	}
	return v
}

// diff is cmp.Diff with nil and empty equated, with a fast path for the
// common equal case (property tests compare large states many times).
func cmpDiff(want, got any, opts ...cmp.Option) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return cmp.Diff(want, got, append(opts, cmpopts.EquateEmpty())...)
}

// checkShadows recomputes every shadow and compares.
func checkShadows(t testing.TB, s *Snapshot) {
	t.Helper()
	if s.shadows == nil {
		return
	}
	for k, sh := range s.shadows.byKey {
		want := &shadow{key: sh.key, created: sh.created}
		f := int(k.f)
		fi := &s.ix.flavors[f]
		want.cand = make([]int32, len(fi.nodes))
		own := 0
		for v := range s.ws {
			x := &s.ws[v]
			if !x.live || int(x.fl) != f || !s.isCand(sh, int32(v)) {
				continue
			}
			for _, n := range x.nodes {
				want.cand[s.ix.nodes[n].pos] += x.per
			}
			own += x.w.GPUs
		}
		if own != sh.own {
			t.Errorf("shadow %+v: own %d, maintained %d", k, own, sh.own)
		}
		if d := cmpDiff(want.cand, sh.cand); d != "" {
			t.Errorf("shadow %+v candidates:\n%s", k, d)
		}
		cnt := make([]int32, fi.maxGPUs+1)
		for p, n := range fi.nodes {
			cnt[s.nodeFree[n]+want.cand[p]]++
		}
		if d := cmpDiff(cnt, sh.cnt); d != "" {
			t.Errorf("shadow %+v buckets:\n%s", k, d)
		}
	}
}
