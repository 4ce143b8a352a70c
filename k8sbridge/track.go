package k8sbridge

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// Track implements commands.Tracker: it labels the Job namespace/job with
// request ID id, so that gpubot follows it, and describes it. A Job that
// gpubot follows already comes back with its own ID.
func (b *Bridge) Track(ctx context.Context, namespace, job, id, requester string) (commands.Tracked, error) {
	j, err := b.kube.BatchV1().Jobs(namespace).Get(ctx, job, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return commands.Tracked{}, fmt.Errorf("there is no Job %s in namespace %s", job, namespace)
	}
	if err != nil {
		return commands.Tracked{}, fmt.Errorf("reading Job %s/%s: %w", namespace, job, err)
	}
	if have := j.Labels[LabelRequest]; have != "" {
		return commands.Tracked{ID: have}, nil
	}
	team, ok := b.cfg.teamOfNamespace(namespace)
	if !ok {
		var ns []string
		for _, t := range b.cfg.Teams {
			ns = append(ns, t.Namespace)
		}
		return commands.Tracked{}, fmt.Errorf("namespace %s belongs to no gpubot team (teams' namespaces: %s)", namespace, strings.Join(ns, ", "))
	}
	if j.Labels[LabelQueueName] == "" {
		return commands.Tracked{}, fmt.Errorf("Job %s/%s is not queued through Kueue (it has no %s label)", namespace, job, LabelQueueName)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q},"annotations":{%q:%q,%q:%q,%q:"track"}}}`,
		LabelRequest, id, AnnotationRequester, requester, AnnotationTeam, team.Name, AnnotationOrigin)
	j, err = b.kube.BatchV1().Jobs(namespace).Patch(ctx, job, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return commands.Tracked{}, fmt.Errorf("labelling Job %s/%s: %w", namespace, job, err)
	}
	t := commands.Tracked{Requester: requester, Team: team.Name, Origin: "track", Created: j.CreationTimestamp.Time}
	b.mu.Lock()
	defer b.mu.Unlock()
	v, err := b.view()
	if err != nil {
		return t, err
	}
	ref := jobRef{Namespace: namespace, Name: job, job: j}
	var w allocator.Workload
	if wl := b.workloadOfJob(ref); wl != nil {
		if ww, ph, at, ok := b.workload(v, wl, id, v.flavors, v.cqName); ok {
			w = ww
			t.Finished = ph == phaseFinished
			if ph == phaseAdmitted && w.Admission != nil {
				a := *w.Admission
				a.At = at
				t.Admission = &a
			}
			t.Created = wl.CreationTimestamp.Time
		}
	} else if ww, ok := b.jobWorkload(v, j, id, v.cqName); ok {
		w = ww
	}
	if w.GPUs == 0 {
		return t, fmt.Errorf("Job %s/%s requests no %s", namespace, job, b.cfg.GPUResource)
	}
	t.GPUs, t.Duration = w.GPUs, w.Duration
	t.Topology = w.Topology.String()
	t.Priority = b.priorityName(w.Priority)
	w.Queue = team.Name
	if t.Admission == nil && !t.Finished {
		b.recent[id] = w
	}
	return t, nil
}

// priorityName is the configured priority of value v, else the highest
// configured one below it, else the lowest.
func (b *Bridge) priorityName(v int32) string {
	best, bestV := "", int32(0)
	low, lowV := "", int32(0)
	for name, val := range b.cfg.Priorities {
		if val <= v && (best == "" || val > bestV) {
			best, bestV = name, val
		}
		if low == "" || val < lowV {
			low, lowV = name, val
		}
	}
	if best != "" {
		return best
	}
	return low
}

// Owned describes every workload that carries gpubot's request label, for
// start-up reconciliation (commands.Service.Adopt).
func (b *Bridge) Owned(ctx context.Context) ([]commands.Tracked, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, err := b.view()
	if err != nil {
		return nil, err
	}
	var out []commands.Tracked
	for id, o := range v.owned {
		if o.job == nil {
			continue
		}
		a := o.job.Annotations
		t := commands.Tracked{
			ID: id, Requester: a[AnnotationRequester], Team: a[AnnotationTeam], Flavor: a[AnnotationFlavor],
			Priority: a[AnnotationPriority], Topology: a[AnnotationTopology], Template: a[AnnotationTemplate],
			Channel: a[AnnotationThread], Reason: a[AnnotationReason], Origin: "adopted",
			GPUs: o.w.GPUs, Duration: o.w.Duration, Created: o.job.CreationTimestamp.Time,
			Finished: o.phase == phaseFinished,
		}
		if t.Team == "" {
			if team, ok := b.cfg.teamOfNamespace(o.job.Namespace); ok {
				t.Team = team.Name
			}
		}
		if g, err := strconv.Atoi(a[AnnotationGPUs]); err == nil && t.GPUs == 0 {
			t.GPUs = g
		}
		if d, err := time.ParseDuration(a[AnnotationDuration]); err == nil {
			t.Duration = d
		}
		if c, err := time.Parse(time.RFC3339Nano, a[AnnotationCreated]); err == nil {
			t.Created = c
		}
		if t.Priority == "" {
			t.Priority = b.priorityName(o.w.Priority)
		}
		if o.phase == phaseAdmitted && o.w.Admission != nil {
			ad := *o.w.Admission
			ad.At = o.at
			t.Admission = &ad
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(x, y commands.Tracked) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Warnings compares gpubot's configuration with the cluster: teams whose
// namespace or LocalQueue is missing, configured flavors and priorities
// that Kueue does not have (or has with another value), flavors whose
// ResourceFlavor selects other nodes than configured, an admission mode
// Kueue does not apply across teams, and a manager Configuration gpubot
// could not read.
func (b *Bridge) Warnings() []string {
	b.mu.Lock()
	mc := b.mgr
	b.mu.Unlock()
	var out []string
	for _, t := range b.cfg.Teams {
		lq, err := b.lqs.LocalQueues(t.Namespace).Get(t.LocalQueue)
		if err != nil {
			out = append(out, fmt.Sprintf("team %s: no LocalQueue %s in namespace %s; its requests cannot be submitted", t.Name, t.LocalQueue, t.Namespace))
			continue
		}
		if _, err := b.cqs.Get(string(lq.Spec.ClusterQueue)); err != nil {
			out = append(out, fmt.Sprintf("team %s: LocalQueue %s/%s points at ClusterQueue %s, which does not exist", t.Name, t.Namespace, t.LocalQueue, lq.Spec.ClusterQueue))
		}
	}
	for _, f := range b.cfg.Flavors {
		rf, err := b.flavors.Get(f.Name)
		if err != nil {
			out = append(out, fmt.Sprintf("flavor %s: no ResourceFlavor of that name", f.Name))
			continue
		}
		if want, ok := b.cfg.FlavorLabels[f.Name]; ok && len(want) > 0 && !maps.Equal(want, rf.Spec.NodeLabels) {
			out = append(out, fmt.Sprintf("flavor %s: the ResourceFlavor selects nodes with %s, the configuration says %s; Kueue's ResourceFlavor decides", f.Name, selectsText(rf.Spec.NodeLabels), selectsText(want)))
		}
	}
	names := make([]string, 0, len(b.cfg.Priorities))
	for n := range b.cfg.Priorities {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p, err := b.wpcs.Get(n)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("priority %s: no WorkloadPriorityClass of that name", n))
		case p.Value != b.cfg.Priorities[n]:
			out = append(out, fmt.Sprintf("priority %s: the WorkloadPriorityClass has value %d, the configuration %d", n, p.Value, b.cfg.Priorities[n]))
		}
	}
	if b.cfg.Policy.Mode == allocator.FairSharing {
		out = append(out, "admission.mode is AdmissionFairSharing, but Kueue orders the teams' ClusterQueues by priority, then arrival (its Admission Fair Sharing orders only the LocalQueues inside one ClusterQueue); gpubot predicts the order Kueue uses")
	}
	if mc.err != nil {
		out = append(out, fmt.Sprintf("Kueue's manager Configuration: %v; gpubot assumes Kueue's defaults (no Fair Sharing, no Admission Fair Sharing, no waitForPodsReady)", mc.err))
	} else if !mc.frameworksJob {
		out = append(out, "Kueue's manager Configuration does not list batch/job in integrations.frameworks: Kueue will not admit gpubot's Jobs")
	}
	if nodes, err := b.nodes.List(labels.Everything()); err == nil && !slices.ContainsFunc(nodes, func(n *corev1.Node) bool { return quantityInt(n.Status.Allocatable, b.cfg.GPUResource) > 0 }) {
		out = append(out, fmt.Sprintf("the cluster has no nodes with %s: every flavor has 0 GPUs, and work waits until nodes appear", b.cfg.GPUResource))
	}
	return out
}
