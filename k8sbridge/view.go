package k8sbridge

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
)

// phase is where a followed workload is, as far as gpubot's requests care.
type phase int

const (
	phaseGone     phase = iota // no Job and no Workload
	phasePending               // waiting for quota (or inactive)
	phaseAdmitted              // admitted by Kueue
	phaseFinished              // finished, or reached its maximum execution time
)

func (p phase) String() string {
	return [...]string{"gone", "pending", "admitted", "finished"}[p]
}

type jobRef struct {
	Namespace, Name string
	job             *batchv1.Job
}

// owned is a workload gpubot follows: the Job labelled with its request
// ID and the Workload Kueue made for it.
type owned struct {
	id    string
	job   *batchv1.Job
	wl    *kueue.Workload
	w     allocator.Workload
	phase phase
	at    time.Time // when it entered phase (admitted or finished)
	// ended says how a finished workload ended when it did not reach its
	// maximum execution time: "its Job completed", "its Job failed: …".
	ended string
	// preemptedBy is the Workload UID named by Kueue's Preempted condition.
	preemptedBy string
	inactive    bool
	// evicted says why Kueue evicted it when no other work preempted it
	// (a spot node gone: NodeFailures); "" otherwise.
	evicted string
}

// view is the cluster as the caches show it, in allocator terms.
type view struct {
	cluster   allocator.Cluster
	workloads []allocator.Workload
	owned     map[string]*owned
	byUID     map[string]string // Workload UID → allocator workload ID
	warnings  []string
	flavors   map[string]*flavorInfo
	cqName    map[string]string // ClusterQueue name → queue name
	cqs       []*kueue.ClusterQueue
	// unmatched describes the GPU nodes no ResourceFlavor selects.
	unmatched []string
	// separate: queues whose CPU or memory quota is in a resource group
	// of its own (other flavors), which the model does not count.
	separate map[string]bool
}

// snapshot builds the allocator's snapshot. Workloads the model cannot
// take as they are (a flavor the queue no longer has, a size that does not
// split into equal pods) are taken without their pin or topology, or left
// out, with a warning.
func (v *view) snapshot(now time.Time) (*allocator.Snapshot, error) {
	s, err := allocator.NewSnapshot(&v.cluster, now, nil, nil)
	if err != nil && len(v.cluster.Cohorts) > 0 {
		// Kueue stops a cohort tree it cannot use (a cycle of parents);
		// model the cohorts without their objects rather than nothing.
		v.warnings = append(v.warnings, fmt.Sprintf("the cohort tree left out of the model: %v", err))
		v.cluster.Cohorts = nil
		s, err = allocator.NewSnapshot(&v.cluster, now, nil, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("k8sbridge: modelling the cluster: %w", err)
	}
	for _, w := range v.workloads {
		if _, err := s.Add(w); err == nil {
			continue
		}
		w.Flavor, w.Topology = "", allocator.LevelNone
		if _, err := s.Add(w); err == nil {
			continue
		}
		// Its admission cannot be modelled (nodes that went away, a
		// reservation the model has no room for): as pending, the work is
		// still there, so that gpubot does not think it vanished.
		a := w.Admission
		w.Admission = nil
		if _, err := s.Add(w); err != nil || a == nil {
			v.warnings = append(v.warnings, fmt.Sprintf("workload %s left out of the model: %v", w.ID, err))
		} else {
			v.warnings = append(v.warnings, fmt.Sprintf("workload %s modelled as pending: its admission on %s does not fit the model", w.ID, a.Flavor))
		}
	}
	return s, nil
}

// view reads the caches. The caller holds b.mu.
func (b *Bridge) view() (*view, error) {
	v := &view{owned: map[string]*owned{}, byUID: map[string]string{}, separate: map[string]bool{}}
	v.cluster.Policy = b.cfg.Policy
	// Kueue's cycle (one head per ClusterQueue, by priority and arrival,
	// or by dominant resource share with its Fair Sharing); Admission
	// Fair Sharing orders only the LocalQueues inside one ClusterQueue
	// (see features.go).
	v.cluster.Policy.Mode = allocator.BestEffortFIFO
	v.cluster.Policy.FairSharing = nil
	if b.mgr.fairSharing {
		v.cluster.Policy.FairSharing = &allocator.KueueFairSharing{PreemptionStrategies: slices.Clone(b.mgr.fsStrategies)}
	}
	cqs, err := b.cqs.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("k8sbridge: listing ClusterQueues: %w", err)
	}
	slices.SortFunc(cqs, func(a, c *kueue.ClusterQueue) int { return strings.Compare(a.Name, c.Name) })
	flavors, err := b.readFlavors(v, gpuFlavors(cqs, corev1.ResourceName(b.cfg.GPUResource)))
	if err != nil {
		return nil, err
	}
	cqName := b.readQueues(v, cqs, flavors)
	b.readCohorts(v, flavors)
	v.flavors, v.cqName, v.cqs = flavors, cqName, cqs
	if err := b.readWorkloads(v, flavors, cqName); err != nil {
		return nil, err
	}
	b.place(v)
	return v, nil
}

// readWorkloads collects Kueue Workloads (all of them: other people's work
// uses quota too), the Jobs gpubot owns, and what gpubot just submitted.
func (b *Bridge) readWorkloads(v *view, flavors map[string]*flavorInfo, cqName map[string]string) error {
	jobs, err := b.jobs.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("k8sbridge: listing Jobs: %w", err)
	}
	jobID := map[string]*batchv1.Job{} // namespace/name → Job
	for _, j := range jobs {
		id := j.Labels[LabelRequest]
		if _, ours := b.cfg.teamOfNamespace(j.Namespace); id == "" || !ours {
			continue // another gpubot's, in namespaces that are not this one's teams'
		}
		jobID[j.Namespace+"/"+j.Name] = j
		v.owned[id] = &owned{id: id, job: j, phase: phasePending}
	}
	wls, err := b.wls.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("k8sbridge: listing Workloads: %w", err)
	}
	slices.SortFunc(wls, func(a, c *kueue.Workload) int {
		return cmp.Or(a.CreationTimestamp.Compare(c.CreationTimestamp.Time), strings.Compare(a.Namespace+"/"+a.Name, c.Namespace+"/"+c.Name))
	})
	for _, wl := range wls {
		var o *owned
		for _, ref := range wl.OwnerReferences {
			if j, ok := jobID[wl.Namespace+"/"+ref.Name]; ok && ref.Kind == "Job" && ref.UID == j.UID {
				o = v.owned[j.Labels[LabelRequest]]
			}
		}
		id := "k8s/" + wl.Namespace + "/" + wl.Name
		if o == nil && wl.Spec.Active != nil && !*wl.Spec.Active {
			// Deactivated: Kueue does not queue it. (A request's own is
			// kept, pending, so that gpubot keeps following it; its
			// KueueWord says it will not start as it is.)
			continue
		}
		if o != nil {
			if o.wl != nil && o.wl.CreationTimestamp.After(wl.CreationTimestamp.Time) {
				continue
			}
			id = o.id
		}
		v.byUID[string(wl.UID)] = id
		w, ph, at, ok := b.workload(v, wl, id, flavors, cqName)
		if o != nil {
			o.wl, o.phase, o.at = wl, ph, at
			if ph == phaseFinished {
				o.ended = workloadEnded(wl)
			}
			o.inactive = wl.Spec.Active != nil && !*wl.Spec.Active
			if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
				o.preemptedBy = preemptorUID(c.Message)
			}
			o.evicted = evictedDetail(wl)
			if ok {
				applyAnnotations(&w, o.job)
				if w.Admission != nil && len(w.Admission.Nodes) == 0 {
					w.Admission.Nodes = b.podNodes(o.job)
				}
				o.w = w
			}
		}
		if ok && ph != phaseFinished {
			v.workloads = append(v.workloads, w)
		}
	}
	for id, o := range v.owned {
		if o.wl != nil {
			continue
		}
		if jobFinished(o.job) {
			o.phase, o.ended = phaseFinished, jobEnded(o.job)
			o.at = o.job.CreationTimestamp.Time
			if o.job.Status.CompletionTime != nil {
				o.at = o.job.Status.CompletionTime.Time
			}
			continue
		}
		w, ok := b.jobWorkload(v, o.job, id, cqName)
		if !ok {
			continue
		}
		o.w = w
		v.workloads = append(v.workloads, w)
	}
	for id, w := range b.recent {
		if _, ok := v.owned[id]; ok {
			delete(b.recent, id)
			continue
		}
		v.owned[id] = &owned{id: id, w: w, phase: phasePending}
		v.workloads = append(v.workloads, w)
	}
	// A workload whose change the sink has not been told about yet is kept
	// as it was told, so that the service does not think it vanished.
	for id, ph := range b.reported {
		if ph != phasePending && ph != phaseAdmitted {
			continue
		}
		o, ok := v.owned[id]
		if ok && o.phase != phaseFinished {
			continue
		}
		if w, ok := b.known[id]; ok && !slices.ContainsFunc(v.workloads, func(x allocator.Workload) bool { return x.ID == id }) {
			v.workloads = append(v.workloads, w)
		}
	}
	return nil
}

// workload converts a Kueue Workload. ok is false for workloads outside
// the model (no GPUs, no known queue).
func (b *Bridge) workload(v *view, wl *kueue.Workload, id string, flavors map[string]*flavorInfo, cqName map[string]string) (w allocator.Workload, ph phase, at time.Time, ok bool) {
	gpu := corev1.ResourceName(b.cfg.GPUResource)
	ph = phasePending
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
		ph, at = phaseFinished, c.LastTransitionTime.Time
	} else if c := maxExecTimeExceeded(wl); c != nil {
		ph, at = phaseFinished, c.LastTransitionTime.Time
	} else if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
		ph, at = phaseAdmitted, c.LastTransitionTime.Time
	}
	cq := ""
	reserved := apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) && wl.Status.Admission != nil
	if reserved {
		cq = string(wl.Status.Admission.ClusterQueue)
	} else if lq, err := b.lqs.LocalQueues(wl.Namespace).Get(string(wl.Spec.QueueName)); err == nil {
		cq = string(lq.Spec.ClusterQueue)
	}
	queue, known := cqName[cq]
	if !known {
		return w, ph, at, false
	}
	gpus, level := 0, allocator.LevelNone
	var cpu, mem int64
	for _, ps := range wl.Spec.PodSets {
		per := podGPUs(&ps.Template.Spec, gpu)
		gpus += per * int(ps.Count)
		c, m := podCPUMemory(&ps.Template.Spec)
		cpu += c * int64(ps.Count)
		mem += m * int64(ps.Count)
		if tr := ps.TopologyRequest; tr != nil && tr.Required != nil {
			level = max(level, levelOf(*tr.Required, flavors, b.cfg))
		}
	}
	if gpus == 0 {
		return w, ph, at, false
	}
	w = allocator.Workload{ID: id, Queue: queue, GPUs: gpus, Topology: level, Created: wl.CreationTimestamp.Time}
	b.setCPUMemory(v, &w, cpu, mem)
	if wl.Spec.Priority != nil {
		w.Priority = *wl.Spec.Priority
	}
	if s := wl.Spec.MaximumExecutionTimeSeconds; s != nil {
		w.Duration = time.Duration(*s) * time.Second
	}
	if (reserved || ph == phaseFinished) && wl.Status.Admission != nil {
		a := &allocator.Admission{}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
			a.At = c.LastTransitionTime.Time
		}
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			if f, ok := psa.Flavors[gpu]; ok && a.Flavor == "" {
				a.Flavor = string(f)
			}
			if ta := psa.TopologyAssignment; ta != nil {
				a.Nodes = append(a.Nodes, tasNodes(ta, flavors[a.Flavor])...)
			}
		}
		if _, ok := flavors[a.Flavor]; ok {
			w.Admission = a
		}
	}
	return w, ph, at, true
}

// jobWorkload models a gpubot Job that Kueue has no Workload for yet.
func (b *Bridge) jobWorkload(v *view, j *batchv1.Job, id string, cqName map[string]string) (allocator.Workload, bool) {
	team, ok := b.cfg.teamOfNamespace(j.Namespace)
	if !ok {
		return allocator.Workload{}, false
	}
	lq, err := b.lqs.LocalQueues(j.Namespace).Get(j.Labels[LabelQueueName])
	if err != nil {
		return allocator.Workload{}, false
	}
	queue, ok := cqName[string(lq.Spec.ClusterQueue)]
	if !ok {
		queue = team.Name
	}
	w := allocator.Workload{ID: id, Queue: queue, Created: j.CreationTimestamp.Time}
	if p, err := b.wpcs.Get(j.Labels[LabelPriorityClass]); err == nil {
		w.Priority = p.Value
	}
	if s, err := strconv.Atoi(j.Labels[LabelMaxExecTime]); err == nil {
		w.Duration = time.Duration(s) * time.Second
	}
	pods := int(ptrOr(j.Spec.Parallelism, 1))
	w.GPUs = pods * podGPUs(&j.Spec.Template.Spec, corev1.ResourceName(b.cfg.GPUResource))
	c, m := podCPUMemory(&j.Spec.Template.Spec)
	b.setCPUMemory(v, &w, c*int64(pods), m*int64(pods))
	applyAnnotations(&w, j)
	return w, w.GPUs > 0
}

// setCPUMemory gives w the CPU and memory its pods ask for, as Kueue
// counts them, unless its ClusterQueue keeps those quotas in a resource
// group of their own (not modelled: see features.go) or Kueue's
// resources.excludeResourcePrefixes leaves them out.
func (b *Bridge) setCPUMemory(v *view, w *allocator.Workload, cpu, mem int64) {
	if v.separate[w.Queue] {
		return
	}
	if !b.mgr.ignoreCPU {
		w.CPU = cpu
	}
	if !b.mgr.ignoreMemory {
		w.Memory = mem
	}
}

// applyAnnotations takes what gpubot asked for from its Job's annotations:
// the pinned flavor, the topology level and the request's creation time.
func applyAnnotations(w *allocator.Workload, j *batchv1.Job) {
	if j == nil {
		return
	}
	a := j.Annotations
	w.Flavor = a[AnnotationFlavor]
	if l, err := allocator.ParseLevel(a[AnnotationTopology]); err == nil && l != allocator.LevelNone {
		w.Topology = l
	}
}

// podNodes lists the nodes of a gpubot Job's live pods, one per pod.
func (b *Bridge) podNodes(j *batchv1.Job) []string {
	pods, err := b.pods.Pods(j.Namespace).List(labels.SelectorFromSet(labels.Set{LabelRequest: j.Labels[LabelRequest]}))
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out = append(out, p.Spec.NodeName)
		}
	}
	slices.Sort(out)
	return out
}

// maxExecTimeExceeded returns the condition saying that Kueue ended the
// workload at its maximum execution time (the requested duration), or nil.
// workloadEnded says how a finished Workload ended: "" when Kueue stopped
// it at its maximum execution time (the request's time was up), else what
// its Job did, from Kueue's Finished condition.
func workloadEnded(wl *kueue.Workload) string {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	switch c.Reason {
	case kueue.WorkloadFinishedReasonSucceeded:
		return "its Job completed"
	case kueue.WorkloadFinishedReasonFailed:
		return "its Job failed" + suffixed(c.Message)
	}
	return "its Job ended" + suffixed(c.Message)
}

// jobEnded is workloadEnded for a finished Job whose Workload is gone.
func jobEnded(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return "its Job completed"
		case batchv1.JobFailed:
			return "its Job failed" + suffixed(cmp.Or(c.Message, c.Reason))
		}
	}
	return ""
}

// suffixed is ": msg" without a final period, or "" for no message.
func suffixed(msg string) string {
	msg = strings.TrimRight(strings.TrimSpace(msg), ".")
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func maxExecTimeExceeded(wl *kueue.Workload) *metav1.Condition {
	for _, typ := range []string{kueue.WorkloadDeactivationTarget, kueue.WorkloadEvicted} {
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue &&
			strings.Contains(c.Reason, kueue.WorkloadMaximumExecutionTimeExceeded) {
			return c
		}
	}
	return nil
}
