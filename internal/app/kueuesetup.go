package app

import (
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/k8sbridge"
)

// KueueSetup writes the Kueue objects that match the configuration at
// path (the bundled example for ""): `gpubot kueue-setup`. The shipped
// deploy/kueue/setup.yaml is KueueSetup of deploy/gpubot.example.yaml.
func KueueSetup(path string) ([]byte, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	return k8sbridge.Setup(setupSpec(cfg, path)), nil
}

// setupSpec translates gpubot's configuration for k8sbridge.Setup.
func setupSpec(cfg *config.Config, source string) k8sbridge.SetupSpec {
	set, cl, k := cfg.Settings(), cfg.Cluster(), cfg.Kubernetes()
	if source == "" {
		source = "deploy/gpubot.example.yaml"
	}
	spec := k8sbridge.SetupSpec{
		Source: source, GPUResource: k.GPUResource, AcceleratorLabel: k.AcceleratorLabel,
		TopologyLevels: []string{or(k.BlockLabel, "cloud.google.com/gce-topology-block"), or(k.RackLabel, "cloud.google.com/gce-topology-subblock"), or(k.HostLabel, "kubernetes.io/hostname")},
		FairSharing:    cl.Policy.Mode == "AdmissionFairSharing",
		Cohorts:        cl.Cohorts, KueueFairSharing: cl.Policy.FairSharing,
	}
	labels := k.FlavorLabels()
	terms := map[string]commands.FlavorTerms{}
	for _, t := range set.Elastic.Flavors {
		terms[t.Flavor] = t
	}
	for _, f := range cl.Flavors {
		sf := k8sbridge.SetupFlavor{Name: f.Name, NodeLabels: labels[f.Name]}
		switch t := terms[f.Name]; t.Capacity {
		case commands.CapacitySpot:
			sf.Spot = true
		case commands.CapacityProvisioned:
			sf.Provisioned = true
			sf.Provisioning = &k8sbridge.SetupProvisioning{AdmissionCheck: t.AdmissionCheck, Config: t.ProvisioningRequestConfig, Retry: t.Retry}
		}
		spec.Flavors = append(spec.Flavors, sf)
	}
	for _, p := range set.Priorities {
		spec.Priorities = append(spec.Priorities, k8sbridge.SetupPriority{Name: p.Name, Value: p.Value})
	}
	for _, q := range cl.Queues {
		spec.Teams = append(spec.Teams, k8sbridge.SetupTeam{Namespace: k.Namespaces[q.Name], LocalQueue: k.LocalQueues[q.Name], Queue: q})
	}
	return spec
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
