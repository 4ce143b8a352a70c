package k8sbridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"
	kueuelisters "sigs.k8s.io/kueue/client-go/listers/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// Sink receives the events of the workloads gpubot follows, one batch at a
// time and in order. The app passes them to commands.Service.Observe.
type Sink func(ctx context.Context, events []allocator.Event)

// RequestLookup finds what a request's Job needs beyond the allocator's
// workload: requester, thread, priority and template names. Package store
// satisfies it through commands.RequestStore.
type RequestLookup interface {
	commands.RequestStore
}

// Option configures a Bridge.
type Option func(*Bridge)

// WithLogger sets the operator's log. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(b *Bridge) { b.log = l } }

// WithClock sets the clock. Default: the wall clock.
func WithClock(c clock.PassiveClock) Option { return func(b *Bridge) { b.clock = c } }

// WithRequests lets submit label Jobs with the request's requester,
// thread and priority name. Default: none (labels from the workload only).
func WithRequests(r RequestLookup) Option { return func(b *Bridge) { b.requests = r } }

// Bridge is a commands.Cluster backed by a Kubernetes cluster with Kueue.
type Bridge struct {
	cfg      Config
	kube     kubernetes.Interface
	kueue    kueueclient.Interface
	log      *slog.Logger
	clock    clock.PassiveClock
	requests RequestLookup
	server   string // the API server's URL, for messages

	// coreFactory watches nodes and kueueFactory Kueue's cluster-scoped
	// objects; nsFactories watch Jobs, Pods, Workloads and LocalQueues in
	// the team namespaces (see namespaces.go).
	coreFactory  informers.SharedInformerFactory
	kueueFactory kueueinformers.SharedInformerFactory
	nsFactories  []interface{ Start(<-chan struct{}) }

	nodes      corelisters.NodeLister
	pods       podListers
	jobs       jobListers
	flavors    kueuelisters.ResourceFlavorLister
	topologies kueuelisters.TopologyLister
	cqs        kueuelisters.ClusterQueueLister
	lqs        localQueueListers
	wls        workloadListers
	wpcs       kueuelisters.WorkloadPriorityClassLister
	cohorts    kueuelisters.CohortLister
	checks     kueuelisters.AdmissionCheckLister
	wlByOwner  ownerIndexes
	synced     []cache.InformerSynced

	kick chan struct{}

	mu sync.Mutex
	// recent holds workloads submitted but not yet seen by the Job
	// informer, so that a snapshot taken right after submit has them.
	recent map[string]allocator.Workload
	// reported is what the sink was last told about each request, and
	// known the workload as it then was (see Snapshot).
	reported map[string]phase
	known    map[string]allocator.Workload
	// podsTold is what the sink was last told about the pods of each
	// admitted workload.
	podsTold map[string]podsMark
	// evictedFor names the preemptor of each workload gpubot deactivated.
	evictedFor map[string]string
	// prFailures are the failed ProvisioningRequests seen, by the UID of
	// the Workload they were for (see provreq.go).
	prFailures map[string][]commands.CheckFailure
	// prRevoked holds the autoscaler's message of a ProvisioningRequest
	// whose capacity was revoked, by the UID of the Workload that owns it
	// (Kueue then clears the Workload's checks as it deactivates it).
	prRevoked map[string]string
	dyn       dynamic.Interface
	// mgr is Kueue's manager Configuration as last read; logged holds
	// the findings already logged (logFindings).
	mgr     managerConfig
	logged  map[string]bool
	ready   bool
	started bool
}

var _ commands.Cluster = (*Bridge)(nil)
var _ commands.Tracker = (*Bridge)(nil)

const (
	indexOwner = "gpubot-owner" // Workloads by namespace/owner Job name
)

// New builds a bridge. It does not talk to the cluster until Start.
func New(cfg Config, kube kubernetes.Interface, kueue kueueclient.Interface, opts ...Option) (*Bridge, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	b := &Bridge{
		cfg: cfg, kube: kube, kueue: kueue,
		log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		clock:      clock.RealClock{},
		kick:       make(chan struct{}, 1),
		recent:     map[string]allocator.Workload{},
		reported:   map[string]phase{},
		known:      map[string]allocator.Workload{},
		podsTold:   map[string]podsMark{},
		evictedFor: map[string]string{},
		prFailures: map[string][]commands.CheckFailure{},
		prRevoked:  map[string]string{},
		logged:     map[string]bool{},
	}
	for _, o := range opts {
		o(b)
	}
	const resync = 0
	b.coreFactory = informers.NewSharedInformerFactory(kube, resync)
	b.kueueFactory = kueueinformers.NewSharedInformerFactory(kueue, resync)
	k := b.kueueFactory.Kueue().V1beta2()
	nodeInf := b.coreFactory.Core().V1().Nodes()
	b.nodes = nodeInf.Lister()
	b.flavors, b.topologies = k.ResourceFlavors().Lister(), k.Topologies().Lister()
	b.cqs, b.cohorts, b.wpcs = k.ClusterQueues().Lister(), k.Cohorts().Lister(), k.WorkloadPriorityClasses().Lister()
	b.checks = k.AdmissionChecks().Lister()
	infs := []cache.SharedIndexInformer{
		nodeInf.Informer(), k.ResourceFlavors().Informer(), k.Topologies().Informer(), k.ClusterQueues().Informer(),
		k.WorkloadPriorityClasses().Informer(), k.Cohorts().Informer(), k.AdmissionChecks().Informer(),
	}
	pods, jobs, wls, lqs := podListers{}, jobListers{}, workloadListers{}, localQueueListers{}
	b.wlByOwner = ownerIndexes{}
	for _, ns := range cfg.teamNamespaces() {
		owned := informers.NewSharedInformerFactoryWithOptions(kube, resync, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelRequest }))
		kns := kueueinformers.NewSharedInformerFactoryWithOptions(kueue, resync, kueueinformers.WithNamespace(ns))
		b.nsFactories = append(b.nsFactories, owned, kns)
		podInf, jobInf := owned.Core().V1().Pods(), owned.Batch().V1().Jobs()
		wlInf, lqInf := kns.Kueue().V1beta2().Workloads(), kns.Kueue().V1beta2().LocalQueues()
		if err := wlInf.Informer().AddIndexers(cache.Indexers{indexOwner: ownerIndex}); err != nil {
			return nil, fmt.Errorf("k8sbridge: indexing workloads: %w", err)
		}
		pods[ns], jobs[ns], wls[ns], lqs[ns] = podInf.Lister(), jobInf.Lister(), wlInf.Lister(), lqInf.Lister()
		b.wlByOwner[ns] = wlInf.Informer().GetIndexer()
		infs = append(infs, podInf.Informer(), jobInf.Informer(), wlInf.Informer(), lqInf.Informer())
	}
	b.pods, b.jobs, b.wls, b.lqs = pods, jobs, wls, lqs
	kick := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { b.poke() },
		UpdateFunc: func(any, any) { b.poke() },
		DeleteFunc: func(any) { b.poke() },
	}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(kick); err != nil {
			return nil, fmt.Errorf("k8sbridge: watching: %w", err)
		}
		b.synced = append(b.synced, inf.HasSynced)
	}
	return b, nil
}

func ownerIndex(obj any) ([]string, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, nil
	}
	var out []string
	for _, o := range m.GetOwnerReferences() {
		if o.Kind == "Job" {
			out = append(out, m.GetNamespace()+"/"+o.Name)
		}
	}
	return out, nil
}

func metaOf(obj any) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, errors.New("not an object")
	}
	return m, nil
}

func (b *Bridge) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// ErrKueueMissing reports that the cluster does not serve Kueue's v1beta2 API.
var ErrKueueMissing = errors.New("the cluster does not serve Kueue's API (kueue.x-k8s.io/v1beta2): install Kueue v0.15 or later")

// Check verifies that the API server answers and serves Kueue's v1beta2
// API, with errors that say which is wrong.
func (b *Bridge) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := b.kube.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("cannot reach the Kubernetes API server: %w", err)
	}
	if _, err := b.kube.Discovery().ServerResourcesForGroupVersion("kueue.x-k8s.io/v1beta2"); err != nil {
		if apierrors.IsNotFound(err) {
			return ErrKueueMissing
		}
		return fmt.Errorf("asking the API server for Kueue's API: %w", err)
	}
	if _, err := b.kueue.KueueV1beta2().ClusterQueues().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("listing Kueue ClusterQueues: %w", err)
	}
	return nil
}

// Start checks the cluster, starts the informers and waits until their
// caches are filled. Events are held until Run. It returns the warnings
// found comparing the configuration with the cluster.
func (b *Bridge) Start(ctx context.Context) ([]string, error) {
	if err := b.Check(ctx); err != nil {
		return nil, err
	}
	b.coreFactory.Start(ctx.Done())
	b.kueueFactory.Start(ctx.Done())
	for _, f := range b.nsFactories {
		f.Start(ctx.Done())
	}
	more, err := b.startProvisioningRequests(ctx)
	if err != nil {
		return nil, err
	}
	synced := slices.Concat(b.synced, more)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), synced...) {
		return nil, errors.New("timed out filling the caches of Kueue and node objects")
	}
	mc := b.managerConfig(ctx)
	b.mu.Lock()
	b.ready = true
	if v, err := b.view(); err == nil {
		b.logFindings(b.report(v, mc))
	}
	b.mu.Unlock()
	return b.Warnings(), nil
}

// Ready reports whether the caches are filled (for /readyz).
func (b *Bridge) Ready() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready
}

// Run delivers the events of the workloads gpubot follows to sink until
// ctx ends. The first batch reports the state found at start: admitted
// workloads as admissions, finished ones as an admission and an end, and
// the readiness of admitted workloads' pods unless an earlier run
// reported it already (see AnnotationPods).
func (b *Bridge) Run(ctx context.Context, sink Sink) {
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		return
	}
	b.started = true
	b.mu.Unlock()
	b.poke()
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		events, next := b.diff()
		if len(events) > 0 {
			sink(ctx, events)
		}
		b.commit(next)
		b.writeMarks(ctx, next.writes)
		timer = b.wakeAt(timer, next.wake)
	}
}

// Snapshot implements commands.Cluster.
func (b *Bridge) Snapshot(ctx context.Context) (*allocator.Snapshot, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, err := b.view()
	if err != nil {
		return nil, err
	}
	return v.snapshot(b.clock.Now())
}

// Apply implements commands.Cluster. Kueue admits asynchronously: submit
// waits briefly for Kueue's first decision and returns the admission if
// there was one; everything else reaches the sink given to Run.
func (b *Bridge) Apply(ctx context.Context, op commands.Op) ([]allocator.Event, error) {
	switch op.Kind {
	case commands.OpSubmit:
		return b.submit(ctx, op.Workload)
	case commands.OpRemove:
		return nil, b.remove(ctx, op.ID)
	case commands.OpExtend:
		return nil, b.extend(ctx, op.ID, op.Duration)
	case commands.OpPreempt:
		return nil, b.preempt(ctx, op.ID, op.Victims)
	case commands.OpSwitch:
		return b.switchFlavor(ctx, op.Workload)
	}
	return nil, fmt.Errorf("k8sbridge: unknown operation %q", op.Kind)
}

// jobOf returns the Job gpubot labelled with request id.
func (b *Bridge) jobOf(id string) (jobRef, bool) {
	sel := labels.SelectorFromSet(labels.Set{LabelRequest: id})
	jobs, err := b.jobs.List(sel)
	if err != nil {
		return jobRef{}, false
	}
	for _, j := range jobs {
		if _, ok := b.cfg.teamOfNamespace(j.Namespace); ok {
			return jobRef{Namespace: j.Namespace, Name: j.Name, job: j}, true
		}
	}
	return jobRef{}, false
}

// nodeReady reports whether a node can take pods.
func nodeReady(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return true
}
