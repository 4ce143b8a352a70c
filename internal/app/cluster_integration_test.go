package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/app"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// exampleCluster is the cluster the bundled example describes, for real:
// an API server and Kueue with deploy/kueue/setup.yaml applied, and the
// example's nodes on kwok (with kube-controller-manager and
// kube-scheduler, so that pods run).
type exampleCluster struct {
	env  *k8senv.Env
	kube kubernetes.Interface
}

// startExampleCluster starts an example cluster for one test, with every
// node ready (k8senv's Example waits for them), and stops it when the test ends. It skips the test with
// GPUBOT_SKIP_K8S=1 or -short. Each test gets its own cluster: gpubot's
// Jobs are named after request IDs, which every fresh data directory
// starts again.
func startExampleCluster(t *testing.T) *exampleCluster {
	t.Helper()
	if k8senv.Skipped() || testing.Short() {
		t.Skipf("integration test: needs the cached Kubernetes binaries (unset %s and drop -short)", k8senv.SkipEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	env, err := k8senv.Start(ctx, k8senv.Options{Nodes: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Example(ctx, filepath.Join("..", "..", "deploy", "kueue", "setup.yaml"), standingNodes(cfg)); err != nil {
		t.Fatal(err)
	}
	t.Logf("example cluster ready in %s", time.Since(began).Round(100*time.Millisecond))
	return &exampleCluster{env: env, kube: kubernetes.NewForConfigOrDie(env.Config)}
}

// job waits until the Job ns/name exists and cond holds for it, and
// returns it; what says what for the failure message.
func (c *exampleCluster) job(t *testing.T, ns, name, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	var got *batchv1.Job
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		j, err := c.kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = j
		return cond(j), nil
	})
	if err != nil {
		t.Fatalf("waiting for Job %s/%s %s: %v (last seen: %+v)", ns, name, what, err, got)
	}
	return got
}

// unsuspended reports whether Kueue admitted the Job: it unsuspends it.
func unsuspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && !*j.Spec.Suspend }

// TestConsoleOnARealCluster runs gpubot as a user would with
// --kubeconfig: the bundled example configuration against a real API
// server and Kueue with deploy/kueue/setup.yaml and the example's nodes
// on kwok. A request is admitted by Kueue at once, and a Job submitted
// with kubectl is tracked.
func TestConsoleOnARealCluster(t *testing.T) {
	c := startExampleCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ci-eval", Namespace: "nlp", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "nlp"}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: k8senv.RunFor(time.Hour)},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}}}}}}
	if _, err := c.kube.BatchV1().Jobs("nlp").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The log and the console write from different goroutines.
	var out lockedBuffer
	err := app.Run(ctx, app.Options{DataDir: t.TempDir(), As: "alice", LogFile: "-", Stderr: &out, Stdout: &out,
		Stdin:   strings.NewReader("/gpu request 8xh100 for 1h\n/gpu track nlp/ci-eval\n/gpu status\n/gpu digest\n/gpu report\n"),
		Cluster: app.ClusterOptions{Kubeconfig: c.env.Kubeconfig}})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	// The digests read the real cluster (nothing happened yesterday on a
	// new one).
	for _, want := range []string{"r1 running on h100-", "Tracking nlp/ci-eval as r2", "Daily digest for the cluster, ", "Weekly report, "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output lacks %q:\n%s", want, out.String())
		}
	}
	jobs, err := c.kube.BatchV1().Jobs("nlp").List(ctx, metav1.ListOptions{LabelSelector: "gpubot.io/request"})
	if err != nil || len(jobs.Items) != 2 {
		t.Errorf("%d gpubot Jobs in nlp (%v), want 2 (r1 and the tracked one)", len(jobs.Items), err)
	}

	// A data directory of the simulated cluster, with queued requests, is
	// refused on the real cluster before anything is submitted there.
	simDir := t.TempDir()
	if err := app.Run(ctx, app.Options{DataDir: simDir, As: "dave", LogFile: "-", Stderr: io.Discard, Stdout: io.Discard,
		Stdin: strings.NewReader("/gpu request 16xh100 for 1h\n")}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = app.Run(ctx, app.Options{DataDir: simDir, LogFile: "-", Stderr: &out, Stdout: &out, Stdin: strings.NewReader("/gpu status\n"),
		Cluster: app.ClusterOptions{Kubeconfig: c.env.Kubeconfig}})
	if !errors.Is(err, app.ErrOtherCluster) || !strings.Contains(err.Error(), "holds the requests of the simulated cluster") {
		t.Errorf("the simulated cluster's data directory on a real cluster: %v, want ErrOtherCluster", err)
	}
	after, err := c.kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{LabelSelector: "gpubot.io/request"})
	if err != nil || len(after.Items) != len(jobs.Items) {
		t.Errorf("after the refusal there are %d gpubot Jobs (%v), want still %d", len(after.Items), err, len(jobs.Items))
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

// TestSlackOnARealCluster runs gpubot on (fake) Slack against a real API
// server and Kueue, as deployed: the bundled example configuration, its
// channels by name, --kubeconfig and --http-addr. /readyz says ready once
// the cluster's caches are synced and Slack is connected; a member's
// request is posted in the team's channel and admitted by Kueue; a
// request that needs approval has no Job until the lead approves it
// (someone else's click is refused in private), then Kueue admits it; a
// Job that completes on its own is reported as such. Every envelope is
// acked in time, and the cards' updates use the channel ID Slack answered.
func TestSlackOnARealCluster(t *testing.T) {
	c := startExampleCluster(t)
	began := time.Now()
	fake := startFake(t)
	addr := freeAddr(t)
	b := runSlackBot(t, fake, t.TempDir(), exampleConfig(t, fastPosting+longRunningJobs()), nil,
		app.ClusterOptions{Kubeconfig: c.env.Kubeconfig, HTTPAddr: addr})

	var readyz string
	b.waitFor("/readyz to say ready", func() bool {
		code, body := httpGet(addr, "/readyz")
		readyz = body
		return code == http.StatusOK
	})
	if strings.TrimSpace(readyz) != "ok" {
		t.Errorf("/readyz when ready: %q", readyz)
	}

	// A member's request within the team's quota: Kueue admits it at once.
	// Its template (dev-box) has no manifest, so it is the bridge's default
	// Job, whose pod kwok completes within seconds: the thread says that its
	// Job completed, not that its time was up.
	b.command("U0ALICE", chRandom, `request 8xh100 for 1h template dev-box reason "smoke test"`)
	r1 := b.card(chNLP, "r1")
	if r1.Channel != fake.ChannelID(chNLP) {
		t.Errorf("card in %s, want %s's ID %s", r1.Channel, chNLP, fake.ChannelID(chNLP))
	}
	b.ephemeral("U0ALICE", "Updates follow in its thread")
	j1 := c.job(t, "nlp", "gpubot-r1", "admitted by Kueue", unsuspended)
	if q := j1.Labels["kueue.x-k8s.io/queue-name"]; q != "nlp" {
		t.Errorf("gpubot-r1's queue %q, want nlp", q)
	}
	b.waitFor("r1's card or thread to say Kueue admitted it", func() bool {
		return strings.Contains(b.card(chNLP, "r1").Text, "r1 running on h100-") ||
			inOrder(texts(fake.Thread(r1.Channel, r1.TS)), []string{"Admitted at once on h100-"})
	})

	// High priority needs the lead's approval: no Job, and no quota, until then.
	b.command("U0ALICE", chRandom, `request 8xh100 for 1h priority high reason "deadline"`)
	r2 := b.card(chNLP, "r2")
	if !strings.Contains(r2.Text, "needs approval") {
		t.Fatalf("r2's card: %q", r2.Text)
	}
	b.ephemeral("U0ALICE", "r2 needs approval")
	if _, err := c.kube.BatchV1().Jobs("nlp").Get(context.Background(), "gpubot-r2", metav1.GetOptions{}); err == nil {
		t.Error("gpubot-r2 exists before it was approved")
	}
	b.click("U0ALICE", r2, "approve")
	b.ephemeral("U0ALICE", "Only bob")
	b.click("U0BOB", r2, "approve")
	b.threadHas(r2, "Approved by bob.")
	b.ephemeral("U0BOB", "Approved r2.")
	c.job(t, "nlp", "gpubot-r2", "admitted by Kueue", unsuspended)
	b.waitFor("r2's card to say it runs", func() bool { return strings.Contains(b.card(chNLP, "r2").Text, "r2 running on h100-") })
	b.threadHas(r2, "Approved by bob.", "Its pod is running.")
	b.threadHas(r1, "and its Job completed;")
	b.waitFor("r1's card to say it finished", func() bool { return strings.HasPrefix(b.card(chNLP, "r1").Text, "r1 finished") })

	t.Logf("r1's thread: %q", texts(fake.Thread(r1.Channel, r1.TS)))
	t.Logf("r2's thread: %q", texts(fake.Thread(r2.Channel, r2.TS)))
	noUnacked(t, fake)

	_, metrics := httpGet(addr, "/metrics")
	for _, m := range []string{`gpubot_kubernetes_api_request_duration_seconds_count{code="201",method="POST"}`,
		`gpubot_slack_api_request_duration_seconds_count{method="chat.update"}`, `gpubot_requests{state="running"} 1`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	// Slack gone: not ready, though the cluster is fine.
	fake.Close()
	b.waitFor("/readyz to say not ready", func() bool {
		code, body := httpGet(addr, "/readyz")
		readyz = body
		return code == http.StatusServiceUnavailable
	})
	if !strings.Contains(readyz, "Slack not connected") || strings.Contains(readyz, "Kubernetes") {
		t.Errorf("/readyz without Slack: %q", readyz)
	}
	t.Logf("gpubot on Slack and the cluster: %s", time.Since(began).Round(100*time.Millisecond))
}

// longRunningJobs makes the pods of the default template run for an hour
// on kwok, as real work would, instead of completing at once.
func longRunningJobs() string {
	var annotations []string
	for k, v := range k8senv.RunFor(time.Hour) {
		annotations = append(annotations, fmt.Sprintf("%s: %q", k, v))
	}
	sort.Strings(annotations)
	return `kubernetes:
  jobTemplates:
    default:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          metadata:
            annotations: {` + strings.Join(annotations, ", ") + `}
          spec:
            restartPolicy: Never
            containers: [{name: main, image: registry.k8s.io/pause:3.10}]
`
}

// standingNodes are the configuration's simulated nodes that a cluster
// has before anything is provisioned: all but the provisioned flavors'.
func standingNodes(cfg *config.Config) []allocator.Node {
	provisioned := map[string]bool{}
	for _, t := range cfg.Settings().Elastic.Flavors {
		provisioned[t.Flavor] = t.Capacity == commands.CapacityProvisioned
	}
	var out []allocator.Node
	for _, n := range cfg.Cluster().Nodes {
		if !provisioned[n.Flavor] {
			out = append(out, n)
		}
	}
	return out
}
