package k8sbridge_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// TestRBACIsSufficientAndNotClusterAdmin runs the bridge as the
// ServiceAccount of deploy/base with its ClusterRole: start-up, submit,
// admission, preempt (spec.active), extend, remove and track all work,
// and the account may not do what the bridge never does.
func TestRBACIsSufficientAndNotClusterAdmin(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 1}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml"} {
		if _, err := k8senv.ApplyFile(s.ctx, env.Config, filepath.Join("..", "deploy", "base", f), "gpubot-system"); err != nil {
			t.Fatal(err)
		}
	}
	sa := rest.CopyConfig(env.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:gpubot-system:gpubot",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gpubot-system", "system:authenticated"}}
	b := s.startAs(sa)
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
	for _, ra := range []authv1.ResourceAttributes{
		{Verb: "*", Group: "*", Resource: "*"},
		{Verb: "list", Resource: "secrets"},
		{Verb: "create", Resource: "pods", Namespace: s.n("nlp")},
		{Verb: "update", Group: "kueue.x-k8s.io", Resource: "clusterqueues"},
		{Verb: "delete", Resource: "nodes"},
		{Verb: "get", Resource: "configmaps", Namespace: "kueue-system", Name: "other"},
		{Verb: "update", Resource: "configmaps", Namespace: "kueue-system", Name: "kueue-manager-config"},
	} {
		r, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(s.ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Allowed {
			t.Errorf("the ServiceAccount may %s %s/%s; it should not", ra.Verb, ra.Group, ra.Resource)
		}
	}
}
