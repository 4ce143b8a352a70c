package k8sbridge

import (
	"bytes"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// RBACOptions say whom RBAC grants to.
type RBACOptions struct {
	// ServiceAccount and Namespace name gpubot's ServiceAccount; defaults
	// gpubot and gpubot-system, as in deploy/base.
	ServiceAccount, Namespace string
}

// clusterRules are what the bridge reads that is cluster-scoped, and only
// reads: nodes (capacity and topology labels), the kube-system namespace
// (the cluster's identity, see Identity) and Kueue's cluster-scoped
// objects.
var clusterRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"get"}},
	{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"resourceflavors", "topologies", "clusterqueues", "cohorts", "workloadpriorityclasses", "admissionchecks"},
		Verbs: []string{"list", "watch"}},
}

// teamRules are what the bridge does in each team namespace.
var teamRules = []rbacv1.PolicyRule{
	// Jobs: created from templates (submit), read and labelled (track),
	// patched (extend), deleted (remove); gpubot's own are watched.
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	// Workloads: watched; patched for spec.active (requeue, preempt) and
	// the maximum execution time (extend); deleted with their Job.
	{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads"}, Verbs: []string{"list", "watch", "patch", "delete"}},
	// The team's LocalQueue: checked against the configuration.
	{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"localqueues"}, Verbs: []string{"list", "watch"}},
	// gpubot's pods: watched to learn their nodes and readiness.
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
	// ProvisioningRequests (Kueue's provisioning admission check asks the
	// cluster autoscaler with them): watched to tell failed attempts.
	{APIGroups: []string{"autoscaling.x-k8s.io"}, Resources: []string{"provisioningrequests"}, Verbs: []string{"list", "watch"}},
}

// kueueConfigRules read Kueue's manager Configuration: one ConfigMap in
// Kueue's namespace, get only.
func kueueConfigRules(cfg Config) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{cfg.KueueConfigMap}, Verbs: []string{"get"}}}
}

// RBAC returns the RBAC manifests the bridge needs with cfg, as YAML
// documents: a ClusterRole (and its binding) that only reads cluster-scoped
// objects; in Kueue's namespace a Role that reads its manager
// Configuration ConfigMap and nothing else; and in each team namespace a
// Role and RoleBinding for Jobs, Workloads, LocalQueues, Pods and
// ProvisioningRequests there.
// Nothing else is granted in any namespace. The bridge watches namespaced objects only in the team
// namespaces, so this is sufficient; the RBAC integration test proves it.
func RBAC(cfg Config, o RBACOptions) ([]byte, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = "gpubot"
	}
	if o.Namespace == "" {
		o.Namespace = "gpubot-system"
	}
	labels := map[string]string{"app.kubernetes.io/name": "gpubot"}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: o.ServiceAccount, Namespace: o.Namespace}}
	typeMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
	}
	objs := []any{
		rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: "gpubot", Labels: labels}, Rules: clusterRules},
		rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: metav1.ObjectMeta{Name: "gpubot", Labels: labels},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gpubot"}, Subjects: subject},
	}
	kmeta := metav1.ObjectMeta{Name: "gpubot-kueue-config", Namespace: cfg.KueueNamespace, Labels: labels}
	objs = append(objs,
		rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: kmeta, Rules: kueueConfigRules(cfg)},
		rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: kmeta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "gpubot-kueue-config"}, Subjects: subject})
	for _, ns := range cfg.teamNamespaces() {
		meta := metav1.ObjectMeta{Name: "gpubot", Namespace: ns, Labels: labels}
		objs = append(objs,
			rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta, Rules: teamRules},
			rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "gpubot"}, Subjects: subject})
	}
	var b bytes.Buffer
	for i, obj := range objs {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("k8sbridge: writing RBAC: %w", err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		// creationTimestamp: null is noise that kubectl ignores.
		b.Write(bytes.ReplaceAll(data, []byte("  creationTimestamp: null\n"), nil))
	}
	return b.Bytes(), nil
}
