package app

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// TestConsoleOnARealCluster runs gpubot as a user would with
// --kubeconfig: the bundled example configuration against a real API
// server and Kueue with deploy/kueue/setup.yaml and the example's nodes
// on kwok. A request is admitted by Kueue at once, and a Job submitted
// with kubectl is tracked.
func TestConsoleOnARealCluster(t *testing.T) {
	if k8senv.Skipped() || testing.Short() {
		t.Skipf("integration test: needs the cached Kubernetes binaries (unset %s and drop -short)", k8senv.SkipEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := k8senv.Start(ctx, k8senv.Options{Nodes: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Example(ctx, filepath.Join("..", "..", "deploy", "kueue", "setup.yaml"), cfg.Cluster().Nodes); err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) != len(cfg.Cluster().Nodes) {
			return false, nil
		}
		for _, n := range nodes.Items {
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for the example's nodes: %v", err)
	}
	gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ci-eval", Namespace: "nlp", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "nlp"}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"pod-complete.stage.kwok.x-k8s.io/delay": "3600000"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}}}}}}
	if _, err := kube.BatchV1().Jobs("nlp").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Run(ctx, Options{DataDir: t.TempDir(), As: "alice", LogFile: "-", Stderr: &out, Stdout: &out,
		Stdin:   strings.NewReader("/gpu request 8xh100 for 1h\n/gpu track nlp/ci-eval\n/gpu status\n"),
		Cluster: ClusterOptions{Kubeconfig: env.Kubeconfig}})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"r1 running on h100-", "Tracking nlp/ci-eval as r2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output lacks %q:\n%s", want, out.String())
		}
	}
	jobs, err := kube.BatchV1().Jobs("nlp").List(ctx, metav1.ListOptions{LabelSelector: "gpubot.io/request"})
	if err != nil || len(jobs.Items) != 2 {
		t.Errorf("%d gpubot Jobs in nlp (%v), want 2 (r1 and the tracked one)", len(jobs.Items), err)
	}
}
