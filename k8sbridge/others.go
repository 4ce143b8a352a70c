package k8sbridge

import (
	"context"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/commands"
)

// What the zombie sweep needs of the cluster beyond gpubot's own
// requests: where a workload's pods are (for GPU metrics) and the
// admitted work in the teams' namespaces that gpubot does not follow.

var _ commands.Others = (*Bridge)(nil)

// foreignPrefix starts the IDs of workloads gpubot does not follow, in
// snapshots and in Others: "k8s/<namespace>/<workload>".
const foreignPrefix = "k8s/"

// Locate returns the namespace and Job name of the pods of workload id: a
// request's Job, or the Job that owns a workload gpubot does not follow
// ("k8s/<namespace>/<workload>"). It implements gpumetrics.Locator.
func (b *Bridge) Locate(id string) (namespace, job string, ok bool) {
	if rest, foreign := strings.CutPrefix(id, foreignPrefix); foreign {
		ns, name, ok := strings.Cut(rest, "/")
		if !ok {
			return "", "", false
		}
		wl, err := b.wls.Workloads(ns).Get(name)
		if err != nil {
			return "", "", false
		}
		if j := ownerJob(wl); j != "" {
			return ns, j, true
		}
		return "", "", false
	}
	j, ok := b.jobOf(id)
	if !ok {
		return "", "", false
	}
	return j.Namespace, j.Name, true
}

// ownerJob is the name of the Job that owns wl, or "".
func ownerJob(wl *kueue.Workload) string {
	for _, o := range wl.OwnerReferences {
		if o.Kind == "Job" {
			return o.Name
		}
	}
	return ""
}

// Others lists the admitted workloads in the teams' namespaces that gpubot
// neither submitted nor tracks (commands.Others, for zombies.scope: all).
// A workload's owner is the person its gpubot.io/requester annotation
// names, if any. Its pods are known not ready only when Kueue's PodsReady
// condition says so (Kueue sets it when waitForPodsReady is on); the
// bridge does not watch other people's pods.
func (b *Bridge) Others(ctx context.Context) ([]commands.Other, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, err := b.view()
	if err != nil {
		return nil, err
	}
	modelled := map[string]int{}
	for i, w := range v.workloads {
		modelled[w.ID] = i
	}
	wls, err := b.wls.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var out []commands.Other
	for _, wl := range wls {
		team, ours := b.cfg.teamOfNamespace(wl.Namespace)
		id := foreignPrefix + wl.Namespace + "/" + wl.Name
		i, ok := modelled[id]
		if !ours || !ok || v.workloads[i].Admission == nil {
			continue // another namespace, gpubot's own, outside the model, or not admitted
		}
		w := v.workloads[i]
		o := commands.Other{ID: id, Workload: wl.Namespace + "/" + wl.Name, Job: ownerJob(wl), Team: team.Name,
			Owner: wl.Annotations[AnnotationRequester], Flavor: w.Admission.Flavor, GPUs: w.GPUs,
			AdmittedAt: w.Admission.At, Duration: w.Duration}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
			o.AdmittedAt = c.LastTransitionTime.Time
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady); c != nil && c.Status == metav1.ConditionFalse {
			o.PodsNotReadySince = latest(c.LastTransitionTime.Time, o.AdmittedAt)
			o.PodsDetail = clip(joinNonEmpty(": ", "Kueue says "+c.Reason, c.Message))
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, c commands.Other) int { return strings.Compare(a.ID, c.ID) })
	return out, nil
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
