package k8sbridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// submit creates the request's suspended Job, unless it exists.
func (b *Bridge) submit(ctx context.Context, w allocator.Workload) ([]allocator.Event, error) {
	b.mu.Lock()
	_, pending := b.recent[w.ID]
	_, exists := b.jobOf(w.ID)
	b.mu.Unlock()
	if pending || exists {
		return nil, nil
	}
	team, ok := b.cfg.team(w.Queue)
	if !ok {
		return nil, fmt.Errorf("team %s has no namespace in gpubot's Kubernetes settings", w.Queue)
	}
	var rec records.Request
	if b.requests != nil {
		if r, err := b.requests.GetRequest(ctx, w.ID); err == nil {
			rec = r
		}
	}
	spec, err := b.jobSpec(w, rec, team)
	if err != nil {
		return nil, err
	}
	job, err := buildJob(spec, b.cfg.GPUResource)
	if err != nil {
		return nil, err
	}
	_, err = b.kube.BatchV1().Jobs(team.Namespace).Create(ctx, job, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		got, gerr := b.kube.BatchV1().Jobs(team.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, fmt.Errorf("reading Job %s/%s: %w", team.Namespace, job.Name, gerr)
		}
		if got.Labels[LabelRequest] != w.ID {
			return nil, fmt.Errorf("a Job %s/%s exists that is not gpubot's request %s", team.Namespace, job.Name, w.ID)
		}
	case err != nil:
		return nil, fmt.Errorf("creating Job %s/%s: %w", team.Namespace, job.Name, err)
	}
	b.mu.Lock()
	b.recent[w.ID] = w
	b.mu.Unlock()
	b.poke()
	return b.firstDecision(ctx, w.ID), nil
}

// firstDecision waits, at most Config.SubmitWait, for Kueue's first
// decision on a new request, and reports its admission if it was admitted
// at once (as the simulated cluster does). Later events come through Run;
// the admission may then be reported again, which the service ignores.
func (b *Bridge) firstDecision(ctx context.Context, id string) []allocator.Event {
	var out []allocator.Event
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, b.cfg.SubmitWait, true, func(context.Context) (bool, error) {
		wl, err := b.workloadByID(id)
		if err != nil || apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved) == nil {
			return false, nil
		}
		if !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
			return true, nil
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		v, err := b.view()
		if err != nil {
			return true, nil
		}
		for _, x := range v.workloads {
			if o := v.owned[id]; x.ID == id && o != nil && o.phase == phaseAdmitted && x.Admission != nil {
				a := cloneAdmission(x.Admission)
				a.At = o.at
				out = append(out, allocator.Event{Kind: allocator.EventAdmitted, ID: id, At: o.at, Admission: a})
			}
		}
		return true, nil
	})
	return out
}

// jobSpec gathers what the Job of w needs from the caches.
func (b *Bridge) jobSpec(w allocator.Workload, rec records.Request, team Team) (jobSpec, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := jobSpec{w: w, rec: rec, team: team, template: b.cfg.Templates[rec.Template]}
	s.priority = rec.Priority
	if s.priority == "" || !b.hasPriorityClass(s.priority) {
		s.priority = b.priorityClassOf(w.Priority)
	}
	v, err := b.view()
	if err != nil {
		return s, err
	}
	flavor := w.Flavor
	if flavor == "" {
		elastic := b.elasticFlavors()
		for _, q := range v.cluster.Queues {
			if q.Name != w.Queue {
				continue
			}
			for _, f := range q.Flavors {
				if flavor == "" && !elastic[f] {
					flavor = f
				}
			}
		}
	}
	for _, f := range v.cluster.Flavors {
		if f.Name == flavor {
			s.gpn = f.GPUsPerNode
		}
	}
	if s.gpn == 0 {
		for _, f := range b.cfg.Flavors {
			if f.Name == flavor {
				s.gpn = f.GPUsPerNode
			}
		}
	}
	if s.gpn == 0 {
		return s, fmt.Errorf("flavor %q of team %s is not a ResourceFlavor in the cluster", flavor, w.Queue)
	}
	rf, err := b.flavors.Get(flavor)
	if err == nil && w.Flavor != "" {
		s.selector = rf.Spec.NodeLabels
	}
	// A reserved flavor's node labels also match the elastic flavors of
	// the same GPU: without this Kueue would try those next.
	s.keepOff = b.elasticAffinity(v, w.Queue, w.Flavor)
	if w.Topology != allocator.LevelNone {
		fi := &flavorInfo{blockLabel: b.cfg.BlockLabel, rackLabel: b.cfg.RackLabel, hostL: b.cfg.HostLabel}
		if rf != nil && rf.Spec.TopologyName != nil {
			if t, err := b.topologies.Get(string(*rf.Spec.TopologyName)); err == nil {
				n := len(t.Spec.Levels)
				lv := func(i int) string {
					if i < 0 {
						return ""
					}
					return t.Spec.Levels[i].NodeLabel
				}
				fi = &flavorInfo{hostL: lv(n - 1), rackLabel: lv(n - 2), blockLabel: lv(n - 3)}
			}
		}
		switch w.Topology {
		case allocator.LevelHost:
			s.topoLabel = fi.hostL
		case allocator.LevelRack:
			s.topoLabel = fi.rackLabel
		case allocator.LevelBlock:
			s.topoLabel = fi.blockLabel
		}
		if s.topoLabel == "" {
			return s, fmt.Errorf("flavor %s has no %s level in its topology", flavor, w.Topology)
		}
	}
	return s, nil
}

func (b *Bridge) hasPriorityClass(name string) bool {
	_, err := b.wpcs.Get(name)
	return err == nil
}

// priorityClassOf names the WorkloadPriorityClass of value v: a configured
// priority's if one has it, else any; "" if none.
func (b *Bridge) priorityClassOf(v int32) string {
	for name, val := range b.cfg.Priorities {
		if val == v && b.hasPriorityClass(name) {
			return name
		}
	}
	all, _ := b.wpcs.List(labels.Everything())
	for _, p := range all {
		if p.Value == v {
			return p.Name
		}
	}
	return ""
}

// remove deletes the request's Job and its Workloads. Deleting the
// Workloads too releases the quota at once, also where no garbage
// collector runs.
func (b *Bridge) remove(ctx context.Context, id string) error {
	b.mu.Lock()
	ref, ok := b.jobOf(id)
	w, recent := b.recent[id]
	delete(b.recent, id)
	b.mu.Unlock()
	if !ok {
		if !recent {
			return nil // gone already: removing twice is harmless
		}
		team, _ := b.cfg.team(w.Queue)
		ref = jobRef{Namespace: team.Namespace, Name: JobName(id)}
	}
	bg := metav1.DeletePropagationBackground
	err := b.kube.BatchV1().Jobs(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Job %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	objs, _ := b.wlByOwner.ByIndex(indexOwner, ref.Namespace+"/"+ref.Name)
	for _, o := range objs {
		wl := o.(*kueue.Workload)
		err := b.kueue.KueueV1beta2().Workloads(wl.Namespace).Delete(ctx, wl.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Workload %s/%s: %w", wl.Namespace, wl.Name, err)
		}
	}
	b.poke()
	return nil
}

// ErrExtendAdmitted is returned when extending an admitted workload: Kueue
// fixes maximumExecutionTimeSeconds at admission.
// It is a commands.Refusal, so the user is told why, not asked to retry.
var ErrExtendAdmitted error = &commands.Refusal{Reason: "it is already running, and Kueue fixes a workload's maximum execution time when it is admitted, so it still ends at its first limit"}

// extend sets the request's maximum execution time to total: on the
// Workload first (while it is not admitted), then on the Job, so that
// Kueue keeps the Workload and its place in the queue.
func (b *Bridge) extend(ctx context.Context, id string, total time.Duration) error {
	secs := int32(total / time.Second)
	b.mu.Lock()
	ref, ok := b.jobOf(id)
	var wl *kueue.Workload
	if ok {
		wl = b.workloadOfJob(ref)
	}
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("request %s has no Job in the cluster yet; try again in a moment", id)
	}
	if wl != nil {
		if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
			return ErrExtendAdmitted
		}
		patch := fmt.Appendf(nil, `{"spec":{"maximumExecutionTimeSeconds":%d}}`, secs)
		if _, err := b.kueue.KueueV1beta2().Workloads(wl.Namespace).Patch(ctx, wl.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			if apierrors.IsInvalid(err) {
				return ErrExtendAdmitted
			}
			return fmt.Errorf("extending Workload %s/%s: %w", wl.Namespace, wl.Name, err)
		}
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q},"annotations":{%q:%q}}}`, LabelMaxExecTime, fmt.Sprint(secs), AnnotationDuration, total.String())
	if _, err := b.kube.BatchV1().Jobs(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("extending Job %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return nil
}

// workloadOfJob returns the newest Workload owned by the Job. The caller
// holds b.mu.
func (b *Bridge) workloadOfJob(ref jobRef) *kueue.Workload {
	objs, _ := b.wlByOwner.ByIndex(indexOwner, ref.Namespace+"/"+ref.Name)
	var out *kueue.Workload
	for _, o := range objs {
		wl := o.(*kueue.Workload)
		if ref.job != nil && !ownedBy(wl, string(ref.job.UID)) {
			continue
		}
		if out == nil || wl.CreationTimestamp.After(out.CreationTimestamp.Time) {
			out = wl
		}
	}
	return out
}

func ownedBy(wl *kueue.Workload, uid string) bool {
	for _, o := range wl.OwnerReferences {
		if string(o.UID) == uid {
			return true
		}
	}
	return false
}

// workloadByID finds the Workload of an allocator workload ID: a request's
// through its Job, another's ("k8s/<namespace>/<name>") by name.
func (b *Bridge) workloadByID(id string) (*kueue.Workload, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rest, ok := strings.CutPrefix(id, "k8s/"); ok {
		ns, name, _ := strings.Cut(rest, "/")
		return b.wls.Workloads(ns).Get(name)
	}
	ref, ok := b.jobOf(id)
	if !ok {
		return nil, fmt.Errorf("request %s has no Job in the cluster", id)
	}
	wl := b.workloadOfJob(ref)
	if wl == nil {
		return nil, fmt.Errorf("request %s has no Kueue Workload yet", id)
	}
	return wl, nil
}

func (b *Bridge) setActive(ctx context.Context, wl *kueue.Workload, active bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"active":%t}}`, active)
	_, err := b.kueue.KueueV1beta2().Workloads(wl.Namespace).Patch(ctx, wl.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("setting spec.active=%t on Workload %s/%s: %w", active, wl.Namespace, wl.Name, err)
	}
	return nil
}

// reserved reports whether the Workload named holds quota, per the cache.
func (b *Bridge) reserved(ns, name string) bool {
	wl, err := b.wls.Workloads(ns).Get(name)
	return err == nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
}

// Requeue sends an admitted workload back to the queue: it deactivates the
// Workload (spec.active=false), waits until Kueue has evicted it, and
// activates it again. by, if set, names the request it made room for.
func (b *Bridge) Requeue(ctx context.Context, id, by string) error {
	return b.requeue(ctx, []string{id}, by, "")
}

// preempt requeues the victims, then waits (bounded) for Kueue to admit id
// in the room they left.
func (b *Bridge) preempt(ctx context.Context, id string, victims []string) error {
	return b.requeue(ctx, victims, id, id)
}

func (b *Bridge) requeue(ctx context.Context, ids []string, by, waitFor string) error {
	var wls []*kueue.Workload
	for _, v := range ids {
		wl, err := b.workloadByID(v)
		if err != nil {
			return fmt.Errorf("finding %s: %w", v, err)
		}
		wls = append(wls, wl)
	}
	b.mu.Lock()
	for _, v := range ids {
		if by != "" {
			b.evictedFor[v] = by
		}
	}
	b.mu.Unlock()
	var errs []error
	for _, wl := range wls {
		if err := b.setActive(ctx, wl, false); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, b.cfg.PreemptTimeout, true, func(context.Context) (bool, error) {
			for _, wl := range wls {
				if b.reserved(wl.Namespace, wl.Name) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("waiting for Kueue to evict %s: %w", strings.Join(ids, ", "), err))
		}
	}
	if waitFor != "" && len(errs) == 0 {
		// Best effort: the victims queue again only once the preemptor has
		// the room, so that they cannot take it back first.
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, b.cfg.PreemptTimeout, true, func(context.Context) (bool, error) {
			wl, err := b.workloadByID(waitFor)
			return err == nil && b.reserved(wl.Namespace, wl.Name), nil
		})
	}
	for _, wl := range wls {
		if err := b.setActive(ctx, wl, true); err != nil {
			errs = append(errs, err)
		}
	}
	b.poke()
	return errors.Join(errs...)
}
