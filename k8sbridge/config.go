package k8sbridge

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// gpubot's own labels and annotations on the Jobs (and pods) it owns.
const (
	// LabelRequest carries the request ID; its presence is what makes a Job
	// gpubot's.
	LabelRequest = "gpubot.io/request"

	AnnotationRequester = "gpubot.io/requester"
	AnnotationTeam      = "gpubot.io/team"
	AnnotationThread    = "gpubot.io/thread"
	AnnotationGPUs      = "gpubot.io/gpus"
	AnnotationFlavor    = "gpubot.io/flavor"
	AnnotationPriority  = "gpubot.io/priority"
	AnnotationDuration  = "gpubot.io/duration"
	AnnotationTopology  = "gpubot.io/topology"
	AnnotationTemplate  = "gpubot.io/template"
	AnnotationCreated   = "gpubot.io/created"
	AnnotationOrigin    = "gpubot.io/origin"
	AnnotationReason    = "gpubot.io/reason"

	// AnnotationPods records on a Job what gpubot last reported about the
	// pods of its current admission ("ready <admission time>" or
	// "not-ready <admission time>"), so that a restarted gpubot does not
	// report it again.
	AnnotationPods = "gpubot.io/pods"
)

// Kueue's labels and annotations that gpubot sets.
const (
	LabelQueueName        = "kueue.x-k8s.io/queue-name"
	LabelPriorityClass    = "kueue.x-k8s.io/priority-class"
	LabelMaxExecTime      = "kueue.x-k8s.io/max-exec-time-seconds"
	AnnotationTASRequired = "kueue.x-k8s.io/podset-required-topology"
)

// Node labels that name a node's GPU model: GKE's, and the NVIDIA GPU
// operator's (set by its GPU feature discovery).
const (
	LabelGKEAccelerator = "cloud.google.com/gke-accelerator"
	LabelGPUProduct     = "nvidia.com/gpu.product"
)

// acceleratorLabels are the labels that describe a node no flavor selects.
func (b *Bridge) acceleratorLabels() []string {
	out := []string{b.cfg.AcceleratorLabel}
	for _, l := range []string{LabelGKEAccelerator, LabelGPUProduct} {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// Config is what the bridge needs to know besides the cluster.
type Config struct {
	// Teams maps gpubot teams to their namespace and LocalQueue.
	Teams []Team
	// Flavors are the configured flavors: the names to expect as
	// ResourceFlavors, with the GPUs per node used when no node is found.
	// A flavor without nodes has none in the model: capacity comes only
	// from the cluster.
	Flavors []allocator.Flavor
	// FlavorLabels are the node labels each configured flavor's
	// ResourceFlavor should select (kueue-setup writes them); a
	// ResourceFlavor that selects others is reported. Optional.
	FlavorLabels map[string]map[string]string
	// AcceleratorLabel is the node label that tells GPU models apart;
	// default cloud.google.com/gke-accelerator. Nodes no flavor selects
	// are described by it (and by GKE's and the NVIDIA GPU operator's
	// labels).
	AcceleratorLabel string
	// Policy is the admission policy configured. On a cluster the
	// allocator orders as Kueue does (priority, then arrival) whatever
	// its Mode; the configured HalfLife still decays usage for standing.
	Policy allocator.Policy
	// KueueNamespace and KueueConfigMap locate Kueue's manager
	// Configuration; defaults kueue-system and kueue-manager-config.
	KueueNamespace, KueueConfigMap string
	// Priorities maps WorkloadPriorityClass names that are gpubot
	// priorities to their configured values.
	Priorities map[string]int32
	// Templates maps template names to batch/v1 Job manifests (YAML or
	// JSON). A template without a manifest uses DefaultJobTemplate.
	Templates map[string][]byte
	// GPUResource is the resource name pods request; default nvidia.com/gpu.
	GPUResource string
	// BlockLabel and RackLabel name the node labels of the topology levels
	// for flavors without a Kueue Topology. Defaults: GKE's
	// cloud.google.com/gce-topology-block and -subblock.
	BlockLabel, RackLabel string
	// HostLabel is the node label of the host level; default
	// kubernetes.io/hostname.
	HostLabel string
	// PreemptTimeout bounds how long preempt waits for Kueue to evict the
	// victims and admit the preemptor. Default 30 s.
	PreemptTimeout time.Duration
	// SubmitWait bounds how long submit waits for Kueue's first decision
	// on a new workload. Default 3 s.
	SubmitWait time.Duration
	// PodsReadyTimeout is how long after admission a workload's pods may
	// take to become ready before the bridge reports them not ready
	// (image pulls failing, pods unschedulable). Default 10 min.
	PodsReadyTimeout time.Duration
}

// Team is one team's place in the cluster.
type Team struct {
	Name       string
	Namespace  string // default: the team's name
	LocalQueue string // default: the team's name
}

// DefaultJobTemplate is the Job a request becomes when its template has no
// manifest: one container that sleeps, requesting the GPUs.
const DefaultJobTemplate = `
apiVersion: batch/v1
kind: Job
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: registry.k8s.io/pause:3.10
`

func (c *Config) defaults() error {
	if c.GPUResource == "" {
		c.GPUResource = "nvidia.com/gpu"
	}
	if c.BlockLabel == "" {
		c.BlockLabel = "cloud.google.com/gce-topology-block"
	}
	if c.RackLabel == "" {
		c.RackLabel = "cloud.google.com/gce-topology-subblock"
	}
	if c.HostLabel == "" {
		c.HostLabel = "kubernetes.io/hostname"
	}
	if c.AcceleratorLabel == "" {
		c.AcceleratorLabel = LabelGKEAccelerator
	}
	if c.KueueNamespace == "" {
		c.KueueNamespace = "kueue-system"
	}
	if c.KueueConfigMap == "" {
		c.KueueConfigMap = "kueue-manager-config"
	}
	if c.SubmitWait <= 0 {
		c.SubmitWait = 3 * time.Second
	}
	if c.PodsReadyTimeout <= 0 {
		c.PodsReadyTimeout = 10 * time.Minute
	}
	if c.PreemptTimeout <= 0 {
		c.PreemptTimeout = 30 * time.Second
	}
	seen := map[string]bool{}
	for i := range c.Teams {
		t := &c.Teams[i]
		if t.Name == "" {
			return fmt.Errorf("k8sbridge: team %d has no name", i)
		}
		if t.Namespace == "" {
			t.Namespace = t.Name
		}
		if t.LocalQueue == "" {
			t.LocalQueue = t.Name
		}
		key := t.Namespace + "/" + t.LocalQueue
		if seen[key] {
			return fmt.Errorf("k8sbridge: two teams use LocalQueue %s", key)
		}
		seen[key] = true
	}
	return nil
}

func (c *Config) team(name string) (Team, bool) {
	for _, t := range c.Teams {
		if t.Name == name {
			return t, true
		}
	}
	return Team{}, false
}

func (c *Config) teamOfNamespace(ns string) (Team, bool) {
	for _, t := range c.Teams {
		if t.Namespace == ns {
			return t, true
		}
	}
	return Team{}, false
}
