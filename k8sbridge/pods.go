package k8sbridge

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
)

// Pods readiness of admitted workloads.
//
// Kueue sets a Workload's PodsReady condition only when its
// waitForPodsReady setting is on (Kueue v0.17.0 leaves it off by default,
// and then sets no such condition). The bridge uses the condition when it
// is there; otherwise it counts the pods itself: the pods of the Job that
// it sees (gpubot's own Jobs' pods carry the request label), or, for a
// tracked Job whose pods do not, the Job's ready and succeeded counts. A
// pod that succeeded counts as ready: it has run.

// podsState is what the sink was told about the pods of an admission.
type podsState int8

const (
	podsUntold   podsState = iota // nothing yet
	podsReady                     // all ready
	podsNotReady                  // not (or no longer) all ready
)

func (p podsState) String() string {
	return [...]string{"untold", "ready", "not-ready"}[p]
}

// podsMark is what the sink was told about the pods of one admission (the
// one that started at admitted).
type podsMark struct {
	admitted time.Time
	state    podsState
}

// annotation is the mark as AnnotationPods records it.
func (m podsMark) annotation() string {
	return m.state.String() + " " + m.admitted.UTC().Format(time.RFC3339)
}

// markWrite is a mark to record on a Job.
type markWrite struct {
	namespace, job, value string
}

// sameInstant compares times at the API's one-second resolution.
func sameInstant(a, b time.Time) bool { return a.Unix() == b.Unix() }

// markOf returns what the sink was told about the pods of o's current
// admission: from memory, else from the Job's annotation (written after
// an earlier report, perhaps by an earlier gpubot process). The caller
// holds b.mu.
func (b *Bridge) markOf(o *owned) podsMark {
	if m, ok := b.podsTold[o.id]; ok && sameInstant(m.admitted, o.at) {
		return m
	}
	m := podsMark{admitted: o.at}
	if o.job == nil {
		return m
	}
	state, at, ok := strings.Cut(o.job.Annotations[AnnotationPods], " ")
	if t, err := time.Parse(time.RFC3339, at); ok && err == nil && sameInstant(t, o.at) {
		switch state {
		case podsReady.String():
			m.state = podsReady
		case podsNotReady.String():
			m.state = podsNotReady
		}
	}
	return m
}

// podsStatus is how the pods of an admitted workload are doing.
type podsStatus struct {
	want, up int       // pods expected; pods ready or succeeded
	ready    bool      // all of them
	since    time.Time // when the last of them became ready, if known
	detail   string    // when not ready: "2 of 4 pods ready; pod x: ImagePullBackOff"
}

// podsEvent compares the pods of an admitted workload with what the sink
// was told, and returns the event to report (if any), the new mark, and
// when to look again if nothing changes before (zero: no need).
func (b *Bridge) podsEvent(o *owned, now time.Time) (ev *allocator.Event, m podsMark, wake time.Time) {
	m = b.markOf(o)
	st, ok := b.podsStatus(o)
	if !ok {
		return nil, m, time.Time{}
	}
	switch {
	case st.ready && m.state != podsReady:
		at := st.since
		if at.IsZero() || at.After(now) {
			at = now
		}
		if at.Before(o.at) {
			at = o.at
		}
		m.state = podsReady
		return &allocator.Event{Kind: allocator.EventPodsReady, ID: o.id, At: at, Pods: st.want}, m, time.Time{}
	case st.ready:
		return nil, m, time.Time{}
	case b.evicting(o):
		// Its pods go because the workload does (Kueue evicts it, its
		// spot node is gone): the eviction is what to tell, not them.
		return nil, m, time.Time{}
	case m.state == podsReady:
		m.state = podsNotReady
		return &allocator.Event{Kind: allocator.EventPodsNotReady, ID: o.id, At: now, Pods: st.want, Detail: st.detail}, m, time.Time{}
	case m.state == podsUntold:
		deadline := o.at.Add(b.cfg.PodsReadyTimeout)
		if now.Before(deadline) {
			return nil, m, deadline
		}
		m.state = podsNotReady
		return &allocator.Event{Kind: allocator.EventPodsNotReady, ID: o.id, At: now, Pods: st.want, Detail: st.detail}, m, time.Time{}
	}
	return nil, m, time.Time{}
}

// evicting reports whether admitted o's pods are going with it: Kueue
// evicts it or has suspended its Job, or one of its pods is being deleted
// or sits on a node that is gone (a spot node reclaimed: Kueue evicts the
// workload next). The caller holds b.mu.
func (b *Bridge) evicting(o *owned) bool {
	if o.wl != nil && apimeta.IsStatusConditionTrue(o.wl.Status.Conditions, kueue.WorkloadEvicted) {
		return true
	}
	if o.job == nil || ptr.Deref(o.job.Spec.Suspend, false) {
		return o.job != nil
	}
	for _, p := range b.jobPods(o.job) {
		if p.DeletionTimestamp != nil {
			return true
		}
		if n := p.Spec.NodeName; n != "" {
			if _, err := b.nodes.Get(n); apierrors.IsNotFound(err) {
				return true
			}
		}
	}
	return false
}

// podsStatus reads the pods of an admitted workload from the caches. ok
// is false when it cannot tell (no Job, no pod count).
func (b *Bridge) podsStatus(o *owned) (st podsStatus, ok bool) {
	if o.job == nil || o.wl == nil {
		return st, false
	}
	st.want = podCount(o.wl, o.job)
	if st.want == 0 {
		return st, false
	}
	pods := b.jobPods(o.job)
	var worst *corev1.Pod
	worstRank := -1
	for _, p := range pods {
		if up, at := podUp(p); up {
			st.up++
			if at.After(st.since) {
				st.since = at
			}
			continue
		}
		// Report a live pod's trouble before that of a failed pod the Job
		// may already have replaced.
		rank := 1
		if p.Status.Phase == corev1.PodFailed {
			rank = 0
		}
		if rank > worstRank {
			worst, worstRank = p, rank
		}
	}
	if len(pods) == 0 {
		st.up = int(ptr.Deref(o.job.Status.Ready, 0) + o.job.Status.Succeeded)
	}
	st.ready = st.up >= st.want
	if c := apimeta.FindStatusCondition(o.wl.Status.Conditions, kueue.WorkloadPodsReady); c != nil {
		st.ready = c.Status == metav1.ConditionTrue
		if st.ready && c.LastTransitionTime.After(st.since) {
			st.since = c.LastTransitionTime.Time
		}
	}
	if st.ready {
		return st, true
	}
	st.detail = fmt.Sprintf("%d of %d pods ready", min(st.up, st.want), st.want)
	switch {
	case worst != nil:
		st.detail += fmt.Sprintf("; pod %s: %s", worst.Name, podProblem(worst))
	case ptr.Deref(o.job.Spec.Suspend, false):
		st.detail += "; the Job is still suspended"
	case len(pods) == 0 && o.job.Status.Active == 0:
		st.detail += "; no pods created yet"
	}
	return st, true
}

// podCount is how many pods the workload runs at once: what Kueue
// admitted, else what the Workload or the Job asks for.
func podCount(wl *kueue.Workload, j *batchv1.Job) int {
	n := 0
	if a := wl.Status.Admission; a != nil {
		for _, psa := range a.PodSetAssignments {
			n += int(ptr.Deref(psa.Count, 0))
		}
	}
	if n == 0 {
		for _, ps := range wl.Spec.PodSets {
			n += int(ps.Count)
		}
	}
	if n == 0 && j != nil {
		n = int(ptr.Deref(j.Spec.Parallelism, 1))
	}
	return n
}

// jobPods lists the live pods of Job j that the pod cache has (those of
// gpubot's own Jobs), sorted by name.
func (b *Bridge) jobPods(j *batchv1.Job) []*corev1.Pod {
	id := j.Labels[LabelRequest]
	if id == "" {
		return nil
	}
	pods, err := b.pods.Pods(j.Namespace).List(labels.SelectorFromSet(labels.Set{LabelRequest: id}))
	if err != nil {
		return nil
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if c := metav1.GetControllerOf(p); c == nil || c.UID != j.UID {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y *corev1.Pod) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// podUp reports whether a pod is ready (running, its Ready condition true)
// or has succeeded, and since when.
func podUp(p *corev1.Pod) (bool, time.Time) {
	c := podCondition(p, corev1.PodReady)
	var at time.Time
	if c != nil {
		at = c.LastTransitionTime.Time
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return true, at
	case corev1.PodRunning:
		return c != nil && c.Status == corev1.ConditionTrue, at
	}
	return false, time.Time{}
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podProblem says in a few words why a pod is not ready.
func podProblem(p *corev1.Pod) string {
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return w.Reason
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("%s (exit code %d)", cmp.Or(t.Reason, "Error"), t.ExitCode)
		}
	}
	if c := podCondition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
		return clip(joinNonEmpty(": ", cmp.Or(c.Reason, "Unschedulable"), c.Message))
	}
	switch p.Status.Phase {
	case corev1.PodFailed:
		return clip(joinNonEmpty(": ", "failed", cmp.Or(p.Status.Reason, p.Status.Message)))
	case corev1.PodRunning:
		return "running but not ready"
	case corev1.PodPending:
		if p.Spec.NodeName == "" {
			return "not scheduled yet"
		}
		return "starting on " + p.Spec.NodeName
	}
	return strings.ToLower(cmp.Or(string(p.Status.Phase), "unknown"))
}

func joinNonEmpty(sep string, parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return strings.TrimSpace(s) == "" }), sep)
}

// clip shortens a Kubernetes message to its first sentence, on one short
// line.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i > 0 {
		s = s[:i+1]
	}
	if r := []rune(s); len(r) > 120 {
		s = string(r[:119]) + "…"
	}
	return s
}

// writeMarks records on the Jobs what the sink has been told about their
// pods. A failure only means that a restarted gpubot may report it again.
func (b *Bridge) writeMarks(ctx context.Context, ws []markWrite) {
	for _, w := range ws {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationPods, w.value)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := b.kube.BatchV1().Jobs(w.namespace).Patch(pctx, w.job, types.MergePatchType, patch, metav1.PatchOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			b.log.Warn("recording the pods' readiness on the Job", "job", w.namespace+"/"+w.job, "err", err)
		}
	}
}

// wakeAt arranges for the events to be looked at again at t (zero: not
// needed), replacing the previous arrangement.
func (b *Bridge) wakeAt(prev clock.Timer, t time.Time) clock.Timer {
	if prev != nil {
		prev.Stop()
	}
	if t.IsZero() {
		return nil
	}
	d := max(t.Sub(b.clock.Now()), 0)
	if c, ok := b.clock.(clock.WithDelayedExecution); ok {
		return c.AfterFunc(d, b.poke)
	}
	return clock.RealClock{}.AfterFunc(d, b.poke)
}
