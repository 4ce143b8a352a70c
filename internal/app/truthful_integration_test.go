package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpubot/gpubot/internal/app"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// syncBuffer is a goroutine-safe output.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.WriteString(string(p))
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTruthfulOnGPUOperatorNodes is issue 10's report, replayed: the
// real Kueue with the shipped setup (which selects GKE's accelerator
// label) on four 8-GPU nodes that carry the NVIDIA GPU operator's label
// instead. gpubot's capacity comes from the cluster (no flavor has a
// node), the nodes are reported as matching no flavor (in /gpu capacity,
// the log and /readyz), and a request Kueue cannot admit is answered
// "will not start as it is" with Kueue's reason, never "next in line"
// or an empty list of victims.
func TestTruthfulOnGPUOperatorNodes(t *testing.T) {
	if k8senv.Skipped() || testing.Short() {
		t.Skipf("integration test: needs the cached Kubernetes binaries (unset %s and drop -short)", k8senv.SkipEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env, err := k8senv.Start(ctx, k8senv.Options{Nodes: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	if _, err := k8senv.ApplyFile(ctx, env.Config, filepath.Join("..", "..", "deploy", "kueue", "setup.yaml"), ""); err != nil {
		t.Fatal(err)
	}
	var nodes []k8senv.FakeNode
	for i := 1; i <= 4; i++ {
		nodes = append(nodes, k8senv.FakeNode{Name: fmt.Sprintf("h200-%d", i), GPUs: 8, Labels: map[string]string{
			"nvidia.com/gpu.product": "NVIDIA-H200", "cloud.google.com/gce-topology-block": "b1", "cloud.google.com/gce-topology-subblock": "r1"}})
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if err := k8senv.CreateFakeNodes(ctx, kube, nodes); err != nil {
		t.Fatal(err)
	}
	if err := k8senv.WaitNodesReady(ctx, kube, 4); err != nil {
		t.Fatal(err)
	}
	// Else Kueue may answer the request "ClusterQueue nlp is inactive",
	// true for that moment but not the answer this test is about.
	if err := k8senv.WaitClusterQueuesActive(ctx, kueueclient.NewForConfigOrDie(env.Config)); err != nil {
		t.Fatal(err)
	}

	stdin, typed := io.Pipe()
	var out, log syncBuffer
	addr := freeAddr(t)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{DataDir: t.TempDir(), As: "alice", LogFile: "-", Stderr: &log, Stdout: &out, Stdin: stdin,
			Cluster: app.ClusterOptions{Kubeconfig: env.Kubeconfig, HTTPAddr: addr, SweepEvery: time.Second}})
	}()
	waitOut := func(what string, cond func(string) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return cond(out.String()), nil })
		if err != nil {
			t.Fatalf("waiting for %s: %v\noutput:\n%s\nlog:\n%s", what, err, out.String(), log.String())
		}
	}
	say := func(line string) {
		t.Helper()
		if _, err := io.WriteString(typed, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}

	say("/gpu capacity")
	waitOut("the capacity", func(s string) bool { return strings.Contains(s, "match no ResourceFlavor") })
	say("/gpu request 8xh100 for 1h team nlp")
	waitOut("Kueue's word on r1", func(s string) bool { return strings.Contains(s, "r1 will not start as it is") })
	say("/gpu queue")
	waitOut("the queue", func(s string) bool { return strings.Contains(s, "waiting in the cluster") })
	say("/gpu status r1")
	waitOut("r1's card", func(s string) bool { return strings.Count(s, "Kueue's message:") >= 2 })

	code, readyz := httpGet(addr, "/readyz")
	if code != http.StatusOK {
		t.Errorf("/readyz: %d %q", code, readyz)
	}
	if err := typed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	all := out.String()
	t.Logf("console:\n%s", all)
	for _, want := range []string{
		"h100       0      0     0     0",
		"4 GPU nodes match no ResourceFlavor: labels nvidia.com/gpu.product=NVIDIA-H200 (h200-1, h200-2, …); the flavors select cloud.google.com/gke-accelerator=nvidia-a100-80gb (a100), cloud.google.com/gke-accelerator=nvidia-h100-80gb (h100)",
		"h100 has no nodes, and its teams have 128 GPUs of nominal quota on it",
		"Quota without nodes is a real state",
		"flavor h100 has no nodes, and Kueue's topology-aware scheduling admits only onto nodes that exist",
		"Kueue's message: QuotaReserved=False (Pending): couldn't assign flavors to pod set main:",
		"will not start as it is",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the console lacks %q", want)
		}
	}
	for _, never := range []string{"next in line", "preempting ;", "any moment now", "h100-b1-r1-n1", "does not match flavor a100"} {
		if strings.Contains(all, never) {
			t.Errorf("the console says %q", never)
		}
	}
	for _, want := range []string{"unmatched nodes: 4 GPU nodes match no ResourceFlavor", "flavor h100 has no nodes"} {
		if !strings.Contains(readyz, want) {
			t.Errorf("/readyz lacks %q:\n%s", want, readyz)
		}
	}
	if n := strings.Count(log.String(), `msg="GPU nodes match no ResourceFlavor`); n != 1 {
		t.Errorf("the log says %d times that GPU nodes match no ResourceFlavor, want once:\n%s", n, log.String())
	}
}
