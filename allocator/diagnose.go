package allocator

import "math"

// Stages of the checks a pending workload goes through on one flavor, in
// order; the first that fails gives the Reason.
const (
	stageQuota         = iota // own limit: N+B−u (or N−u without a cohort)
	stageCohort               // the cohort's pool P−C
	stageCapacity             // free GPUs of the flavor
	stageFragmentation        // a placement ignoring topology
	stageTopology             // a placement with the topology requirement
	stageFits
)

var stageReasons = [...]Reason{
	stageQuota:         ReasonQuota,
	stageCohort:        ReasonCohort,
	stageCapacity:      ReasonCapacity,
	stageFragmentation: ReasonFragmentation,
	stageTopology:      ReasonTopology,
	stageFits:          ReasonPriority,
}

// stage returns how far workload w of queue q gets on candidate c, and
// the resource that stops it there (GPUs for the stages past capacity).
// Each resource w asks for is checked at each stage, GPUs first.
func (s *Snapshot) stage(q int, w *Workload, c cand) (int, Resource) {
	f := int(c.f)
	req := reqOf(w)
	if !s.ix.coversAll(q, f, req) {
		for r := ResourceCPU; r < numResources; r++ {
			if req[r] > 0 && !s.ix.tree.nodes[q].has[fr(f, r)] {
				return stageQuota, r
			}
		}
	}
	for r := range numResources {
		if req[r] > 0 && req[r] > s.ownLimitRes(q, f, r) {
			return stageQuota, r
		}
	}
	for r := range numResources {
		if req[r] > 0 && req[r] > s.availableRes(q, f, r) {
			return stageCohort, r
		}
	}
	if w.GPUs > s.fl[f].free {
		return stageCapacity, ResourceGPU
	}
	if per := req.perPod(c.pods); s.needsRes(per) {
		for _, r := range []Resource{ResourceCPU, ResourceMemory} {
			if req[r] > 0 && req[r] > s.freeRes(f, r) {
				return stageCapacity, r
			}
		}
		if !s.feasibleRes(c, LevelNone, per) {
			if !s.feasible(c, LevelNone) {
				return stageFragmentation, ResourceGPU
			}
			return stageFragmentation, s.scarcer(f, per)
		}
	} else if !s.feasible(c, LevelNone) {
		return stageFragmentation, ResourceGPU
	}
	if w.Topology != LevelNone && !s.feasibleFor(c, w, w.Topology) {
		return stageTopology, ResourceGPU
	}
	return stageFits, ResourceGPU
}

// closest returns the furthest stage over the candidates (the first
// candidate on ties), and its resource.
func (s *Snapshot) closest(q int, w *Workload, cands []cand) (int, Resource) {
	best, res := -1, ResourceGPU
	for _, c := range cands {
		if st, r := s.stage(q, w, c); st > best {
			best, res = st, r
			if st == stageFits {
				break
			}
		}
	}
	return best, res
}

// ownLimitRes is ownLimit for any resource: N+B−u with a borrowing
// limit, N−u without a cohort, otherwise unlimited.
func (s *Snapshot) ownLimitRes(q, f int, r Resource) int64 {
	if s.ix.simple {
		if r != ResourceGPU {
			return math.MaxInt64
		}
		return int64(s.ownLimit(q, f))
	}
	nd := &s.ix.tree.nodes[q]
	i := fr(f, r)
	switch {
	case !nd.has[i]:
		return 0
	case nd.parent < 0:
		return nd.nominal[i] - s.tuse[q][i]
	case nd.borrowSet[i]:
		return nd.nominal[i] + nd.borrow[i] - s.tuse[q][i]
	}
	return math.MaxInt64
}

// availableRes is available for any resource.
func (s *Snapshot) availableRes(q, f int, r Resource) int64 {
	if s.ix.simple {
		if r != ResourceGPU {
			return math.MaxInt64
		}
		return int64(s.available(q, f))
	}
	return s.tAvailable(q, fr(f, r))
}

// freeRes is the free CPU or memory of flavor f's nodes that count it
// (unlimited when none does).
func (s *Snapshot) freeRes(f int, r Resource) int64 {
	total, counted := int64(0), false
	for _, n := range s.ix.flavors[f].nodes {
		ni := &s.ix.nodes[n]
		switch {
		case r == ResourceCPU && ni.cpu > 0:
			total, counted = total+max(0, s.nodeCPU[n]), true
		case r == ResourceMemory && ni.mem > 0:
			total, counted = total+max(0, s.nodeMem[n]), true
		}
	}
	if !counted {
		return math.MaxInt64
	}
	return total
}

// scarcer names the resource that runs out first on flavor f's nodes for
// pods of per: the one that leaves the fewest pods.
func (s *Snapshot) scarcer(f int, per resVec) Resource {
	var pods [numResources]int
	for _, n := range s.ix.flavors[f].nodes {
		ni := &s.ix.nodes[n]
		pods[ResourceGPU] += int(s.nodeFree[n]) / int(per[ResourceGPU])
		c, m := math.MaxInt, math.MaxInt
		if ni.cpu > 0 && per[ResourceCPU] > 0 {
			c = int(max(0, s.nodeCPU[n]) / per[ResourceCPU])
		}
		if ni.mem > 0 && per[ResourceMemory] > 0 {
			m = int(max(0, s.nodeMem[n]) / per[ResourceMemory])
		}
		pods[ResourceCPU] = satAdd(pods[ResourceCPU], c)
		pods[ResourceMemory] = satAdd(pods[ResourceMemory], m)
	}
	best := ResourceGPU
	for r := range numResources {
		if pods[r] < pods[best] {
			best = r
		}
	}
	return best
}

func satAdd(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// Fit reports whether w could be admitted now, alone, without
// preemption. On success the Reason is ReasonNone and the Admission is
// the one Schedule would give it (first fitting flavor, fragmentation-aware
// placement, At = Now). Otherwise the Reason is the category Diagnose
// would report. w need not be in s; its Admission is ignored. An invalid w
// gets ReasonQuota for an unknown queue or flavor, ReasonCapacity for a
// size no flavor can run. s is not changed.
func (s *Snapshot) Fit(w Workload) (Admission, Reason) {
	a, r, _ := s.FitResource(w)
	return a, r
}

// FitResource is Fit, also naming the resource that stops w (for
// ReasonQuota, ReasonCohort, ReasonCapacity and ReasonFragmentation:
// CPU or memory when it is theirs, else GPUs).
func (s *Snapshot) FitResource(w Workload) (Admission, Reason, Resource) {
	w.Admission = nil
	q, _, cands, err := s.resolve(&w)
	if err != nil {
		if _, ok := s.ix.queueIdx[w.Queue]; !ok || (w.Flavor != "" && !s.queueHasFlavor(w.Queue, w.Flavor)) {
			return Admission{}, ReasonQuota, ResourceGPU
		}
		return Admission{}, ReasonCapacity, ResourceGPU
	}
	if c, nodes, ok := s.fitAny(q, &w, cands); ok {
		return *s.newAdmission(int(c.f), nodes), ReasonNone, ResourceGPU
	}
	st, res := s.closest(q, &w, cands)
	if st == stageFits { // cannot happen: fitAny would have placed it
		st = stageTopology
	}
	return Admission{}, stageReasons[st], res
}

// fitAny is the flavor a workload of queue q would be admitted on now,
// alone, without preemption, and its nodes: for a simple cluster the
// first flavor where it fits by quota and on nodes; otherwise the first
// that the queue's flavor search (its flavorFungibility) takes among
// those where it fits by quota, if it fits there on nodes, else the next.
func (s *Snapshot) fitAny(q int, w *Workload, cands []cand) (cand, []int32, bool) {
	if s.ix.simple {
		return s.fitClass(cands, w.GPUs, q, w.Topology, w.ID)
	}
	qi := &s.ix.queues[q]
	req := reqOf(w)
	for from := 0; from < len(cands); {
		best, bestM, last := -1, worstMode, len(cands)-1
		for i := from; i < len(cands); i++ {
			c := cands[i]
			if c.never || !s.quotaFits(q, int(c.f), req) {
				continue
			}
			m := gmode{pm: pmFit}
			for r, v := range req {
				if v > 0 {
					b, _ := s.lowestSubtreeThatFits(q, fr(int(c.f), Resource(r)), v)
					m.borrow = max(m.borrow, b)
				}
			}
			if !qi.tryNext(m) {
				best, bestM, last = i, m, i
				break
			}
			if qi.preferred(m, bestM) {
				best, bestM = i, m
			}
		}
		if best < 0 {
			break
		}
		if nodes := s.placeFor(cands[best], w); nodes != nil {
			return cands[best], nodes, true
		}
		from = max(last, best) + 1
	}
	return cand{}, nil, false
}

func (s *Snapshot) queueHasFlavor(queue, flavor string) bool {
	q := s.ix.queueIdx[queue]
	f, ok := s.ix.flavorIdx[flavor]
	return ok && s.ix.queues[q].quota[f].has
}

// Diagnose says why the pending workload id is not admitted now. Each of
// its flavors is checked in turn for quota (the queue's own limit), cohort
// (the shared pool), capacity (free GPUs), fragmentation (no placement even
// ignoring topology) and topology (no placement within one host, rack or
// block); the reason of the flavor that gets furthest is reported. If it
// would fit now, alone, it is only waiting for work ahead of it in the
// cycle: ReasonPriority. Unknown or admitted workloads get ReasonNone.
// ReasonApproval is never produced here.
func (s *Snapshot) Diagnose(id string) Reason {
	slot, ok := s.byID[id]
	if !ok || s.ws[slot].fl >= 0 {
		return ReasonNone
	}
	return s.diagnoseSlot(slot)
}

func (s *Snapshot) diagnoseSlot(slot int32) Reason {
	r, _ := s.diagnoseRes(slot)
	return r
}

func (s *Snapshot) diagnoseRes(slot int32) (Reason, Resource) {
	x := &s.ws[slot]
	st, res := s.closest(int(x.q), &x.w, s.classes[x.cls].cands)
	return stageReasons[st], res
}

// DiagnoseResource is Diagnose, also naming the resource that stops the
// workload (see FitResource).
func (s *Snapshot) DiagnoseResource(id string) (Reason, Resource) {
	slot, ok := s.byID[id]
	if !ok || s.ws[slot].fl >= 0 {
		return ReasonNone, ResourceGPU
	}
	return s.diagnoseRes(slot)
}

// ResourceUse returns what queue uses of resource r on flavor and its
// nominal quota there; covered is false when the queue has no quota of r
// on flavor (or no such queue or flavor).
func (s *Snapshot) ResourceUse(queue, flavor string, r Resource) (used, nominal int64, covered bool) {
	q, ok := s.ix.queueIdx[queue]
	f, okF := s.ix.flavorIdx[flavor]
	if !ok || !okF || r < 0 || r >= numResources || !s.ix.queues[q].quota[f].has {
		return 0, 0, false
	}
	if r == ResourceGPU {
		return int64(s.used[q][f]), int64(s.ix.queues[q].quota[f].nominal), true
	}
	i := fr(f, r)
	nd := &s.ix.tree.nodes[q]
	if !nd.has[i] || s.tuse == nil {
		return 0, 0, false
	}
	return s.tuse[q][i], nd.nominal[i], true
}

// FreeResource returns the free CPU or memory of flavor's nodes that
// count it; counted is false when none does.
func (s *Snapshot) FreeResource(flavor string, r Resource) (free int64, counted bool) {
	f, ok := s.ix.flavorIdx[flavor]
	if !ok || (r != ResourceCPU && r != ResourceMemory) || s.nodeCPU == nil {
		return 0, false
	}
	v := s.freeRes(f, r)
	return v, v != math.MaxInt64
}
