package k8sbridge_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/k8sbridge"
)

// TestOthersAndLocate: Others lists the admitted workloads of the teams'
// namespaces that are not gpubot's, with their Job, owner annotation and
// Kueue's PodsReady verdict; Locate finds the Job of a request and of
// such a workload.
func TestOthersAndLocate(t *testing.T) {
	j1 := gpubotJob("r1")
	w1 := fakeWorkload("team-nlp", "job-r1", 1, 8, j1)
	admit(w1, "h100", t0)
	ci := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ci-run", Namespace: "team-nlp", UID: "uid-ci"}}
	wci := fakeWorkload("team-nlp", "job-ci-run-5d2f1", 1, 4, ci)
	admit(wci, "h100", t0.Add(time.Minute))
	wci.Spec.MaximumExecutionTimeSeconds = new(int32)
	*wci.Spec.MaximumExecutionTimeSeconds = 3600
	wci.Annotations = map[string]string{k8sbridge.AnnotationRequester: "alice"}
	wci.Status.Conditions = append(wci.Status.Conditions, cond(kueue.WorkloadPodsReady, metav1.ConditionFalse, t0.Add(2*time.Minute), "PodsReady", "Not all pods are ready or succeeded"))
	waiting := fakeWorkload("team-nlp", "job-waiting-1", 1, 4, nil)
	elsewhere := fakeWorkload("other-ns", "job-x-1", 1, 4, nil)
	admit(elsewhere, "h100", t0)
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), gpuNode("n2", "r1", 8), j1}, []runtime.Object{w1, wci, waiting, elsewhere})
	b, _ := startFake(t, f)
	got, err := b.Others(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []commands.Other{{ID: "k8s/team-nlp/job-ci-run-5d2f1", Workload: "team-nlp/job-ci-run-5d2f1", Job: "ci-run", Team: "nlp", Owner: "alice",
		Flavor: "h100", GPUs: 4, AdmittedAt: t0.Add(time.Minute), Duration: time.Hour,
		PodsNotReadySince: t0.Add(2 * time.Minute), PodsDetail: "Kueue says PodsReady: Not all pods are ready or succeeded"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Others (-want +got):\n%s", d)
	}
	for id, want := range map[string][3]string{
		"r1":                            {"team-nlp", "gpubot-r1", "true"},
		"k8s/team-nlp/job-ci-run-5d2f1": {"team-nlp", "ci-run", "true"},
		"k8s/team-nlp/job-waiting-1":    {"", "", "false"}, // no owner Job
		"k8s/team-nlp":                  {"", "", "false"},
		"r9":                            {"", "", "false"},
	} {
		ns, job, ok := b.Locate(id)
		if got := [3]string{ns, job, map[bool]string{true: "true", false: "false"}[ok]}; got != want {
			t.Errorf("Locate(%q) = %v, want %v", id, got, want)
		}
	}
}
