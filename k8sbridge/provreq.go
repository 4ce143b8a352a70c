package k8sbridge

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/gpubot/gpubot/commands"
)

// ProvisioningRequests (autoscaling.x-k8s.io/v1) are what Kueue's
// provisioning admission check asks the cluster autoscaler with, one per
// attempt, named <workload>-<check>-<attempt>. Kueue deletes a failed
// attempt's request when it makes the next one, often within seconds, so
// the bridge watches them and keeps each failure it sees (attempt and the
// autoscaler's message) for ProvisioningChecks. Without the CRD (a cluster
// without the ProvisioningRequest API) nothing is watched.

// ProvisioningRequestResource is the cluster autoscaler's ProvisioningRequest.
var ProvisioningRequestResource = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1", Resource: "provisioningrequests"}

// WithDynamic lets the bridge watch ProvisioningRequests through d, to
// tell provisioning failures even when Kueue retries at once. Default:
// none (failures are told only when gpubot sees the check's Retry state).
func WithDynamic(d dynamic.Interface) Option { return func(b *Bridge) { b.dyn = d } }

// startProvisioningRequests starts watching ProvisioningRequests in the
// team namespaces (gpubot's Role there lets it) if the cluster serves the
// API, and returns what to wait for.
func (b *Bridge) startProvisioningRequests(ctx context.Context) ([]cache.InformerSynced, error) {
	if b.dyn == nil {
		return nil, nil
	}
	gv := ProvisioningRequestResource.GroupVersion().String()
	if _, err := b.kube.Discovery().ServerResourcesForGroupVersion(gv); err != nil {
		if apierrors.IsNotFound(err) {
			b.log.Info("the cluster has no ProvisioningRequest API: provisioned flavors' failures are told only as Kueue's admission check shows them", "groupVersion", gv)
			return nil, nil
		}
		return nil, fmt.Errorf("looking for the ProvisioningRequest API: %w", err)
	}
	seen := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			b.notePR(u)
		}
	}
	var synced []cache.InformerSynced
	for _, ns := range b.cfg.teamNamespaces() {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(b.dyn, 0, ns, nil)
		inf := f.ForResource(ProvisioningRequestResource).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
			return nil, fmt.Errorf("watching ProvisioningRequests in %s: %w", ns, err)
		}
		f.Start(ctx.Done())
		synced = append(synced, inf.HasSynced)
	}
	return synced, nil
}

// notePR keeps the failure of a failed ProvisioningRequest, by the UID of
// the Workload that owns it.
func (b *Bridge) notePR(u *unstructured.Unstructured) {
	owner := ""
	for _, o := range u.GetOwnerReferences() {
		if o.Kind == "Workload" {
			owner = string(o.UID)
		}
	}
	if owner == "" {
		return
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		// A booking that expired before Kueue admitted the workload is
		// retried like a failure (Kueue words its check "Retrying after
		// booking expired: …"); after the admission it is ignored, and the
		// check is then Ready, so nothing is told for it.
		typ, _ := m["type"].(string)
		if typ == "CapacityRevoked" && m["status"] == string(metav1.ConditionTrue) {
			msg, _ := m["message"].(string)
			b.mu.Lock()
			b.prRevoked[owner] = msg
			b.mu.Unlock()
			b.poke()
			continue
		}
		if (typ != "Failed" && typ != "BookingExpired") || m["status"] != string(metav1.ConditionTrue) {
			continue
		}
		name := u.GetName()
		attempt, err := strconv.Atoi(name[strings.LastIndexByte(name, '-')+1:])
		if err != nil {
			return
		}
		msg, _ := m["message"].(string)
		if typ == "BookingExpired" {
			msg = commands.BookingExpired + msg
		}
		b.mu.Lock()
		fs := b.prFailures[owner]
		known := false
		for _, f := range fs {
			known = known || f.Attempt == attempt
		}
		if !known {
			b.prFailures[owner] = append(fs, commands.CheckFailure{Attempt: attempt, Message: msg})
		}
		b.mu.Unlock()
		b.poke()
	}
}
