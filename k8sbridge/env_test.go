package k8sbridge_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// env is the control plane shared by the integration tests; nil when they
// are skipped.
var env *k8senv.Env

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	// The fidelity scenarios mostly wait for Kueue and for the next
	// second; run more of them at once than there are cores, unless
	// -parallel says otherwise.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "6")
	}
	if k8senv.Skipped() || testing.Short() {
		return m.Run()
	}
	ctx := context.Background()
	start := time.Now()
	e, err := k8senv.Start(ctx, k8senv.Options{Nodes: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "k8sbridge integration: %v\n(set %s=1 to skip the integration tests)\n", err, k8senv.SkipEnv)
		return 1
	}
	defer e.Stop()
	fmt.Fprintf(os.Stderr, "k8sbridge integration: control plane, Kueue and kwok ready in %s\n", time.Since(start).Round(100*time.Millisecond))
	env = e
	if err := sharedObjects(ctx, e); err != nil {
		fmt.Fprintf(os.Stderr, "k8sbridge integration: %v\n", err)
		return 1
	}
	code := m.Run()
	if fsEnv != nil {
		fsEnv.Stop()
	}
	return code
}

// The Fair Sharing control plane: a second one, whose Kueue runs with
// fairSharing on (Kueue's default strategies), started by the first
// scenario that needs it and stopped at the end.
var (
	fsOnce sync.Once
	fsEnv  *k8senv.Env
	fsErr  error
)

// fairSharingEnv returns the Fair Sharing control plane.
func fairSharingEnv(t *testing.T) *k8senv.Env {
	t.Helper()
	needEnv(t)
	fsOnce.Do(func() {
		ctx := context.Background()
		start := time.Now()
		fsEnv, fsErr = k8senv.Start(ctx, k8senv.Options{Nodes: true, ManagerConfig: map[string]any{
			"fairSharing": map[string]any{"preemptionStrategies": []any{"LessThanOrEqualToFinalShare", "LessThanInitialShare"}}}})
		if fsErr == nil {
			fsErr = sharedObjects(ctx, fsEnv)
			fmt.Fprintf(os.Stderr, "k8sbridge integration: the Fair Sharing control plane ready in %s\n", time.Since(start).Round(100*time.Millisecond))
		}
	})
	if fsErr != nil {
		t.Fatalf("starting the Fair Sharing control plane: %v", fsErr)
	}
	return fsEnv
}

var priorities = map[string]int32{"low": 100, "normal": 200, "high": 500}

func sharedObjects(ctx context.Context, e *k8senv.Env) error {
	kq := kueueclient.NewForConfigOrDie(e.Config)
	for name, v := range priorities {
		_, err := kq.KueueV1beta2().WorkloadPriorityClasses().Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
	}
	return createTopology(ctx, kq)
}

func needEnv(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skipf("integration test: needs the cached Kubernetes binaries (unset %s and drop -short)", k8senv.SkipEnv)
	}
}

var scenarioN atomic.Int32

// scenario is one integration test's corner of the shared cluster: its
// own flavors, ClusterQueues, namespaces and bridge.
type scenario struct {
	t      *testing.T
	e      *k8senv.Env
	ctx    context.Context
	p      string // prefix making names unique
	kube   kubernetes.Interface
	kueue  kueueclient.Interface
	cfg    k8sbridge.Config
	bridge *k8sbridge.Bridge
	cancel context.CancelFunc

	mu     sync.Mutex
	events []allocator.Event
}

type teamSpec struct {
	name       string
	cohort     string
	quotas     []flavorQuota
	preemption *kueue.ClusterQueuePreemption
	// mutate changes the ClusterQueue before it is created.
	mutate func(*kueue.ClusterQueueSpec)
	// inactive: Kueue is not expected to make the ClusterQueue active.
	inactive bool
}

type flavorQuota struct {
	flavor             string
	nominal            int64
	borrowing, lending *int64
}

func newScenario(t *testing.T, flavors map[string]int, teams ...teamSpec) *scenario {
	t.Helper()
	needEnv(t)
	return newScenarioOn(t, env, flavors, teams...)
}

// newScenarioOn is newScenario on control plane e.
func newScenarioOn(t *testing.T, e *k8senv.Env, flavors map[string]int, teams ...teamSpec) *scenario {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &scenario{t: t, e: e, ctx: ctx, cancel: cancel, p: fmt.Sprintf("s%d", scenarioN.Add(1)),
		kube: kubernetes.NewForConfigOrDie(e.Config), kueue: kueueclient.NewForConfigOrDie(e.Config)}
	t.Cleanup(cancel)
	s.cfg.Policy = allocator.Policy{Mode: allocator.BestEffortFIFO}
	names := slices.Sorted(mapsKeys(flavors))
	for _, f := range names {
		rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: s.n(f)},
			Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"gpubot.io/flavor": s.n(f)}}}
		s.must(s.kueue.KueueV1beta2().ResourceFlavors().Create(ctx, rf, metav1.CreateOptions{}))
		s.cfg.Flavors = append(s.cfg.Flavors, allocator.Flavor{Name: s.n(f), GPUsPerNode: 8})
		if n := flavors[f]; n > 0 {
			// Capacity comes only from the cluster: real (kwok) nodes, two
			// a rack.
			s.fakeNodes(f, (n+1)/2, min(n, 2))
		}
	}
	for _, tm := range teams {
		s.addTeam(tm)
	}
	s.cfg.Priorities = priorities
	return s
}

func mapsKeys[M ~map[K]V, K comparable, V any](m M) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (s *scenario) n(name string) string { return s.p + "-" + name }

func (s *scenario) must(_ any, err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) addTeam(tm teamSpec) {
	ctx := s.ctx
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: s.n(tm.name)}, Spec: kueue.ClusterQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{},
		Preemption:        tm.preemption,
	}}
	if tm.cohort != "" {
		cq.Spec.CohortName = kueue.CohortReference(s.n(tm.cohort))
	}
	rg := kueue.ResourceGroup{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"}}
	for _, q := range tm.quotas {
		rq := kueue.ResourceQuota{Name: "nvidia.com/gpu", NominalQuota: *resource.NewQuantity(q.nominal, resource.DecimalSI)}
		if q.borrowing != nil {
			rq.BorrowingLimit = resource.NewQuantity(*q.borrowing, resource.DecimalSI)
		}
		if q.lending != nil {
			rq.LendingLimit = resource.NewQuantity(*q.lending, resource.DecimalSI)
		}
		rg.Flavors = append(rg.Flavors, kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(s.n(q.flavor)), Resources: []kueue.ResourceQuota{rq}})
	}
	cq.Spec.ResourceGroups = []kueue.ResourceGroup{rg}
	if tm.mutate != nil {
		tm.mutate(&cq.Spec)
	}
	s.must(s.kueue.KueueV1beta2().ClusterQueues().Create(ctx, cq, metav1.CreateOptions{}))
	ns := s.n(tm.name)
	s.must(s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	lq := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: tm.name, Namespace: ns}, Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq.Name)}}
	s.must(s.kueue.KueueV1beta2().LocalQueues(ns).Create(ctx, lq, metav1.CreateOptions{}))
	s.cfg.Teams = append(s.cfg.Teams, k8sbridge.Team{Name: tm.name, Namespace: ns, LocalQueue: tm.name})
	if tm.inactive {
		return
	}
	// Kueue marks a ClusterQueue active once it has seen its flavors.
	s.eventually("ClusterQueue "+cq.Name+" active", func() bool {
		got, err := s.kueue.KueueV1beta2().ClusterQueues().Get(ctx, cq.Name, metav1.GetOptions{})
		return err == nil && condTrue(got.Status.Conditions, kueue.ClusterQueueActive)
	})
}

func condTrue(cs []metav1.Condition, typ string) bool {
	for _, c := range cs {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// start builds and starts a bridge (as the given client config, default
// the administrator) that records its events.
func (s *scenario) start(opts ...k8sbridge.Option) *k8sbridge.Bridge {
	return s.startAs(s.e.Config, opts...)
}

func (s *scenario) startAs(cfg *rest.Config, opts ...k8sbridge.Option) *k8sbridge.Bridge {
	s.t.Helper()
	b, err := k8sbridge.New(s.cfg, kubernetes.NewForConfigOrDie(cfg), kueueclient.NewForConfigOrDie(cfg), opts...)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.t.Cleanup(cancel)
	if _, err := b.Start(ctx); err != nil {
		s.t.Fatal(err)
	}
	go b.Run(ctx, func(_ context.Context, evs []allocator.Event) {
		s.mu.Lock()
		s.events = append(s.events, evs...)
		s.mu.Unlock()
	})
	s.bridge = b
	return b
}

const timeout = 60 * time.Second

// eventually polls cond until it holds or the timeout passes.
func (s *scenario) eventually(what string, cond func() bool) {
	s.t.Helper()
	err := wait.PollUntilContextTimeout(s.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		s.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitEvent waits for an event of kind about id and returns it.
func (s *scenario) waitEvent(kind allocator.EventKind, id string) allocator.Event {
	s.t.Helper()
	var got allocator.Event
	s.eventually(fmt.Sprintf("%s event for %s", kind, id), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.events {
			if e.Kind == kind && e.ID == id {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

func (s *scenario) hasEvent(kind allocator.EventKind, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.events, func(e allocator.Event) bool { return e.Kind == kind && e.ID == id })
}

// workload builds an allocator workload of team.
func (s *scenario) workload(id, team string, gpus int, prio int32) allocator.Workload {
	return allocator.Workload{ID: id, Queue: team, GPUs: gpus, Priority: prio, Duration: time.Hour, Created: time.Now()}
}

// jobsOf lists the Jobs labelled with request id.
func (s *scenario) jobsOf(id string) []batchv1.Job {
	s.t.Helper()
	list, err := s.kube.BatchV1().Jobs("").List(s.ctx, metav1.ListOptions{LabelSelector: labels.Set{k8sbridge.LabelRequest: id}.String()})
	if err != nil {
		s.t.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		for _, t := range s.cfg.Teams {
			if j.Namespace == t.Namespace || (t.Namespace == "" && j.Namespace == t.Name) {
				out = append(out, j)
			}
		}
	}
	return out
}

// admittedFlavor returns the flavor Kueue admitted request id on, or "".
func (s *scenario) admittedFlavor(id string) string {
	for _, j := range s.jobsOf(id) {
		wls, err := s.kueue.KueueV1beta2().Workloads(j.Namespace).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, wl := range wls.Items {
			for _, o := range wl.OwnerReferences {
				if o.UID == j.UID && wl.Status.Admission != nil && condTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
					return string(wl.Status.Admission.PodSetAssignments[0].Flavors["nvidia.com/gpu"])
				}
			}
		}
	}
	return ""
}
