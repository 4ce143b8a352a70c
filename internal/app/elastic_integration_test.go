package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpubot/gpubot/bot/slack/slackfake"
	"github.com/gpubot/gpubot/internal/app"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// Elastic capacity end to end on the real Kueue v0.17 with its
// ProvisioningRequest admission check (the autoscaling.x-k8s.io CRD is
// installed, so Kueue runs the check's controller) and the shipped
// deploy/kueue/setup.yaml. The test plays the cluster autoscaler, the one
// part that cannot run here: it adds and removes kwok nodes and sets the
// ProvisioningRequests' Provisioned and Failed conditions. Everything
// else is real: Kueue admits, evicts and retries; kube-scheduler places
// the pods; gpubot follows.

var provReqs = schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1", Resource: "provisioningrequests"}

// elasticCluster is a small real cluster for the example configuration:
// two reserved h100 nodes, one spot node, no provisioned nodes yet.
type elasticCluster struct {
	t    *testing.T
	ctx  context.Context
	env  *k8senv.Env
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func startElasticCluster(t *testing.T) *elasticCluster {
	t.Helper()
	if k8senv.Skipped() || testing.Short() {
		t.Skipf("integration test: needs the cached Kubernetes binaries (unset %s and drop -short)", k8senv.SkipEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	env, err := k8senv.Start(ctx, k8senv.Options{Nodes: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	if _, err := k8senv.ApplyFile(ctx, env.Config, filepath.Join("..", "..", "deploy", "kueue", "setup.yaml"), ""); err != nil {
		t.Fatal(err)
	}
	c := &elasticCluster{t: t, ctx: ctx, env: env, kube: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config)}
	// Retry a failed provisioning after a second, not Kueue's default
	// minute: the operator's ProvisioningRequestConfig, changed for speed.
	kq := kueueclient.NewForConfigOrDie(env.Config)
	patch := []byte(`{"spec":{"retryStrategy":{"backoffLimitCount":3,"backoffBaseSeconds":1,"backoffMaxSeconds":2}}}`)
	if _, err := kq.KueueV1beta2().ProvisioningRequestConfigs().Patch(ctx, "dws-h100", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.addNodes("h100", "h100-1", "h100-2")
	c.addNodes("h100-spot", "spot-1")
	if err := k8senv.WaitClusterQueuesActive(ctx, kq); err != nil {
		t.Fatal(err)
	}
	return c
}

// addNodes is the autoscaler adding nodes of flavor: its ResourceFlavor's
// labels, the topology labels, and its tolerations as taints.
func (c *elasticCluster) addNodes(flavor string, names ...string) {
	c.t.Helper()
	rf, err := kueueclient.NewForConfigOrDie(c.env.Config).KueueV1beta2().ResourceFlavors().Get(c.ctx, flavor, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var nodes []k8senv.FakeNode
	for _, n := range names {
		labels := map[string]string{"cloud.google.com/gce-topology-block": "b-" + flavor, "cloud.google.com/gce-topology-subblock": "r-" + flavor}
		for k, v := range rf.Spec.NodeLabels {
			labels[k] = v
		}
		nodes = append(nodes, k8senv.FakeNode{Name: n, GPUs: 8, Labels: labels, Taints: k8senv.TaintsFor(rf)})
	}
	if err := k8senv.CreateFakeNodes(c.ctx, c.kube, nodes); err != nil {
		c.t.Fatal(err)
	}
	all, err := c.kube.CoreV1().Nodes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := k8senv.WaitNodesReady(c.ctx, c.kube, len(all.Items)); err != nil {
		c.t.Fatal(err)
	}
}

// provisioningRequest waits for the ProvisioningRequest in ns of request
// id's workload whose name ends with the attempt ("-1", "-2") and returns
// it.
func (c *elasticCluster) provisioningRequest(ns string, attempt int, id string) *unstructured.Unstructured {
	c.t.Helper()
	var found *unstructured.Unstructured
	// Kueue requeues a workload whose provisioning failed once its back-off
	// is over and its queue is next looked at, which can take a minute.
	err := wait.PollUntilContextTimeout(c.ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.dyn.Resource(provReqs).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i := range l.Items {
			if name := l.Items[i].GetName(); strings.HasPrefix(name, "job-gpubot-"+id+"-") && strings.HasSuffix(name, fmt.Sprintf("-%d", attempt)) {
				found = &l.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		c.t.Fatalf("waiting for ProvisioningRequest attempt %d in %s: %v", attempt, ns, err)
	}
	return found
}

// setCondition is the autoscaler's answer to a ProvisioningRequest:
// condition typ (Provisioned, Failed) True with reason and message.
func (c *elasticCluster) setCondition(pr *unstructured.Unstructured, typ, reason, msg string) {
	c.t.Helper()
	cond := map[string]any{"type": typ, "status": "True", "reason": reason, "message": msg,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": pr.GetGeneration()}
	if typ == "Provisioned" {
		// A provisioned request is also accepted.
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "accepted", "lastTransitionTime": cond["lastTransitionTime"], "observedGeneration": pr.GetGeneration()},
			cond}}})
		c.patchStatus(pr, patch)
		return
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{cond}}})
	c.patchStatus(pr, patch)
}

func (c *elasticCluster) patchStatus(pr *unstructured.Unstructured, patch []byte) {
	c.t.Helper()
	if _, err := c.dyn.Resource(provReqs).Namespace(pr.GetNamespace()).Patch(c.ctx, pr.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		c.t.Fatalf("setting %s's status: %v", pr.GetName(), err)
	}
}

// podNodes waits until every pod of the request's Job runs on a node
// whose name starts with prefix, and returns the nodes.
func (c *elasticCluster) podNodes(ns, id, prefix string) []string {
	c.t.Helper()
	var nodes []string
	err := wait.PollUntilContextTimeout(c.ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "gpubot.io/request=" + id})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		nodes = nil
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || !strings.HasPrefix(p.Spec.NodeName, prefix) {
				return false, nil
			}
			nodes = append(nodes, p.Spec.NodeName)
		}
		return true, nil
	})
	if err != nil {
		c.t.Fatalf("waiting for %s's pods to run on %s* nodes: %v (last: %v)", id, prefix, err, nodes)
	}
	return nodes
}

// console runs gpubot's console on the cluster with the example
// configuration whose Jobs run for an hour.
type console struct {
	t    *testing.T
	ctx  context.Context
	in   *io.PipeWriter
	out  syncBuffer
	log  syncBuffer
	done chan error
	// dump describes the cluster's state when a wait fails.
	dump func() string
}

func startConsole(t *testing.T, c *elasticCluster) *console {
	stdin, typed := io.Pipe()
	k := &console{t: t, ctx: c.ctx, in: typed, done: make(chan error, 1), dump: c.dump}
	cfg := exampleConfig(t, longRunningJobs())
	go func() {
		k.done <- app.Run(c.ctx, app.Options{ConfigPath: cfg, DataDir: t.TempDir(), As: "bob", LogFile: "-", Stderr: &k.log, Stdout: &k.out, Stdin: stdin,
			Cluster: app.ClusterOptions{Kubeconfig: c.env.Kubeconfig, SweepEvery: time.Second}})
	}()
	return k
}

func (k *console) say(line string) {
	k.t.Helper()
	if _, err := io.WriteString(k.in, line+"\n"); err != nil {
		k.t.Fatal(err)
	}
}

// wait waits until the console output has every phrase, in order, after
// from (an offset into the output); it returns the offset after the last.
func (k *console) wait(from int, phrases ...string) int {
	k.t.Helper()
	at := from
	// Kueue requeues evicted and retried work on its own schedule: allow
	// it minutes, not seconds.
	err := wait.PollUntilContextTimeout(k.ctx, 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		s := k.out.String()
		at = from
		for _, p := range phrases {
			i := strings.Index(s[at:], p)
			if i < 0 {
				return false, nil
			}
			at += i + len(p)
		}
		return true, nil
	})
	if err != nil {
		state := ""
		if k.dump != nil {
			state = k.dump()
		}
		k.t.Fatalf("waiting for %q: %v\nconsole:\n%s\nlog:\n%s\ncluster:\n%s", phrases, err, k.out.String()[from:], k.log.String(), state)
	}
	return at
}

// waitAll waits until the output after from has every phrase, in any
// order; it returns the offset after the last of them.
func (k *console) waitAll(from int, phrases ...string) int {
	k.t.Helper()
	at := from
	for _, p := range phrases {
		at = max(at, k.wait(from, p))
	}
	return at
}

func (k *console) stop() string {
	k.t.Helper()
	if err := k.in.Close(); err != nil {
		k.t.Fatal(err)
	}
	if err := <-k.done; err != nil {
		k.t.Fatalf("Run: %v\n%s", err, k.log.String())
	}
	return k.out.String()
}

// TestElasticOnARealCluster: in the console, a request that would wait
// hours for reserved h100s is offered spot and DWS with start and cost;
// the Switch click moves it to spot, where Kueue admits it onto the spot
// node; the autoscaler takes the spot node away mid-run, Kueue evicts it,
// and its owner is told and it is requeued with a new estimate, then
// admitted again when a spot node comes back. Another is switched to DWS:
// Kueue asks for nodes (ProvisioningRequest), the autoscaler fails the
// first attempt, Kueue retries, the autoscaler provisions two nodes, and
// Kueue admits it onto them; the thread tells each step in plain words.
// Then the autoscaler takes those nodes back (CapacityRevoked) and Kueue
// stops it, which the thread and its owner are told. Another's provisioned
// nodes lose their booking before Kueue admits it (BookingExpired): Kueue
// retries, and the thread says why. A team with too little budget left
// sees DWS without a button, and why.
func TestElasticOnARealCluster(t *testing.T) {
	c := startElasticCluster(t)
	k := startConsole(t, c)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("console:\n%s\ncluster:\n%s", k.out.String(), c.dump())
		}
	})

	// bob fills the two reserved nodes for 10 hours.
	k.say("/gpu request 16xh100 for 10h")
	at := k.wait(0, "r1 running on h100-")

	// alice's 8 GPUs would wait for them.
	k.say(":as alice")
	k.say("/gpu request 8xh100 for 2h")
	at = k.wait(at, "r2 queued", "Sooner on elastic capacity:",
		"h100-spot (spot): now, may be reclaimed, ≈ $51 (16 GPU-hours), runs at most 1d",
		"h100-dws (provisioned): in about 20m (assumed: no provisioning seen yet), ≈ $86 (16 GPU-hours), runs at most 7d",
		"[", "] Switch to h100-spot")
	k.say(":click Switch to h100-spot r2")
	// Kueue admits the switched Job while the switch's API call returns;
	// the switch's words were sent before the call (SetOrderedDelivery), so
	// they come first.
	at = k.wait(at, "Switched to h100-spot (spot) by alice", "Admitted")
	if nodes := c.podNodes("nlp", "r2", "spot-"); len(nodes) != 1 {
		t.Errorf("r2 runs on %v, want the one spot node", nodes)
	}

	// The spot node goes away: Kueue evicts r2, gpubot tells alice.
	if err := c.kube.CoreV1().Nodes().Delete(c.ctx, "spot-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The thread gives Kueue's reason when the bridge's event brings it
	// first, or says the cluster did not say why when gpubot's own
	// reconciliation saw the requeue first; either way alice is told.
	before := at
	at = k.wait(at, "spot nodes", "it is queued again on h100-spot. A new estimate follows.")
	k.wait(before, "Your request r2 ", " spot nodes after running", "queued again on h100-spot")
	c.addNodes("h100-spot", "spot-2")
	at = k.wait(at, "r2", "Admitted")
	c.podNodes("nlp", "r2", "spot-2")

	// bob switches a request of his to DWS.
	k.say(":as bob")
	k.say("/gpu request 16xh100 for 2h")
	at = k.wait(at, "r3 queued", "h100-dws (provisioned)")
	k.say("/gpu switch r3 h100-dws")
	at = k.wait(at, "Switched to h100-dws (provisioned) by bob", "Kueue asked the cluster autoscaler for 2 nodes of h100-dws (admission check dws-h100)")
	pr := c.provisioningRequest("nlp", 1, "r3")
	c.setCondition(pr, "Failed", "OutOfResources", "no H100 capacity in the zone")
	at = k.wait(at, "Provisioning failed (attempt 1): no H100 capacity in the zone")
	pr = c.provisioningRequest("nlp", 2, "r3")
	at = k.wait(at, "Provisioning again, attempt 2")
	c.addNodes("h100-dws", "dws-1", "dws-2")
	c.setCondition(pr, "Provisioned", "Provisioned", "provisioned 2 nodes")
	at = k.wait(at, "Provisioned after", "the h100-dws nodes are there", "Admitted")
	if nodes := c.podNodes("nlp", "r3", "dws-"); len(nodes) != 2 {
		t.Errorf("r3 runs on %v, want both provisioned nodes", nodes)
	}

	// The autoscaler takes r3's nodes back (CapacityRevoked): Kueue
	// rejects the check and stops r3; bob is told.
	c.setCondition(pr, "CapacityRevoked", "CapacityRevoked", "the zone reclaimed the capacity")
	for _, n := range []string{"dws-1", "dws-2"} {
		if err := c.kube.CoreV1().Nodes().Delete(c.ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	at = k.waitAll(at, "The cluster autoscaler took its h100-dws nodes back after it started (capacity revoked: the zone reclaimed the capacity)", "Your request r3 lost its h100-dws nodes")

	// r4's nodes are provisioned, but their booking expires before Kueue
	// admits it: Kueue retries, and the thread says what happened.
	k.say("/gpu request 8xh100 for 1h")
	at = k.wait(at, "r4 queued", "h100-dws (provisioned)")
	k.say("/gpu switch r4 h100-dws")
	at = k.wait(at, "Switched to h100-dws (provisioned) by bob", "Kueue asked the cluster autoscaler for 1 node of h100-dws")
	pr = c.provisioningRequest("nlp", 1, "r4")
	c.setCondition(pr, "BookingExpired", "BookingExpired", "the nodes were not used within 10 minutes")
	at = k.wait(at, "Provisioning failed (attempt 1): its nodes were provisioned, but their booking expired before Kueue admitted it (the nodes were not used within 10 minutes)")
	c.provisioningRequest("nlp", 2, "r4")
	at = k.wait(at, "Provisioning again, attempt 2")

	// speech has $500 a week: 8 GPUs for 16h on DWS ($691) is over it.
	k.say(":as grace")
	k.say("/gpu request 8xh100 for 16h")
	k.wait(at, "r5 queued", "h100-dws (provisioned): ", "— not available: over speech's elastic budget: $0 of $500 a week used or committed, this needs $691")
	k.say("/gpu switch r5 h100-dws")
	k.wait(at, "r5 cannot switch to h100-dws: over speech's elastic budget")

	all := k.stop()
	t.Logf("console:\n%s", all)
	for _, never := range []string{"Switch to h100-dws] ", "panic"} {
		if strings.Contains(all[strings.Index(all, "grace> /gpu request"):], never) {
			t.Errorf("grace's part of the console says %q", never)
		}
	}
}

// slackButton finds the button on m whose value names the request and arg.
func slackButton(t testing.TB, m slackfake.Message, verb, value string) button {
	t.Helper()
	var blocks []struct {
		BlockID  string `json:"block_id"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
		t.Fatal(err)
	}
	for _, bl := range blocks {
		for _, e := range bl.Elements {
			if e.Type == "button" && strings.HasPrefix(e.ActionID, "gpubot:"+verb) && e.Value == value {
				return button{e.ActionID, bl.BlockID, e.Value}
			}
		}
	}
	return button{}
}

// TestElasticOnSlackOnARealCluster: the same offer in Slack, on the card:
// Switch buttons for what may be taken, none for what is over budget
// (with why, as text); the click switches the request to spot, where the
// real Kueue admits it onto the spot node.
func TestElasticOnSlackOnARealCluster(t *testing.T) {
	c := startElasticCluster(t)
	fake := startFake(t)
	b := runSlackBot(t, fake, t.TempDir(), exampleConfig(t, fastPosting+longRunningJobs()), nil, app.ClusterOptions{Kubeconfig: c.env.Kubeconfig})
	b.command("U0BOB", chRandom, "request 16xh100 for 10h")
	b.waitFor("r1 to run", func() bool { return strings.Contains(b.card(chNLP, "r1").Text, "r1 running on h100-") })

	b.command("U0GRACE", chRandom, "request 8xh100 for 16h")
	var card slackfake.Message
	b.waitFor("r2's card to offer elastic capacity", func() bool {
		card = b.card("#gpu", "r2")
		return strings.Contains(string(card.Blocks), "Sooner on elastic capacity")
	})
	blocks := string(card.Blocks)
	for _, want := range []string{"h100-spot (spot): now, may be reclaimed, ≈ $410 (128 GPU-hours)", "not available: over speech's elastic budget"} {
		if !strings.Contains(blocks, want) {
			t.Errorf("r2's card lacks %q:\n%s", want, blocks)
		}
	}
	if bt := slackButton(t, card, "switch", "r2|h100-dws"); bt.actionID != "" {
		t.Errorf("the over-budget DWS option has a button: %+v", bt)
	}
	bt := slackButton(t, card, "switch", "r2|h100-spot")
	if bt.actionID == "" {
		t.Fatalf("no Switch to h100-spot button on r2's card:\n%s", blocks)
	}
	env := fake.ClickButton("U0GRACE", card.Channel, card.TS, bt.actionID, bt.blockID, bt.value)
	if _, err := fake.WaitAck(waitCtx(t), env); err != nil {
		t.Fatal(err)
	}
	// Kueue admits the switched Job while the switch's API call returns;
	// the switch's words were sent before the call (SetOrderedDelivery), so
	// they come first.
	b.threadHas(card, "Switched to h100-spot (spot) by grace", "Admitted")
	b.ephemeral("U0GRACE", "Switched r2 to h100-spot.")
	nodes := c.podNodes("speech", "r2", "spot-")
	if len(nodes) != 1 {
		t.Errorf("r2's pods run on %v, want one pod on the spot node", nodes)
	}
	noUnacked(t, fake)
}

// dump describes gpubot's Jobs and their Workloads, for failure messages.
func (c *elasticCluster) dump() string {
	var b strings.Builder
	kq := kueueclient.NewForConfigOrDie(c.env.Config)
	for _, ns := range []string{"nlp", "vision", "speech"} {
		jobs, _ := c.kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
		for _, j := range jobs.Items {
			fmt.Fprintf(&b, "job %s/%s suspend=%v nodeSelector=%v affinity=%+v\n", ns, j.Name, *j.Spec.Suspend, j.Spec.Template.Spec.NodeSelector, j.Spec.Template.Spec.Affinity)
		}
		wls, _ := kq.KueueV1beta2().Workloads(ns).List(context.Background(), metav1.ListOptions{})
		for _, w := range wls.Items {
			fmt.Fprintf(&b, "workload %s/%s admission=%+v checks=%+v\n", ns, w.Name, w.Status.Admission, w.Status.AdmissionChecks)
			for _, cnd := range w.Status.Conditions {
				fmt.Fprintf(&b, "  %s=%s %s: %s\n", cnd.Type, cnd.Status, cnd.Reason, cnd.Message)
			}
		}
	}
	return b.String()
}
