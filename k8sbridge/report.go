package k8sbridge

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/commands"
)

var _ commands.KueueView = (*Bridge)(nil)

// configEvery is how often Kueue's manager Configuration is read again
// (Kueue itself reads it only when it starts).
const configEvery = 5 * time.Minute

// KueueReport implements commands.KueueView: Kueue's word on every
// pending workload it has decided on (from its Workload's conditions and
// admission checks), the GPU nodes no ResourceFlavor selects, the nodes
// behind each flavor, and the Kueue features the allocator does not model.
func (b *Bridge) KueueReport(ctx context.Context) (commands.KueueReport, error) {
	mc := b.managerConfig(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	v, err := b.view()
	if err != nil {
		return commands.KueueReport{}, err
	}
	return b.report(v, mc), nil
}

// managerConfig returns Kueue's manager Configuration, reading it again
// when it is older than configEvery.
func (b *Bridge) managerConfig(ctx context.Context) managerConfig {
	b.mu.Lock()
	mc := b.mgr
	b.mu.Unlock()
	if !mc.at.IsZero() && b.clock.Now().Sub(mc.at) < configEvery {
		return mc
	}
	mc = b.readManagerConfig(ctx)
	b.mu.Lock()
	b.mgr = mc
	b.mu.Unlock()
	return mc
}

// report builds the KueueReport from a view. The caller holds b.mu.
func (b *Bridge) report(v *view, mc managerConfig) commands.KueueReport {
	r := commands.KueueReport{Pending: map[string]commands.KueueWord{}, Unmatched: slices.Clone(v.unmatched), Approximate: b.unmodelled(v, mc)}
	for _, name := range slices.Sorted(maps.Keys(v.flavors)) {
		fi := v.flavors[name]
		r.Flavors = append(r.Flavors, commands.FlavorNodes{Flavor: name, Nodes: fi.nodes, GPUs: fi.gpus, Topology: fi.topology, Selects: selectsText(fi.nodeLabels),
			Elastic: b.elasticFlavors()[name]})
	}
	tas := map[string]bool{}
	for name, fi := range v.flavors {
		tas[name] = fi.topology != ""
	}
	inactive := map[string]*kueue.ClusterQueue{} // queue name → its inactive ClusterQueue
	for _, cq := range v.cqs {
		if q, ok := v.cqName[cq.Name]; ok && apimeta.IsStatusConditionFalse(cq.Status.Conditions, kueue.ClusterQueueActive) {
			inactive[q] = cq
		}
	}
	type fitsOnEmpty struct {
		ok  bool
		why string
	}
	fitsMemo := map[string]fitsOnEmpty{}
	byID := map[string]int{}
	for i, w := range v.workloads {
		byID[w.ID] = i
	}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		w := v.workloads[byID[id]]
		wl := b.kueueWorkload(v, id)
		if wl == nil || apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
			continue
		}
		if _, requeueing := b.evictedFor[id]; requeueing && wl.Spec.Active != nil && !*wl.Spec.Active {
			continue // gpubot deactivated it for a moment, to requeue it
		}
		pending := w
		pending.Admission = nil
		flavors := queueFlavors(v, w.Queue)
		if w.Flavor != "" {
			flavors = []string{w.Flavor}
		}
		word, ok := wordOf(wl, flavors, func() (bool, string) {
			// Work of the same shape fits or not alike.
			key := fmt.Sprintf("%s/%d/%d/%s", pending.Queue, pending.GPUs, pending.Topology, pending.Flavor)
			if f, ok := fitsMemo[key]; ok {
				return f.ok, f.why
			}
			ok, why := neverFits(&v.cluster, pending, tas)
			fitsMemo[key] = fitsOnEmpty{ok, why}
			return ok, why
		})
		if !ok {
			// Kueue does not look at the workloads of an inactive
			// ClusterQueue (stopped, or missing a flavor or check).
			word, ok = inactiveWord(inactive[w.Queue])
		}
		if ok {
			r.Pending[id] = word
		}
	}
	return r
}

// inactiveWord is Kueue's word on a workload of an inactive ClusterQueue.
func inactiveWord(cq *kueue.ClusterQueue) (commands.KueueWord, bool) {
	if cq == nil {
		return commands.KueueWord{}, false
	}
	c := apimeta.FindStatusCondition(cq.Status.Conditions, kueue.ClusterQueueActive)
	w := commands.KueueWord{Condition: "ClusterQueue " + kueue.ClusterQueueActive + "=False", Never: true,
		Plain: "Kueue admits nothing from its ClusterQueue " + cq.Name + ": it is inactive",
		Why:   "its ClusterQueue " + cq.Name + " is inactive"}
	if c != nil {
		w.Reason, w.Message, w.At = c.Reason, c.Message, c.LastTransitionTime.Time
		if c.Message != "" {
			w.Why += " (" + strings.TrimRight(c.Message, ".") + ")"
		}
	}
	return w, true
}

// kueueWorkload is the Kueue Workload behind allocator workload id. The
// caller holds b.mu.
func (b *Bridge) kueueWorkload(v *view, id string) *kueue.Workload {
	if o, ok := v.owned[id]; ok {
		return o.wl
	}
	if rest, ok := strings.CutPrefix(id, "k8s/"); ok {
		ns, name, _ := strings.Cut(rest, "/")
		if wl, err := b.wls.Workloads(ns).Get(name); err == nil {
			return wl
		}
	}
	return nil
}

// logFindings logs, once each, the GPU nodes no flavor selects and the
// Kueue features the allocator does not model. The caller holds b.mu.
func (b *Bridge) logFindings(r commands.KueueReport) {
	for _, u := range r.Unmatched {
		if !b.logged["u:"+u] {
			b.logged["u:"+u] = true
			b.log.Warn("GPU nodes match no ResourceFlavor: gpubot does not count them, and Kueue admits nothing onto them", "nodes", u)
		}
	}
	for _, u := range r.Approximate {
		key := "a:" + u.Feature + ":" + u.Detail
		if !b.logged[key] {
			b.logged[key] = true
			b.log.Warn("the cluster uses a Kueue feature gpubot does not model; its estimates for the teams affected are approximate",
				"feature", u.Feature, "detail", u.Detail, "teams", u.Queues)
		}
	}
}
