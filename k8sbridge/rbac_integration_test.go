package k8sbridge_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// TestRBACIsSufficientAndLeastPrivilege runs the bridge as deploy/base's
// ServiceAccount with the RBAC that gpubot rbac writes for the scenario's
// configuration (k8sbridge.RBAC): start-up, the cluster's identity,
// submit, admission, preempt (spec.active), extend, remove and track all
// work in the team namespace, while a write to any other namespace, and
// whatever the bridge never does, is forbidden.
func TestRBACIsSufficientAndLeastPrivilege(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 1}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml"} {
		if _, err := k8senv.ApplyFile(s.ctx, env.Config, filepath.Join("..", "deploy", "base", f), "gpubot-system"); err != nil {
			t.Fatal(err)
		}
	}
	rbac, err := k8sbridge.RBAC(s.cfg, k8sbridge.RBACOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k8senv.Apply(s.ctx, env.Config, rbac, ""); err != nil {
		t.Fatalf("applying gpubot rbac's output: %v\n%s", err, rbac)
	}
	other := s.n("elsewhere") // a namespace of no team
	s.must(s.kube.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}))
	sa := rest.CopyConfig(env.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:gpubot-system:gpubot",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gpubot-system", "system:authenticated"}}
	b := s.startAs(sa)
	if id, err := b.Identity(s.ctx); err != nil || id.UID == "" {
		t.Errorf("reading the cluster's identity as the ServiceAccount: %+v, %v", id, err)
	}
	s.submit(s.workload("r1", "nlp", 8, 200))
	s.waitEvent(allocator.EventAdmitted, "r1")
	s.submit(s.workload("r2", "nlp", 8, 200))
	s.waitPending("r2")
	s.apply(commands.Op{Kind: commands.OpExtend, ID: "r2", Duration: 3 * time.Hour})
	// An admitted workload's limit is fixed: a refusal the user is shown.
	var refusal *commands.Refusal
	if _, err := b.Apply(s.ctx, commands.Op{Kind: commands.OpExtend, ID: "r1", Duration: 3 * time.Hour}); !errors.As(err, &refusal) {
		t.Errorf("extending admitted r1: err = %v, want a *commands.Refusal", err)
	}
	s.apply(commands.Op{Kind: commands.OpPreempt, ID: "r2", Victims: []string{"r1"}})
	s.waitEvent(allocator.EventPreempted, "r1")
	s.waitEvent(allocator.EventAdmitted, "r2")
	s.apply(commands.Op{Kind: commands.OpRemove, ID: "r2"})
	s.apply(commands.Op{Kind: commands.OpRemove, ID: "r1"})
	if _, err := b.Track(s.ctx, s.n("nlp"), "missing", "r9", "alice"); err == nil {
		t.Error("tracking a missing Job succeeded")
	}
	// It may read all it needs, Kueue's manager Configuration included.
	for _, w := range b.Warnings() {
		t.Errorf("warning as the ServiceAccount: %s", w)
	}
	kube := kubernetes.NewForConfigOrDie(sa)
	// A real write outside the team namespaces is refused by the API server.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	if _, err := kube.BatchV1().Jobs(other).Create(s.ctx, job, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a Job in %s, a namespace of no team: err = %v, want Forbidden", other, err)
	}
	can := func(ra authv1.ResourceAttributes) bool {
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(s.ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	for _, ra := range []authv1.ResourceAttributes{
		{Verb: "*", Group: "*", Resource: "*"},
		{Verb: "list", Resource: "secrets"},
		{Verb: "list", Resource: "secrets", Namespace: s.n("nlp")},
		{Verb: "create", Resource: "pods", Namespace: s.n("nlp")},
		{Verb: "update", Group: "kueue.x-k8s.io", Resource: "clusterqueues"},
		{Verb: "delete", Resource: "nodes"},
		{Verb: "get", Resource: "namespaces", Name: "default"},
		{Verb: "list", Group: "batch", Resource: "jobs"}, // in every namespace
		{Verb: "create", Group: "batch", Resource: "jobs", Namespace: other},
		{Verb: "delete", Group: "batch", Resource: "jobs", Namespace: other},
		{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "workloads", Namespace: other},
		{Verb: "delete", Group: "kueue.x-k8s.io", Resource: "workloads", Namespace: other},
		{Verb: "delete", Group: "kueue.x-k8s.io", Resource: "workloads", Namespace: "gpubot-system"},
		{Verb: "get", Resource: "configmaps", Namespace: "kueue-system", Name: "other"},
		{Verb: "update", Resource: "configmaps", Namespace: "kueue-system", Name: "kueue-manager-config"},
		{Verb: "get", Resource: "configmaps", Namespace: s.n("nlp"), Name: "kueue-manager-config"},
	} {
		if can(ra) {
			t.Errorf("the ServiceAccount may %s %s/%s in %q; it should not", ra.Verb, ra.Group, ra.Resource, ra.Namespace)
		}
	}
	for _, ra := range []authv1.ResourceAttributes{
		{Verb: "create", Group: "batch", Resource: "jobs", Namespace: s.n("nlp")},
		{Verb: "patch", Group: "kueue.x-k8s.io", Resource: "workloads", Namespace: s.n("nlp")},
		{Verb: "get", Resource: "configmaps", Namespace: "kueue-system", Name: "kueue-manager-config"},
	} {
		if !can(ra) {
			t.Errorf("the ServiceAccount may not %s %s/%s in its team namespace %s", ra.Verb, ra.Group, ra.Resource, ra.Namespace)
		}
	}
}
