package allocator

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

// stage returns how far gpus GPUs of queue q get on candidate c.
func (s *Snapshot) stage(q, gpus int, topo Level, c cand) int {
	f := int(c.f)
	switch {
	case gpus > s.ownLimit(q, f):
		return stageQuota
	case gpus > s.available(q, f):
		return stageCohort
	case gpus > s.fl[f].free:
		return stageCapacity
	case !s.feasible(c, LevelNone):
		return stageFragmentation
	case topo != LevelNone && !s.feasible(c, topo):
		return stageTopology
	}
	return stageFits
}

// closest returns the furthest stage over the candidates (the first
// candidate on ties).
func (s *Snapshot) closest(q, gpus int, topo Level, cands []cand) int {
	best := -1
	for _, c := range cands {
		if st := s.stage(q, gpus, topo, c); st > best {
			best = st
			if st == stageFits {
				break
			}
		}
	}
	return best
}

// Fit reports whether w could be admitted now, alone, without
// preemption. On success the Reason is ReasonNone and the Admission is
// the one Schedule would give it (first fitting flavor, fragmentation-aware
// placement, At = Now). Otherwise the Reason is the category Diagnose
// would report. w need not be in s; its Admission is ignored. An invalid w
// gets ReasonQuota for an unknown queue or flavor, ReasonCapacity for a
// size no flavor can run. s is not changed.
func (s *Snapshot) Fit(w Workload) (Admission, Reason) {
	w.Admission = nil
	q, _, cands, err := s.resolve(&w)
	if err != nil {
		if _, ok := s.ix.queueIdx[w.Queue]; !ok || (w.Flavor != "" && !s.queueHasFlavor(w.Queue, w.Flavor)) {
			return Admission{}, ReasonQuota
		}
		return Admission{}, ReasonCapacity
	}
	if c, nodes, ok := s.fitClass(cands, w.GPUs, q, w.Topology, w.ID); ok {
		return *s.newAdmission(int(c.f), nodes), ReasonNone
	}
	st := s.closest(q, w.GPUs, w.Topology, cands)
	if st == stageFits { // cannot happen: fitClass would have placed it
		st = stageTopology
	}
	return Admission{}, stageReasons[st]
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
	x := &s.ws[slot]
	return stageReasons[s.closest(int(x.q), x.w.GPUs, x.w.Topology, s.classes[x.cls].cands)]
}
