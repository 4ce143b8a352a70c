package k8sbridge

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// SetupSpec is what `gpubot kueue-setup` needs of gpubot's configuration
// to write the Kueue objects that match it.
type SetupSpec struct {
	// Source names the configuration, for the header.
	Source string
	// GPUResource is the resource the ClusterQueues give quota on.
	GPUResource string
	// TopologyLevels are the node labels of the topology levels, from the
	// widest (block) to the host.
	TopologyLevels []string
	// AcceleratorLabel is used for flavors without node labels.
	AcceleratorLabel string
	Flavors          []SetupFlavor
	Priorities       []SetupPriority
	Teams            []SetupTeam
	// Cohorts are the configured Cohort objects (parent, quota, weight);
	// cohorts teams name that are not listed are written without a spec.
	Cohorts []allocator.Cohort
	// FairSharing is set when the configuration asks for Admission Fair
	// Sharing across teams, which Kueue has no setting for.
	FairSharing bool
	// KueueFairSharing is Kueue's Fair Sharing (admission.mode
	// FairSharing): the manager Configuration needs fairSharing, which the
	// notes at the end say.
	KueueFairSharing *allocator.KueueFairSharing
}

// SetupFlavor is one flavor and the node labels its nodes carry (nil:
// the accelerator label with the flavor's name, which the nodes then need).
type SetupFlavor struct {
	Name       string
	NodeLabels map[string]string
	// Spot and Provisioned mark elastic capacity. Their ResourceFlavor
	// tolerates, as NoSchedule taints, the node labels that no reserved
	// flavor has (the elastic nodes carry them as taints too, so that
	// reserved work never lands there); a provisioned flavor is
	// provisioned by its AdmissionCheck (with a Topology, Kueue delays the
	// topology assignment until the nodes are provisioned).
	Spot, Provisioned bool
	// Provisioning is a provisioned flavor's admission check.
	Provisioning *SetupProvisioning
}

// SetupProvisioning is a provisioned flavor's AdmissionCheck and
// ProvisioningRequestConfig (controller kueue.x-k8s.io/provisioning-request).
type SetupProvisioning struct {
	AdmissionCheck, Config string
	// Class is the ProvisioningRequest class ("" is GKE's Dynamic
	// Workload Scheduler, queued-provisioning.gke.io).
	Class string
	// Retry is the ProvisioningRequestConfig's retryStrategy; the zero
	// value is Kueue's default.
	Retry commands.ProvisioningRetry
}

// ProvisioningClassDWS is GKE's Dynamic Workload Scheduler's
// ProvisioningRequest class, kueue-setup's default.
const ProvisioningClassDWS = "queued-provisioning.gke.io"

// ProvisioningController is the controllerName of Kueue's
// ProvisioningRequest admission checks.
const ProvisioningController = "kueue.x-k8s.io/provisioning-request"

// SetupPriority is one priority class.
type SetupPriority struct {
	Name  string
	Value int32
}

// SetupTeam is one team: its namespace and LocalQueue (default its name)
// and its queue (flavors in order, quotas, cohort, preemption).
type SetupTeam struct {
	Namespace, LocalQueue string
	Queue                 allocator.Queue
}

// TopologyName is the name of the Topology kueue-setup writes.
const TopologyName = "gpu-topology"

// Setup writes the Kueue objects that match spec, as one YAML stream to
// apply server-side: a Topology of the levels, one ResourceFlavor per
// flavor (topology-aware, so that Kueue admits onto nodes as gpubot's
// model places), the cohorts, the WorkloadPriorityClasses, and per team a
// namespace, a BestEffortFIFO ClusterQueue with the team's quotas and
// preemption, and a LocalQueue. It ends with the Kueue manager
// Configuration that gpubot's model assumes, as comments.
func Setup(spec SetupSpec) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	gpu := cmpOr(spec.GPUResource, "nvidia.com/gpu")
	acc := cmpOr(spec.AcceleratorLabel, LabelGKEAccelerator)
	src := cmpOr(spec.Source, "the configuration")
	p("# Kueue objects matching %s, written by `gpubot kueue-setup --config %s`.", src, src)
	p("# Do not edit: change the configuration and run kueue-setup again.")
	p("#")
	p("# One topology-aware ResourceFlavor per flavor, one BestEffortFIFO ClusterQueue per")
	p("# team (with its cohort, quotas and preemption), a namespace and LocalQueue per team,")
	p("# and the priority classes. Kueue then admits as gpubot predicts: by priority, then")
	p("# arrival, within quotas and cohort limits, onto nodes that have room. Apply it")
	p("# server-side on a cluster with Kueue v0.17 or later:")
	p("#   kubectl apply --server-side -f setup.yaml")
	if spec.FairSharing {
		p("#")
		p("# The configuration's admission.mode is AdmissionFairSharing: Kueue has no order of")
		p("# ClusterQueues by their decayed usage (its Admission Fair Sharing orders the")
		p("# LocalQueues inside one ClusterQueue), so these ClusterQueues order by priority,")
		p("# then arrival, and gpubot predicts that on the cluster.")
	}
	if len(spec.TopologyLevels) > 0 {
		p("---")
		p("apiVersion: kueue.x-k8s.io/v1beta2")
		p("kind: Topology")
		p("metadata:")
		p("  name: %s", TopologyName)
		p("spec:")
		p("  levels:")
		for _, l := range spec.TopologyLevels {
			p("    - nodeLabel: %s", yamlStr(l))
		}
	}
	for _, f := range spec.Flavors {
		labels := f.NodeLabels
		p("---")
		if len(labels) == 0 {
			labels = map[string]string{acc: f.Name}
			p("# No accelerator in the configuration for %s: its nodes need this label.", f.Name)
		}
		p("apiVersion: kueue.x-k8s.io/v1beta2")
		p("kind: ResourceFlavor")
		p("metadata:")
		p("  name: %s", f.Name)
		p("spec:")
		p("  nodeLabels:")
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			p("    %s: %s", yamlStr(k), yamlStr(labels[k]))
		}
		if len(spec.TopologyLevels) > 0 {
			p("  topologyName: %s", TopologyName)
		}
		if taints := elasticTaints(spec.Flavors, f); len(taints) > 0 {
			p("  tolerations: # the elastic nodes carry these taints, so reserved work stays off them")
			for _, k := range slices.Sorted(maps.Keys(taints)) {
				p("    - {key: %s, operator: Equal, value: %s, effect: NoSchedule}", yamlStr(k), yamlStr(taints[k]))
			}
		}
		if pr := f.Provisioning; f.Provisioned && pr != nil {
			p("---")
			p("apiVersion: kueue.x-k8s.io/v1beta2")
			p("kind: ProvisioningRequestConfig")
			p("metadata:")
			p("  name: %s", pr.Config)
			p("spec:")
			p("  provisioningClassName: %s", cmpOr(pr.Class, ProvisioningClassDWS))
			p("  managedResources: [%s]", yamlStr(gpu))
			r := pr.Retry
			if r == (commands.ProvisioningRetry{}) {
				r = commands.DefaultProvisioningRetry
			}
			p("  retryStrategy: {backoffLimitCount: %d, backoffBaseSeconds: %d, backoffMaxSeconds: %d}", r.Limit, int(r.Backoff.Seconds()), int(r.MaxBackoff.Seconds()))
			p("---")
			p("apiVersion: kueue.x-k8s.io/v1beta2")
			p("kind: AdmissionCheck")
			p("metadata:")
			p("  name: %s", pr.AdmissionCheck)
			p("spec:")
			p("  controllerName: %s", ProvisioningController)
			p("  parameters:")
			p("    apiGroup: kueue.x-k8s.io")
			p("    kind: ProvisioningRequestConfig")
			p("    name: %s", pr.Config)
		}
	}
	cohorts := slices.Clone(spec.Cohorts)
	named := func(c string) bool {
		return slices.ContainsFunc(cohorts, func(x allocator.Cohort) bool { return x.Name == c })
	}
	for _, t := range spec.Teams {
		if c := t.Queue.Cohort; c != "" && !named(c) {
			cohorts = append(cohorts, allocator.Cohort{Name: c})
		}
	}
	for _, c := range spec.Cohorts {
		if c.Parent != "" && !named(c.Parent) {
			cohorts = append(cohorts, allocator.Cohort{Name: c.Parent})
		}
	}
	for _, c := range cohorts {
		p("---")
		p("apiVersion: kueue.x-k8s.io/v1beta2")
		p("kind: Cohort")
		p("metadata:")
		p("  name: %s", c.Name)
		if c.Parent == "" && len(c.Quotas) == 0 && (c.Weight == 0 || c.Weight == 1) {
			continue
		}
		p("spec:")
		if c.Parent != "" {
			p("  parentName: %s", c.Parent)
		}
		writeWeight(p, "  ", c.Weight)
		if len(c.Quotas) > 0 {
			var fl []string
			for _, f := range spec.Flavors {
				if _, ok := c.Quotas[f.Name]; ok {
					fl = append(fl, f.Name)
				}
			}
			writeResourceGroup(p, gpu, fl, c.Quotas, c.Parent != "")
		}
	}
	prios := slices.Clone(spec.Priorities)
	slices.SortStableFunc(prios, func(a, c SetupPriority) int { return int(a.Value) - int(c.Value) })
	for _, pr := range prios {
		p("---")
		p("apiVersion: kueue.x-k8s.io/v1beta2")
		p("kind: WorkloadPriorityClass")
		p("metadata:")
		p("  name: %s", pr.Name)
		p("value: %d", pr.Value)
	}
	for _, t := range spec.Teams {
		q := t.Queue
		ns, lq := cmpOr(t.Namespace, q.Name), cmpOr(t.LocalQueue, q.Name)
		p("---")
		p("apiVersion: v1")
		p("kind: Namespace")
		p("metadata:")
		p("  name: %s", ns)
		p("---")
		p("apiVersion: kueue.x-k8s.io/v1beta2")
		p("kind: ClusterQueue")
		p("metadata:")
		p("  name: %s", q.Name)
		p("spec:")
		if q.Cohort != "" {
			p("  cohortName: %s", q.Cohort)
		}
		p("  namespaceSelector:")
		p("    matchLabels:")
		p("      kubernetes.io/metadata.name: %s", ns)
		p("  queueingStrategy: BestEffortFIFO")
		if checks := provisioningChecks(spec.Flavors, q.Flavors); len(checks) > 0 {
			p("  admissionChecksStrategy: # provisioned flavors: nodes are asked for once quota is reserved")
			p("    admissionChecks:")
			for _, c := range checks {
				p("      - {name: %s, onFlavors: [%s]}", c[0], c[1])
			}
		}
		p("  preemption:")
		p("    withinClusterQueue: %s", cmpOr(q.Preemption.WithinClusterQueue, allocator.PreemptNever))
		p("    reclaimWithinCohort: %s", cmpOr(q.Preemption.ReclaimWithinCohort, allocator.PreemptNever))
		if bw := q.Preemption.BorrowWithinCohort; bw != "" && bw != allocator.PreemptNever {
			p("    borrowWithinCohort:")
			p("      policy: %s", bw)
			if m := q.Preemption.BorrowWithinCohortMaxPriority; m != nil {
				p("      maxPriorityThreshold: %d", *m)
			}
		}
		if ff := q.FlavorFungibility; ff != (allocator.FlavorFungibility{}) {
			p("  flavorFungibility:")
			p("    whenCanBorrow: %s", cmpOr(ff.WhenCanBorrow, allocator.MayStopSearch))
			p("    whenCanPreempt: %s", cmpOr(ff.WhenCanPreempt, allocator.TryNextFlavor))
			if ff.Preference != "" {
				p("    preference: %s", ff.Preference)
			}
		}
		writeWeight(p, "  ", q.Weight)
		writeResourceGroup(p, gpu, q.Flavors, q.Quotas, q.Cohort != "")
		p("---")
		p("apiVersion: kueue.x-k8s.io/v1beta2")
		p("kind: LocalQueue")
		p("metadata:")
		p("  name: %s", lq)
		p("  namespace: %s", ns)
		p("spec:")
		p("  clusterQueue: %s", q.Name)
	}
	if fs := spec.KueueFairSharing; fs != nil {
		b.WriteString(fairSharingNotes(fs))
	} else {
		b.WriteString(ManagerConfigNotes)
	}
	return b.Bytes()
}

// writeWeight writes a fair-sharing weight other than 1 (Kueue's
// default); ZeroWeight is Kueue's 0.
func writeWeight(p func(string, ...any), indent string, w float64) {
	if w == 0 || w == 1 {
		return
	}
	if w <= allocator.ZeroWeight {
		w = 0
	}
	p("%sfairSharing:", indent)
	p("%s  weight: %s", indent, yamlStr(strconv.FormatFloat(w, 'f', -1, 64)))
}

// writeResourceGroup writes the one resource group gpubot's model has:
// GPUs, and CPU and memory where the quotas give them (then on every
// flavor, as Kueue requires).
func writeResourceGroup(p func(string, ...any), gpu string, flavors []string, quotas map[string]allocator.Quota, limits bool) {
	cpu, mem := false, false
	for _, f := range flavors {
		cpu = cpu || quotas[f].CPU != nil
		mem = mem || quotas[f].Memory != nil
	}
	covered := []string{yamlStr(gpu)}
	if cpu {
		covered = append(covered, "cpu")
	}
	if mem {
		covered = append(covered, "memory")
	}
	p("  resourceGroups:")
	p("    - coveredResources: [%s]", strings.Join(covered, ", "))
	p("      flavors:")
	for _, f := range flavors {
		qu := quotas[f]
		p("        - name: %s", f)
		p("          resources:")
		p("            - name: %s", yamlStr(gpu))
		p("              nominalQuota: %d", qu.Nominal)
		if qu.BorrowingLimit != nil && limits {
			p("              borrowingLimit: %d", *qu.BorrowingLimit)
		}
		if qu.LendingLimit != nil && limits {
			p("              lendingLimit: %d", *qu.LendingLimit)
		}
		res := func(name string, rq *allocator.ResourceQuota, amount func(int64) string) {
			if rq == nil {
				rq = &allocator.ResourceQuota{}
			}
			p("            - name: %s", name)
			p("              nominalQuota: %s", amount(rq.Nominal))
			if rq.BorrowingLimit != nil && limits {
				p("              borrowingLimit: %s", amount(*rq.BorrowingLimit))
			}
			if rq.LendingLimit != nil && limits {
				p("              lendingLimit: %s", amount(*rq.LendingLimit))
			}
		}
		if cpu {
			res("cpu", qu.CPU, cpuAmount)
		}
		if mem {
			res("memory", qu.Memory, memAmount)
		}
	}
}

// cpuAmount writes millicores as Kubernetes does: cores when whole.
func cpuAmount(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return yamlStr(strconv.FormatInt(m, 10) + "m")
}

// memAmount writes bytes with the largest binary suffix that divides it.
func memAmount(b int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b != 0 && b%u.m == 0 {
			return yamlStr(strconv.FormatInt(b/u.m, 10) + u.s)
		}
	}
	return strconv.FormatInt(b, 10)
}

// fairSharingNotes are ManagerConfigNotes for a configuration that asks
// for Kueue's Fair Sharing.
func fairSharingNotes(fs *allocator.KueueFairSharing) string {
	strategies := "[LessThanOrEqualToFinalShare, LessThanInitialShare]   # Kueue's default"
	if len(fs.PreemptionStrategies) > 0 {
		strategies = "[" + strings.Join(fs.PreemptionStrategies, ", ") + "]"
	}
	return `#
# Kueue's manager Configuration (ConfigMap kueue-manager-config in kueue-system, key
# controller_manager_config.yaml). The configuration's admission.mode is FairSharing:
# gpubot predicts what Kueue does with:
#
#   integrations:
#     frameworks: ["batch/job", ...]   # gpubot submits batch/v1 Jobs
#   fairSharing:
#     preemptionStrategies: ` + strategies + `
#   # admissionFairSharing: absent: it orders LocalQueues inside one ClusterQueue by usage
#   # waitForPodsReady:     absent: it evicts work whose pods are not ready in time
#
# Kueue reads it only at start: edit the ConfigMap, then restart kueue-controller-manager.
`
}

// ManagerConfigNotes is what gpubot's model assumes of Kueue's manager
// Configuration (the ConfigMap kueue-manager-config in kueue-system), as
// YAML comments. Kueue v0.17's own manifests and Helm chart already
// satisfy it; gpubot reads the ConfigMap at start and says (in its log,
// /readyz and its estimates) where a cluster differs.
const ManagerConfigNotes = `#
# Kueue's manager Configuration (ConfigMap kueue-manager-config in kueue-system, key
# controller_manager_config.yaml). gpubot predicts what Kueue does with:
#
#   integrations:
#     frameworks: ["batch/job", ...]   # gpubot submits batch/v1 Jobs
#   # fairSharing:          absent: Fair Sharing orders ClusterQueues by dominant resource share
#   # admissionFairSharing: absent: it orders LocalQueues inside one ClusterQueue by usage
#   # waitForPodsReady:     absent: it evicts work whose pods are not ready in time
#
# Kueue v0.17's manifests and Helm chart ship it like that. With any of the three set,
# gpubot still works, names the feature in its log and /readyz, and marks its estimates
# approximate. deploy/kueue/manager-config.yaml is the whole Configuration gpubot's tests
# run Kueue with.
`

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// yamlStr writes s as a YAML scalar: plain when that is unambiguous,
// else double-quoted.
func yamlStr(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-./_", r)) {
			plain = false
		}
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "~", "y", "n":
		plain = false
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		plain = false
	}
	if plain && !strings.HasPrefix(s, "-") && !strings.HasPrefix(s, ".") {
		return s
	}
	return strconv.Quote(s)
}

// elasticTaints are the node labels of elastic flavor f that no reserved
// flavor selects with the same value: its nodes carry them as NoSchedule
// taints and its ResourceFlavor tolerates them. Nil for a reserved flavor.
func elasticTaints(all []SetupFlavor, f SetupFlavor) map[string]string {
	if !f.Spot && !f.Provisioned {
		return nil
	}
	out := map[string]string{}
	for k, v := range f.NodeLabels {
		shared := slices.ContainsFunc(all, func(o SetupFlavor) bool { return !o.Spot && !o.Provisioned && o.NodeLabels[k] == v })
		if !shared {
			out[k] = v
		}
	}
	return out
}

// provisioningChecks pairs each provisioned flavor a queue lists with its
// admission check: {check, flavor}.
func provisioningChecks(all []SetupFlavor, queueFlavors []string) [][2]string {
	var out [][2]string
	for _, name := range queueFlavors {
		for _, f := range all {
			if f.Name == name && f.Provisioned && f.Provisioning != nil {
				out = append(out, [2]string{f.Provisioning.AdmissionCheck, f.Name})
			}
		}
	}
	return out
}
