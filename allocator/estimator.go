package allocator

import (
	"encoding/binary"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"time"
)

// Estimator keeps the last estimates of a cluster's pending workloads
// and recomputes them only when what they depend on changed: the
// snapshot's state (cluster, time, workloads and their admissions,
// usage) or the options. A caller that builds a fresh snapshot for every
// question, as the command service does, gets the same answers as from
// Estimates and EstimateFor, at the cost of a fingerprint of the state
// when nothing changed.
//
// It also keeps the fingerprint of the state both simulations reached
// after their first step (what ends at Now and the admission cycles at
// Now) and every pending workload's simulated starts. When the next
// snapshot is in exactly that state (Kueue admitted what the estimate
// predicted, at the same Now, and nothing else changed), the rest of
// each simulation would run as before, so the estimates are rebuilt from
// the kept starts and the last order, counts and estimates without
// simulating (Reused counts that; see rebuild). Only a first
// step without a preemption counts: after one, the victims are held back
// until the end of that Schedule, so a new Schedule at the same instant
// may act at once, which the continued simulation does only at its next
// end. It is not safe for concurrent use.
type Estimator struct {
	seed maphash.Seed
	key  uint64
	ok   bool
	est  map[string]Estimate
	// next is the state after the first step of both simulations, valid
	// if nextOK (the two reached the same state without preempting);
	// last is what the computation leaves for a rebuild in that state.
	next   uint64
	nextOK bool
	last   lastRun
	// Recomputed counts the full computations so far, Reused the
	// estimates rebuilt from the last simulations' trajectories (for
	// tests and metrics).
	Recomputed, Reused int
	// KeepCheckpoints makes each full computation keep its simulations'
	// checkpoints, for ForNew: on the benchmark cluster about a tenth
	// more time and 40 MB more allocated a computation (BENCHMARKS.md).
	KeepCheckpoints bool
}

// NewEstimator returns an empty Estimator.
func NewEstimator() *Estimator { return &Estimator{seed: maphash.MakeSeed()} }

// Estimates is Estimates(s, opts), from the last result if neither s's
// state nor opts changed since, or from the last simulations if s is in
// the state they reached after their first step. The map is shared: do
// not modify it.
func (e *Estimator) Estimates(s *Snapshot, opts EstimateOptions) map[string]Estimate {
	return e.estimates(s, opts, e.fingerprint(s, opts))
}

func (e *Estimator) estimates(s *Snapshot, opts EstimateOptions, k uint64) map[string]Estimate {
	if e.ok && k == e.key {
		return e.est
	}
	if e.ok && e.nextOK && k == e.next {
		if est, ok := e.rebuild(s, opts); ok {
			e.est, e.key, e.nextOK = est, k, false
			e.Reused++
			return e.est
		}
	}
	fp := func(c *Snapshot) uint64 { return e.fingerprint(c, opts) }
	rec := [2]simRecord{{fp: fp}, {fp: fp}}
	if e.KeepCheckpoints {
		base := s.clone(maps.Clone(s.byID))
		base.lean, base.nLive = true, s.workloadCount()
		rec[0].traj, rec[1].traj = newTrajectory(base), newTrajectory(base)
	}
	p := estimatePrep{wantList: true}
	low, high := s.simulateBoth(opts, nil, &rec, &p)
	e.est, e.key, e.ok = s.estimatesFrom(opts, &p, low, high), k, true
	e.next = rec[0].after
	e.nextOK = len(p.order) > 0 && rec[0].after == rec[1].after && !rec[0].preempted && !rec[1].preempted
	e.last = lastRun{order: p.order, list: p.list, sets: p.sets, low: low, high: high, shares: s.shares(), now: s.now,
		key: k, next: e.next, nextOK: e.nextOK, traj: [2]*trajectory{rec[0].traj, rec[1].traj}}
	e.Recomputed++
	return e.est
}

// For is EstimateFor(s, id, opts): from the last result when s and opts
// are what it was computed for (or the state its simulations reached
// after their first step), else by EstimateFor, which stops once id
// starts (and leaves the last result in place).
func (e *Estimator) For(s *Snapshot, id string, opts EstimateOptions) Estimate {
	if k := e.fingerprint(s, opts); e.ok && (k == e.key || (e.nextOK && k == e.next)) {
		if est, ok := e.estimates(s, opts, k)[id]; ok {
			return est
		}
		return Estimate{ID: id}
	}
	return EstimateFor(s, id, opts)
}

// Forget drops the last result.
func (e *Estimator) Forget() {
	e.ok, e.nextOK, e.est, e.last = false, false, nil, lastRun{}
}

// fingerprint hashes everything estimates depend on. Workloads are
// combined order-independently, so that the same workloads added in
// another order (another slot layout) give the same key.
func (e *Estimator) fingerprint(s *Snapshot, opts EstimateOptions) uint64 {
	return e.fingerprintWithout(s, opts, -1, s.now, s.usage)
}

// fingerprintWithout is fingerprint of s as if the workload in slot skip
// (-1: none) were not there and its time and usage were now and usage.
func (e *Estimator) fingerprintWithout(s *Snapshot, opts EstimateOptions, skip int32, now time.Time, usage []float64) uint64 {
	var h maphash.Hash
	h.SetSeed(e.seed)
	var buf [8]byte
	u64 := func(v uint64) {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	tm := func(t time.Time) { u64(uint64(t.UnixNano())) }
	str := func(v string) { u64(uint64(len(v))); h.WriteString(v) }
	f64 := func(v float64) { u64(math.Float64bits(v)) }

	hashCluster(&h, s.c, u64, str, f64)
	tm(now)
	for _, u := range usage {
		f64(u)
	}
	// Each workload's fields in one buffer, hashed at once.
	sum, n := uint64(0), uint64(0)
	le := binary.LittleEndian
	b := make([]byte, 0, 256)
	for i := range s.ws {
		x := &s.ws[i]
		if !x.live || int32(i) == skip {
			continue
		}
		w := &x.w
		b = le.AppendUint64(b[:0], uint64(w.Priority)<<32|uint64(uint32(w.GPUs)))
		b = le.AppendUint64(b, uint64(w.Created.UnixNano()))
		b = le.AppendUint64(b, uint64(w.Duration))
		b = le.AppendUint64(b, uint64(w.Topology))
		b = le.AppendUint64(b, uint64(w.CPU))
		b = le.AppendUint64(b, uint64(w.Memory))
		for _, v := range [...]string{w.ID, w.Queue, w.Flavor} {
			b = le.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
		if a := w.Admission; a != nil {
			// The flavor and nodes by index (the cluster is hashed):
			// the estimates' own clones keep no node names.
			b = le.AppendUint64(b, uint64(a.At.UnixNano()))
			b = le.AppendUint64(b, uint64(uint32(x.fl))<<32|uint64(uint32(x.per)))
			b = le.AppendUint32(b, uint32(len(x.nodes)))
			for _, nd := range x.nodes {
				b = le.AppendUint32(b, uint32(nd))
			}
		}
		sum += maphash.Bytes(e.seed, b)
		n++
	}
	u64(sum)
	u64(n)

	u64(uint64(opts.Horizon))
	u64(uint64(opts.Step))
	hashRanges(opts.Factors, u64, str, f64)
	hashRanges(opts.Workloads, u64, str, f64)
	u64(uint64(len(opts.Arrivals)))
	for _, a := range opts.Arrivals {
		str(a.Queue)
		u64(uint64(a.Priority))
		str(a.Flavor)
		u64(uint64(a.Size))
		f64(a.GPUs)
		u64(uint64(a.Over))
	}
	return h.Sum64()
}

func hashRanges(m map[string]Range, u64 func(uint64), str func(string), f64 func(float64)) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	u64(uint64(len(keys)))
	for _, k := range keys {
		str(k)
		f64(m[k].Low)
		f64(m[k].High)
	}
}

// hashCluster hashes what of the cluster estimates depend on: flavors,
// nodes, queues with their quotas and preemption, and the policy.
func hashCluster(h *maphash.Hash, c *Cluster, u64 func(uint64), str func(string), f64 func(float64)) {
	u64(uint64(len(c.Flavors)))
	for _, f := range c.Flavors {
		str(f.Name)
		u64(uint64(f.GPUsPerNode))
	}
	u64(uint64(len(c.Nodes)))
	for _, n := range c.Nodes {
		str(n.Name)
		str(n.Flavor)
		u64(uint64(n.GPUs))
		str(n.Block)
		str(n.Rack)
		u64(uint64(n.CPU))
		u64(uint64(n.Memory))
	}
	limit := func(p *int) {
		if p == nil {
			u64(math.MaxUint64)
			return
		}
		u64(uint64(*p))
	}
	limit64 := func(p *int64) {
		if p == nil {
			u64(math.MaxUint64)
			return
		}
		u64(uint64(*p))
	}
	quotas := func(m map[string]Quota) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		u64(uint64(len(keys)))
		for _, k := range keys {
			qu := m[k]
			str(k)
			u64(uint64(qu.Nominal))
			limit(qu.BorrowingLimit)
			limit(qu.LendingLimit)
			for _, rq := range []*ResourceQuota{qu.CPU, qu.Memory} {
				if rq == nil {
					u64(math.MaxUint64)
					continue
				}
				u64(uint64(rq.Nominal))
				limit64(rq.BorrowingLimit)
				limit64(rq.LendingLimit)
			}
		}
	}
	u64(uint64(len(c.Queues)))
	for _, q := range c.Queues {
		str(q.Name)
		str(q.Cohort)
		f64(q.Weight)
		str(q.Preemption.WithinClusterQueue)
		str(q.Preemption.ReclaimWithinCohort)
		str(q.Preemption.BorrowWithinCohort)
		if m := q.Preemption.BorrowWithinCohortMaxPriority; m != nil {
			u64(uint64(*m))
		} else {
			u64(math.MaxUint64)
		}
		str(q.FlavorFungibility.WhenCanBorrow)
		str(q.FlavorFungibility.WhenCanPreempt)
		str(q.FlavorFungibility.Preference)
		u64(uint64(len(q.Flavors)))
		for _, f := range q.Flavors {
			str(f)
		}
		quotas(q.Quotas)
	}
	u64(uint64(len(c.Cohorts)))
	for _, co := range c.Cohorts {
		str(co.Name)
		str(co.Parent)
		f64(co.Weight)
		quotas(co.Quotas)
	}
	p := c.Policy
	if fs := p.FairSharing; fs != nil {
		u64(uint64(len(fs.PreemptionStrategies)) + 1)
		for _, st := range fs.PreemptionStrategies {
			str(st)
		}
	} else {
		u64(0)
	}
	str(string(p.Mode))
	u64(uint64(p.HalfLife))
	u64(uint64(p.EntryPenalty))
	str(string(p.Placement))
	u64(p.Seed)
}
