package k8sbridge

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// Elastic capacity on a real cluster. Spot and provisioned flavors are
// ResourceFlavors in the teams' ClusterQueues like any other (kueue-setup
// writes them, a provisioned one with its AdmissionCheck and
// ProvisioningRequestConfig). Only requests switched to them run there:
// every Job gets required node affinity that keeps Kueue from assigning
// it an elastic flavor other than its own (without it, Kueue would try
// them next when reserved capacity runs out, since an elastic flavor's
// node labels include a reserved one's: the same GPU; see
// elasticAffinity); a switch withdraws the request's Job and submits it again pinned
// to the elastic flavor. Kueue's ProvisioningRequest admission check then
// asks the cluster autoscaler for nodes (ProvisioningChecks reports its
// state), and when a spot node goes away Kueue's topology-aware
// scheduling evicts the work (reason NodeFailures), which the bridge
// reports as a requeue with Kueue's message.

var _ commands.Provisioning = (*Bridge)(nil)

// elasticFlavors are the configured flavors marked elastic.
func (b *Bridge) elasticFlavors() map[string]bool {
	out := map[string]bool{}
	for _, f := range b.cfg.Flavors {
		if f.Elastic {
			out[f.Name] = true
		}
	}
	return out
}

// elasticAffinity is the required node affinity that keeps a request's
// Job on its flavor with respect to the queue's elastic flavors: for each
// elastic ResourceFlavor other than pinned, a label it selects that no
// reserved flavor of the queue selects with the same value must not have
// that value (NotIn); and when pinned is elastic, its own such label must
// have it (In). Node affinity, unlike the node selector, survives Kueue's
// restore of the pod template when it evicts a workload (which drops the
// labels of the flavor it had assigned), so a spot request stays on spot
// when it is requeued. The caller holds b.mu.
func (b *Bridge) elasticAffinity(v *view, queue, pinned string) []corev1.NodeSelectorRequirement {
	elastic := b.elasticFlavors()
	var reserved, spend []*kueue.ResourceFlavor
	for _, name := range queueFlavors(v, queue) {
		rf, err := b.flavors.Get(name)
		if err != nil {
			continue
		}
		if elastic[name] {
			spend = append(spend, rf)
		} else {
			reserved = append(reserved, rf)
		}
	}
	var out []corev1.NodeSelectorRequirement
	for _, rf := range spend {
		for _, k := range slices.Sorted(maps.Keys(rf.Spec.NodeLabels)) {
			val := rf.Spec.NodeLabels[k]
			if slices.ContainsFunc(reserved, func(r *kueue.ResourceFlavor) bool { return r.Spec.NodeLabels[k] == val }) {
				continue
			}
			op := corev1.NodeSelectorOpNotIn
			if rf.Name == pinned {
				op = corev1.NodeSelectorOpIn
			}
			out = append(out, corev1.NodeSelectorRequirement{Key: k, Operator: op, Values: []string{val}})
			break
		}
	}
	return out
}

// switchFlavor withdraws the request's Job and Workloads, waits until
// they are gone, and submits w (the request on its new flavor).
func (b *Bridge) switchFlavor(ctx context.Context, w allocator.Workload) ([]allocator.Event, error) {
	b.mu.Lock()
	ref, ok := b.jobOf(w.ID)
	b.mu.Unlock()
	if err := b.remove(ctx, w.ID); err != nil {
		return nil, err
	}
	if ok {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, b.cfg.PreemptTimeout, true, func(ctx context.Context) (bool, error) {
			_, err := b.kube.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
			b.mu.Lock()
			_, cached := b.jobOf(w.ID)
			b.mu.Unlock()
			return !cached, nil
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for Job %s/%s to go before resubmitting it on %s: %w", ref.Namespace, ref.Name, w.Flavor, err)
		}
	}
	return b.submit(ctx, w)
}

// ProvisioningChecks implements commands.Provisioning: the state of the
// ProvisioningRequest admission checks of gpubot's workloads.
func (b *Bridge) ProvisioningChecks(context.Context) (map[string]commands.CheckState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, err := b.view()
	if err != nil {
		return nil, err
	}
	out := map[string]commands.CheckState{}
	for id, o := range v.owned {
		if o.wl == nil || o.phase == phaseFinished {
			continue
		}
		for _, ac := range o.wl.Status.AdmissionChecks {
			check, err := b.checks.Get(string(ac.Name))
			if err != nil || check.Spec.ControllerName != ProvisioningController {
				continue
			}
			st := commands.CheckState{Check: string(ac.Name), State: string(ac.State), Message: ac.Message,
				Attempt: int(ptr.Deref(ac.RetryCount, 0)) + 1, Since: ac.LastTransitionTime.Time}
			for _, ps := range o.wl.Spec.PodSets {
				st.Nodes += int(ps.Count)
			}
			st.Failed = append(st.Failed, b.prFailures[string(o.wl.UID)]...)
			slices.SortFunc(st.Failed, func(x, y commands.CheckFailure) int { return x.Attempt - y.Attempt })
			for _, f := range st.Failed {
				st.Attempt = max(st.Attempt, f.Attempt+1)
			}
			if st.State == commands.CheckRetry || st.State == commands.CheckRejected {
				st.Attempt = max(1, st.Attempt-1) // the attempt that failed
			}
			out[id] = st
		}
		if msg, ok := b.prRevoked[string(o.wl.UID)]; ok {
			// The nodes were taken back after the admission: Kueue
			// rejects the check and deactivates the Workload, clearing
			// its checks, so the ProvisioningRequest says it.
			st := out[id]
			st.State, st.Message, st.Since = commands.CheckRejected, msg, time.Time{}
			st.Attempt = max(st.Attempt, 1)
			if c := apimeta.FindStatusCondition(o.wl.Status.Conditions, kueue.WorkloadEvicted); c != nil {
				st.Since = c.LastTransitionTime.Time
			}
			out[id] = st
		}
	}
	return out, nil
}

// evictedDetail says why Kueue evicted wl when it was not preempted by
// other work: "Kueue evicted it (NodeFailures): …"; "" otherwise.
func evictedDetail(wl *kueue.Workload) string {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason == kueue.WorkloadEvictedByPreemption || c.Reason == kueue.WorkloadDeactivated {
		return ""
	}
	return fmt.Sprintf("Kueue evicted it (%s): %s", c.Reason, strings.TrimRight(c.Message, "."))
}

// unfollowedCheck reports whether an admission check rule of a
// ClusterQueue holds back work gpubot does not follow as provisioning:
// anything but a ProvisioningRequest check on configured provisioned
// (elastic) flavors only, whose wait gpubot estimates from what the
// cluster did.
func (b *Bridge) unfollowedCheck(rule kueue.AdmissionCheckStrategyRule) bool {
	elastic := b.elasticFlavors()
	if len(rule.OnFlavors) == 0 {
		return true
	}
	for _, f := range rule.OnFlavors {
		if !elastic[string(f)] {
			return true
		}
	}
	check, err := b.checks.Get(string(rule.Name))
	return err != nil || check.Spec.ControllerName != ProvisioningController
}
