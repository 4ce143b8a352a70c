package k8sbridge

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kueueconfig "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/gpubot/gpubot/commands"
)

// How Kueue is configured, read instead of assumed: the ClusterQueues'
// queueingStrategy, preemption (borrowWithinCohort included),
// flavorFungibility, admission checks, stopPolicy, admissionScope and
// quotas on CPU, memory and other resources; the cohort tree with its
// quotas and weights; and Kueue's manager Configuration (the
// kueue-manager-config ConfigMap) for fairSharing, admissionFairSharing
// and waitForPodsReady. What the allocator models is used (queues.go,
// view.go); what it does not is listed (unmodelled), and estimates of
// the teams it affects say they are approximate.

// managerConfig is what gpubot reads of Kueue's manager Configuration.
type managerConfig struct {
	at  time.Time
	err error // reading it failed: Kueue's defaults are assumed
	// fairSharing: Kueue's Fair Sharing (ordering by dominant resource
	// share, fair-sharing preemption) with these preemption strategies.
	fairSharing   bool
	fsStrategies  []string
	afs           bool // admissionFairSharing (per ClusterQueue with admissionScope)
	afsHalfLife   time.Duration
	podsReady     bool // waitForPodsReady
	blockAdmit    bool
	readyTimeout  time.Duration
	frameworksJob bool // integrations.frameworks has batch/job
	// ignoreCPU, ignoreMemory: resources.excludeResourcePrefixes drops
	// cpu (memory) from what Kueue counts of a workload.
	ignoreCPU, ignoreMemory bool
}

// configKey is the ConfigMap key Kueue's manifests and Helm chart use.
const configKey = "controller_manager_config.yaml"

// readManagerConfig reads Kueue's manager Configuration from its
// ConfigMap. A missing ConfigMap or one gpubot may not read is not an
// error: Kueue's defaults are then assumed, and Warnings says so.
func (b *Bridge) readManagerConfig(ctx context.Context) managerConfig {
	mc := managerConfig{at: b.clock.Now(), frameworksJob: true}
	cm, err := b.kube.CoreV1().ConfigMaps(b.cfg.KueueNamespace).Get(ctx, b.cfg.KueueConfigMap, metav1.GetOptions{})
	if err != nil {
		mc.err = fmt.Errorf("reading ConfigMap %s/%s: %w", b.cfg.KueueNamespace, b.cfg.KueueConfigMap, err)
		return mc
	}
	data, ok := cm.Data[configKey]
	if !ok {
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			data = cm.Data[k]
			break
		}
	}
	parsed, err := parseManagerConfig([]byte(data))
	if err != nil {
		mc.err = fmt.Errorf("reading ConfigMap %s/%s: %w", b.cfg.KueueNamespace, b.cfg.KueueConfigMap, err)
		return mc
	}
	parsed.at = mc.at
	return parsed
}

// parseManagerConfig reads the fields gpubot cares about from a Kueue
// Configuration (config.kueue.x-k8s.io/v1beta2).
func parseManagerConfig(data []byte) (managerConfig, error) {
	var c kueueconfig.Configuration
	if err := yaml.Unmarshal(data, &c); err != nil {
		return managerConfig{}, fmt.Errorf("parsing Kueue's Configuration: %w", err)
	}
	if c.Kind != "" && c.Kind != "Configuration" {
		return managerConfig{}, fmt.Errorf("parsing Kueue's Configuration: kind is %q, want Configuration", c.Kind)
	}
	mc := managerConfig{}
	if fs := c.FairSharing; fs != nil {
		mc.fairSharing = true
		for _, s := range fs.PreemptionStrategies {
			mc.fsStrategies = append(mc.fsStrategies, string(s))
		}
	}
	if afs := c.AdmissionFairSharing; afs != nil {
		mc.afs = true
		mc.afsHalfLife = afs.UsageHalfLifeTime.Duration
	}
	if w := c.WaitForPodsReady; w != nil {
		mc.podsReady = true
		mc.blockAdmit = w.BlockAdmission != nil && *w.BlockAdmission
		mc.readyTimeout = w.Timeout.Duration
	}
	if r := c.Resources; r != nil {
		for _, p := range r.ExcludeResourcePrefixes {
			// Kueue's dropExcludedResources: a prefix of the name.
			mc.ignoreCPU = mc.ignoreCPU || strings.HasPrefix(string(corev1.ResourceCPU), p)
			mc.ignoreMemory = mc.ignoreMemory || strings.HasPrefix(string(corev1.ResourceMemory), p)
		}
	}
	mc.frameworksJob = c.Integrations == nil || len(c.Integrations.Frameworks) == 0 || slices.Contains(c.Integrations.Frameworks, "batch/job")
	return mc, nil
}

// unmodelled lists what the cluster uses that the allocator does not
// model, for the teams (queues) it affects. The caller holds b.mu.
func (b *Bridge) unmodelled(v *view, mc managerConfig) []commands.Unmodelled {
	gpu := corev1.ResourceName(b.cfg.GPUResource)
	var out []commands.Unmodelled
	add := func(feature, detail string, queues ...string) {
		for i, u := range out {
			if u.Feature == feature && u.Detail == detail {
				out[i].Queues = append(out[i].Queues, queues...)
				return
			}
		}
		out = append(out, commands.Unmodelled{Feature: feature, Detail: detail, Queues: queues})
	}
	lqCount := map[string]int{}
	if lqs, err := b.lqs.List(labels.Everything()); err == nil {
		for _, lq := range lqs {
			lqCount[string(lq.Spec.ClusterQueue)]++
		}
	}
	for _, cq := range v.cqs {
		team, ok := v.cqName[cq.Name]
		if !ok {
			continue
		}
		spec := cq.Spec
		if spec.QueueingStrategy == kueue.StrictFIFO {
			add("StrictFIFO", fmt.Sprintf("ClusterQueue %s queues StrictFIFO: a workload that does not fit holds back those behind it, where gpubot lets them pass (BestEffortFIFO)", cq.Name), team)
		}
		if spec.AdmissionChecksStrategy != nil && slices.ContainsFunc(spec.AdmissionChecksStrategy.AdmissionChecks, b.unfollowedCheck) {
			add("admission checks", fmt.Sprintf("ClusterQueue %s admits only after admission checks pass (a ProvisioningRequest, for example), which can take any time", cq.Name), team)
		}
		if spec.StopPolicy != nil && *spec.StopPolicy != kueue.None {
			add("stopPolicy", fmt.Sprintf("ClusterQueue %s is stopped (stopPolicy %s): Kueue admits nothing from it", cq.Name, *spec.StopPolicy), team)
		}
		if as := spec.AdmissionScope; as != nil && as.AdmissionMode == kueue.UsageBasedAdmissionFairSharing && mc.afs && lqCount[cq.Name] > 1 {
			add("Admission Fair Sharing", fmt.Sprintf("Kueue orders the %d LocalQueues of ClusterQueue %s by their recent usage; gpubot orders their work by priority, then arrival", lqCount[cq.Name], cq.Name), team)
		}
		var others, apart []string
		for _, rg := range spec.ResourceGroups {
			withGPU := slices.Contains(rg.CoveredResources, gpu)
			for _, r := range rg.CoveredResources {
				switch {
				case r == gpu:
				case (r == corev1.ResourceCPU || r == corev1.ResourceMemory) && withGPU:
				case r == corev1.ResourceCPU || r == corev1.ResourceMemory:
					if !slices.Contains(apart, string(r)) {
						apart = append(apart, string(r))
					}
				case !slices.Contains(others, string(r)):
					others = append(others, string(r))
				}
			}
		}
		if len(others) > 0 {
			add("quotas on other resources", fmt.Sprintf("ClusterQueue %s also has quotas on %s: Kueue admits only when those fit too, and gpubot counts GPUs, CPU and memory only", cq.Name, strings.Join(others, ", ")), team)
		}
		if len(apart) > 0 {
			add("CPU or memory in another resource group", fmt.Sprintf("ClusterQueue %s gives %s quota in a resource group of its own (other flavors than its GPUs'): gpubot counts CPU and memory only in the GPUs' resource group", cq.Name, strings.Join(apart, " and ")), team)
		}
		tas, plain := false, false
		for _, f := range queueFlavors(v, team) {
			if fi := v.flavors[f]; fi != nil && fi.topology != "" {
				tas = true
			} else {
				plain = true
			}
		}
		if tas && plain {
			add("mixed flavors", fmt.Sprintf("ClusterQueue %s mixes flavors with and without a Kueue Topology: Kueue gives work that asks for no topology only the flavors without one", cq.Name), team)
		}
	}
	// Flavors without a Topology: Kueue admits there by quota alone.
	nominal := map[string]int{}
	users := map[string][]string{}
	for _, q := range v.cluster.Queues {
		for f, qu := range q.Quotas {
			nominal[f] += qu.Nominal
			users[f] = append(users[f], q.Name)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(nominal)) {
		fi := v.flavors[f]
		if fi == nil || fi.topology != "" || fi.gpus >= nominal[f] {
			continue
		}
		add("quota-only flavor", fmt.Sprintf("flavor %s has no Kueue Topology, so Kueue admits there by quota alone (%d GPUs), while gpubot also waits for free GPUs on its nodes (%d)", f, nominal[f], fi.gpus), users[f]...)
	}
	if mc.podsReady {
		detail := "Kueue evicts and requeues work whose pods are not all ready in time (waitForPodsReady"
		if mc.readyTimeout > 0 {
			detail += ", timeout " + mc.readyTimeout.String()
		}
		detail += ")"
		if mc.blockAdmit {
			detail += ", and admits nothing else meanwhile (blockAdmission)"
		}
		add("waitForPodsReady", detail)
	}
	for i := range out {
		slices.Sort(out[i].Queues)
		out[i].Queues = slices.Compact(out[i].Queues)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Feature < out[j].Feature })
	return out
}

func queueFlavors(v *view, queue string) []string {
	for _, q := range v.cluster.Queues {
		if q.Name == queue {
			return q.Flavors
		}
	}
	return nil
}
