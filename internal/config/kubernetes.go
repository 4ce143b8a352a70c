package config

import (
	"maps"
	"time"

	"go.yaml.in/yaml/v3"
)

// Kubernetes is what gpubot needs to drive a real cluster: where each
// team's work goes and what a request's Job looks like. It is used only
// when gpubot is connected to a cluster (--kubeconfig, KUBECONFIG or in
// a pod).
type Kubernetes struct {
	// Namespaces and LocalQueues map each team to its namespace and Kueue
	// LocalQueue; both default to the team's name.
	Namespaces  map[string]string
	LocalQueues map[string]string
	// JobTemplates maps template names to batch/v1 Job manifests (YAML);
	// a template without one uses the bridge's default Job.
	JobTemplates map[string][]byte
	// GPUResource is the extended resource pods request ("" for
	// nvidia.com/gpu). BlockLabel, RackLabel and HostLabel name the node
	// labels of the topology levels for flavors without a Kueue Topology
	// ("" for GKE's defaults).
	GPUResource, BlockLabel, RackLabel, HostLabel string
	// PodsReadyTimeout is how long after admission a workload's pods may
	// take to become ready before gpubot reports them not ready (0 for the
	// bridge's default, 10 minutes).
	PodsReadyTimeout time.Duration
	// AcceleratorLabel is the node label that tells GPU models apart
	// ("" for GKE's cloud.google.com/gke-accelerator; the NVIDIA GPU
	// operator's is nvidia.com/gpu.product).
	AcceleratorLabel string
	// Accelerators maps flavors to the value of AcceleratorLabel on their
	// nodes (flavors[].accelerator); NodeLabels to all the node labels
	// their ResourceFlavor selects (flavors[].nodeLabels). See FlavorLabels.
	Accelerators map[string]string
	NodeLabels   map[string]map[string]string
	// KueueNamespace is where Kueue runs, with its manager Configuration
	// in the ConfigMap kueue-manager-config ("" for kueue-system).
	KueueNamespace string
}

// DefaultAcceleratorLabel is GKE's accelerator node label.
const DefaultAcceleratorLabel = "cloud.google.com/gke-accelerator"

// FlavorLabels returns, per flavor that says, the node labels its
// ResourceFlavor selects: its nodeLabels, or {acceleratorLabel: accelerator}.
func (k Kubernetes) FlavorLabels() map[string]map[string]string {
	out := map[string]map[string]string{}
	key := k.AcceleratorLabel
	if key == "" {
		key = DefaultAcceleratorLabel
	}
	for f, v := range k.Accelerators {
		out[f] = map[string]string{key: v}
	}
	for f, l := range k.NodeLabels {
		out[f] = maps.Clone(l)
	}
	return out
}

// Kubernetes returns the kubernetes section and the teams' namespace and
// localQueue keys, with maps that the caller may change.
func (c *Config) Kubernetes() Kubernetes {
	k := c.kube
	k.Namespaces = maps.Clone(k.Namespaces)
	k.LocalQueues = maps.Clone(k.LocalQueues)
	k.JobTemplates = maps.Clone(k.JobTemplates)
	k.Accelerators = maps.Clone(k.Accelerators)
	k.NodeLabels = maps.Clone(k.NodeLabels)
	return k
}

// kubernetes reads the top-level kubernetes section.
func (p *parser) kubernetes(n *yaml.Node) {
	if n == nil {
		return
	}
	f := p.mapping(n, "kubernetes", "jobTemplates", "gpuResource", "blockLabel", "rackLabel", "hostLabel", "podsReadyTimeout", "acceleratorLabel", "kueueNamespace")
	k := &p.cfg.kube
	for key, out := range map[string]*string{"gpuResource": &k.GPUResource, "blockLabel": &k.BlockLabel, "rackLabel": &k.RackLabel, "hostLabel": &k.HostLabel, "acceleratorLabel": &k.AcceleratorLabel} {
		if v := f.get(key); v != nil {
			if s, ok := p.str(v, field("kubernetes", key)); ok {
				if key != "gpuResource" && !labelKey.MatchString(s) {
					p.errorf(v, field("kubernetes", key), "%q is not a valid node label name (like nvidia.com/gpu.product)", s)
					continue
				}
				*out = s
			}
		}
	}
	if v := f.get("kueueNamespace"); v != nil {
		if s, ok := p.str(v, "kubernetes.kueueNamespace"); ok {
			if label.MatchString(s) {
				k.KueueNamespace = s
			} else {
				p.errorf(v, "kubernetes.kueueNamespace", "%q is not a valid namespace name: use %s", s, labelRule)
			}
		}
	}
	if v := f.get("podsReadyTimeout"); v != nil {
		k.PodsReadyTimeout, _ = p.duration(v, "kubernetes.podsReadyTimeout")
	}
	t := f.get("jobTemplates")
	if t == nil {
		return
	}
	g := p.anyMapping(t, "kubernetes.jobTemplates")
	for _, name := range g.order {
		path := field("kubernetes.jobTemplates", name)
		if !p.templates.ref(p.decoder, word{name, g.keys[name], path}) {
			continue
		}
		v := g.get(name)
		if v == nil || v.Kind != yaml.MappingNode {
			p.errorf(g.keys[name], path, "must be a batch/v1 Job manifest (a mapping with apiVersion, kind and spec)")
			continue
		}
		data, err := yaml.Marshal(v)
		if err != nil {
			p.errorf(v, path, "cannot re-encode the Job manifest: %v", err)
			continue
		}
		if k.JobTemplates == nil {
			k.JobTemplates = map[string][]byte{}
		}
		k.JobTemplates[name] = data
	}
}

// teamCluster reads a team's namespace and localQueue keys.
func (p *parser) teamCluster(f *fields, path, team string) {
	for key, out := range map[string]*map[string]string{"namespace": &p.cfg.kube.Namespaces, "localQueue": &p.cfg.kube.LocalQueues} {
		v := f.get(key)
		if v == nil {
			continue
		}
		s, ok := p.str(v, field(path, key))
		if !ok {
			continue
		}
		if !label.MatchString(s) {
			p.errorf(v, field(path, key), "%q is not a valid Kubernetes name: use %s", s, labelRule)
			continue
		}
		if *out == nil {
			*out = map[string]string{}
		}
		(*out)[team] = s
	}
}
