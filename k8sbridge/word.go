package k8sbridge

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// Kueue's word on a pending workload comes from its Workload: the
// QuotaReserved condition (with the flavor assigner's message when it
// could not reserve quota), Evicted, the admission checks' states, and
// spec.active. The messages are Kueue's (pkg/scheduler/flavorassigner,
// pkg/cache/scheduler/tas_flavor_snapshot.go, pkg/scheduler/scheduler.go
// in v0.17); what each part means for "can it ever start as it is" is
// decided here.

// part is one reason in Kueue's message about one flavor (or none).
type part int

const (
	partOther    part = iota // not recognised
	partWait                 // quota in use: waiting or preemption can help
	partCapacity             // no room on the nodes now (topology-aware scheduling)
	partNever                // cannot be admitted there as it is
)

var (
	reMaxCapacity = regexp.MustCompile(`insufficient quota for (\S+) in flavor (\S+),.*> maximum capacity \(([^)]*)\)`)
	reMoreNeeded  = regexp.MustCompile(`insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed`)
	reTopology    = regexp.MustCompile(`topology "([^"]+)" (doesn't allow to fit|allows to fit only)`)
	reNoDomains   = regexp.MustCompile(`no topology domains at level: (\S+)`)
	reAffinity    = regexp.MustCompile(`flavor (\S+) doesn't match node affinity`)
	reTaint       = regexp.MustCompile(`untolerated taint (.+) in flavor (\S+)`)
	reTASOnly     = regexp.MustCompile(`Flavor "([^"]+)" supports only TopologyAwareScheduling`)
	reNoTAS       = regexp.MustCompile(`Flavor "([^"]+)" does not support TopologyAwareScheduling`)
	reNoLevel     = regexp.MustCompile(`Flavor "([^"]+)" does not contain the requested level`)
	rePreempting  = regexp.MustCompile(`Pending the preemption of (\d+) workload`)
	reInactiveCQ  = regexp.MustCompile(`ClusterQueue (\S+) is inactive`)
)

// classify reads one reason of the flavor assigner and says what it
// means, in a plain phrase, and which flavor it is about ("" if none).
func classify(reason string) (part, string, string) {
	r := strings.TrimSpace(reason)
	switch {
	case reMaxCapacity.MatchString(r):
		m := reMaxCapacity.FindStringSubmatch(r)
		return partNever, fmt.Sprintf("it needs more %s on %s than its team may ever use there, even borrowing from the cohort (at most %s)", m[1], m[2], m[3]), m[2]
	case reMoreNeeded.MatchString(r):
		m := reMoreNeeded.FindStringSubmatch(r)
		return partWait, fmt.Sprintf("%s more %s needed on %s", m[3], m[1], m[2]), m[2]
	case reTopology.MatchString(r):
		m := reTopology.FindStringSubmatch(r)
		return partCapacity, fmt.Sprintf("no room for its pods on the nodes of topology %s now", m[1]), ""
	case reNoDomains.MatchString(r):
		m := reNoDomains.FindStringSubmatch(r)
		return partCapacity, fmt.Sprintf("no node with room carries its topology level %s now", m[1]), ""
	case reAffinity.MatchString(r):
		m := reAffinity.FindStringSubmatch(r)
		return partNever, fmt.Sprintf("its pods' node selector does not match flavor %s", m[1]), m[1]
	case reTaint.MatchString(r):
		m := reTaint.FindStringSubmatch(r)
		return partNever, fmt.Sprintf("its pods do not tolerate flavor %s's taint %s", m[2], m[1]), m[2]
	case reTASOnly.MatchString(r):
		m := reTASOnly.FindStringSubmatch(r)
		return partNever, fmt.Sprintf("flavor %s takes only topology-aware work", m[1]), m[1]
	case reNoTAS.MatchString(r):
		m := reNoTAS.FindStringSubmatch(r)
		return partNever, fmt.Sprintf("it asks for a topology, and flavor %s has no Kueue Topology", m[1]), m[1]
	case reNoLevel.MatchString(r):
		m := reNoLevel.FindStringSubmatch(r)
		return partNever, fmt.Sprintf("flavor %s's topology has no such level", m[1]), m[1]
	case strings.Contains(r, "does not provide resource"), strings.Contains(r, "unavailable in ClusterQueue"),
		strings.HasPrefix(r, "flavor ") && strings.HasSuffix(r, " not found"):
		return partNever, r, ""
	}
	return partOther, r, ""
}

// wordOf is Kueue's word on a pending Workload, or false if Kueue has said
// nothing yet. fits, if not nil, tells whether the workload could be
// admitted on an empty cluster with the nodes that exist: it decides
// whether "no room on the nodes now" is for now or for good. flavors are
// the flavors the workload may use (its pin, or its queue's); what Kueue
// says of others (a pinned Job "does not match" them) is beside the point.
func wordOf(wl *kueue.Workload, flavors []string, fits func() (bool, string)) (commands.KueueWord, bool) {
	conds := wl.Status.Conditions
	if wl.Spec.Active != nil && !*wl.Spec.Active {
		w := commands.KueueWord{Condition: "Inactive", Reason: "spec.active=false", Never: true,
			Plain: "Kueue keeps it out of the queue: its Workload is deactivated (spec.active=false)",
			Why:   "its Kueue Workload is deactivated (spec.active=false); it queues again when someone activates it"}
		if c := apimeta.FindStatusCondition(conds, kueue.WorkloadEvicted); c != nil {
			w.At = c.LastTransitionTime.Time
		}
		return w, true
	}
	if c := apimeta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved); c != nil && c.Status == metav1.ConditionTrue {
		if apimeta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted) {
			return commands.KueueWord{}, false
		}
		return checksWord(wl, c), true
	}
	c := apimeta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved)
	if c == nil {
		return commands.KueueWord{}, false
	}
	w := commands.KueueWord{Condition: kueue.WorkloadQuotaReserved + "=False", Reason: c.Reason, Message: c.Message, At: c.LastTransitionTime.Time}
	if rs := wl.Status.RequeueState; rs != nil && rs.RequeueAt != nil {
		w.Plain = fmt.Sprintf("Kueue holds it back until %s before queueing it again", rs.RequeueAt.UTC().Format("15:04 MST"))
		if rs.Count != nil {
			w.Plain += fmt.Sprintf(" (requeued %d times)", *rs.Count)
		}
	}
	if ev := apimeta.FindStatusCondition(conds, kueue.WorkloadEvicted); ev != nil && ev.Status == metav1.ConditionTrue && c.Reason != "Pending" {
		w.Condition, w.Reason, w.Message = kueue.WorkloadEvicted, ev.Reason, ev.Message
		w.Plain = "Kueue evicted it (" + evictedWhy(ev.Reason) + ") and queues it again"
		return w, true
	}
	msg := c.Message
	if m := rePreempting.FindStringSubmatch(msg); m != nil {
		w.Plain = fmt.Sprintf("Kueue is preempting %s workload(s) to make room for it", m[1])
		return w, true
	}
	if m := reInactiveCQ.FindStringSubmatch(msg); m != nil {
		w.Plain = "Kueue admits nothing from its ClusterQueue " + m[1] + ": it is inactive"
		w.Never, w.Why = true, "its ClusterQueue "+m[1]+" is inactive (stopped, or missing a flavor or admission check)"
		return w, true
	}
	for _, hard := range []string{"Workload namespace doesn't match ClusterQueue selector", "The workload has failed admission checks"} {
		if strings.Contains(msg, hard) {
			w.Plain = "Kueue cannot admit it: " + lowerFirst(hard)
			w.Never, w.Why = true, lowerFirst(hard)
			return w, true
		}
	}
	var waits, nevers, others []string
	for _, r := range reasons(msg) {
		kind, phrase, flavor := classify(r)
		if flavor != "" && len(flavors) > 0 && !slices.Contains(flavors, flavor) {
			continue
		}
		switch kind {
		case partWait, partCapacity:
			waits = append(waits, phrase)
		case partNever:
			nevers = append(nevers, phrase)
		default:
			others = append(others, phrase)
		}
	}
	// Kueue checks quota before topology: while quota is short it does
	// not say that no node that exists could hold the work. The empty
	// cluster's answer names the flavors the workload may use.
	if fits != nil {
		if ok, why := fits(); !ok && why != "" {
			w.Never, w.Why = true, why
		}
	}
	if !w.Never && len(waits) == 0 && len(others) == 0 && len(nevers) > 0 {
		w.Never, w.Why = true, strings.Join(nevers, "; ")
	}
	switch {
	case w.Plain != "":
	case w.Never:
		w.Plain = "Kueue cannot admit it as it is: " + w.Why
	case len(waits) > 0:
		w.Plain = "Kueue waits for room: " + strings.Join(waits, "; ")
	case msg != "":
		w.Plain = "Kueue has not admitted it: " + strings.TrimRight(msg, ".")
	default:
		w.Plain = "Kueue has not admitted it yet"
	}
	return w, true
}

// reasons splits Kueue's "couldn't assign flavors to pod set main: a, b;
// couldn't assign flavors to pod set other: c" into its reasons.
func reasons(msg string) []string {
	var out []string
	for _, ps := range strings.Split(msg, "; ") {
		if _, rest, ok := strings.Cut(ps, "couldn't assign flavors to pod set "); ok {
			if _, list, ok := strings.Cut(rest, ": "); ok {
				ps = list
			}
		}
		// Reasons are joined with ", ", but some contain ", " themselves
		// ("insufficient unused quota for x in flavor f, 8 more needed"):
		// a new reason starts with a known lead word.
		var cur string
		for _, piece := range strings.Split(ps, ", ") {
			if cur != "" && !startsReason(piece) {
				cur += ", " + piece
				continue
			}
			if cur != "" {
				out = append(out, cur)
			}
			cur = piece
		}
		if cur != "" {
			out = append(out, cur)
		}
	}
	return out
}

func startsReason(s string) bool {
	for _, p := range []string{"insufficient ", "topology \"", "flavor ", "Flavor \"", "untolerated taint", "resource ", "could not assign", "Total nodes"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// checksWord is Kueue's word on a workload that holds quota but waits for
// its admission checks.
func checksWord(wl *kueue.Workload, reserved *metav1.Condition) commands.KueueWord {
	w := commands.KueueWord{Condition: "AdmissionCheck", At: reserved.LastTransitionTime.Time}
	flavor := ""
	if a := wl.Status.Admission; a != nil && len(a.PodSetAssignments) > 0 {
		for _, f := range a.PodSetAssignments[0].Flavors {
			flavor = string(f)
		}
	}
	var waiting []string
	for _, ac := range wl.Status.AdmissionChecks {
		if ac.State == kueue.CheckStateReady {
			continue
		}
		s := fmt.Sprintf("%s (%s)", ac.Name, strings.ToLower(string(ac.State)))
		if ac.Message != "" {
			s += ": " + strings.TrimRight(ac.Message, ".")
		}
		waiting = append(waiting, s)
		w.Reason, w.Message = string(ac.State), ac.Message
		if ac.State == kueue.CheckStateRejected {
			w.Never, w.Why = true, fmt.Sprintf("admission check %s rejected it", ac.Name)
		}
	}
	w.Plain = "Kueue reserved quota"
	if flavor != "" {
		w.Plain += " on " + flavor
	}
	if len(waiting) > 0 {
		w.Plain += " and waits for admission check " + strings.Join(waiting, "; ")
	} else {
		w.Plain += " and has not admitted it yet"
	}
	return w
}

func evictedWhy(reason string) string {
	switch reason {
	case kueue.WorkloadEvictedByPreemption:
		return "preempted"
	case kueue.WorkloadEvictedByPodsReadyTimeout:
		return "its pods were not ready in time"
	case kueue.WorkloadEvictedByAdmissionCheck:
		return "an admission check asked for it"
	case kueue.WorkloadEvictedByClusterQueueStopped:
		return "its ClusterQueue was stopped"
	case kueue.WorkloadEvictedByLocalQueueStopped:
		return "its LocalQueue was stopped"
	case kueue.WorkloadDeactivated:
		return "deactivated"
	}
	return reason
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// neverFits says whether w could be admitted on an empty cluster with the
// nodes that exist, and if not, why, in a phrase naming the flavors.
func neverFits(cl *allocator.Cluster, w allocator.Workload, tas map[string]bool) (bool, string) {
	empty, err := allocator.NewSnapshot(cl, w.Created, nil, nil)
	if err != nil {
		return true, ""
	}
	w.Admission = nil
	var flavors []string
	for _, q := range cl.Queues {
		if q.Name == w.Queue {
			flavors = q.Flavors
		}
	}
	elastic := map[string]bool{}
	for _, f := range cl.Flavors {
		elastic[f.Name] = f.Elastic
	}
	if w.Flavor != "" {
		flavors = []string{w.Flavor}
	} else {
		flavors = slices.DeleteFunc(slices.Clone(flavors), func(f string) bool { return elastic[f] })
	}
	for _, f := range flavors {
		if !tas[f] {
			return true, "" // Kueue admits there by quota alone, nodes or not
		}
		if elastic[f] {
			return true, "" // spot and provisioned nodes come when asked for
		}
	}
	if _, reason := empty.Fit(w); reason == allocator.ReasonNone {
		return true, ""
	}
	caps := map[string]allocator.FlavorCapacity{}
	for _, fc := range empty.Capacity(nil) {
		caps[fc.Flavor] = fc
	}
	var parts []string
	for _, f := range flavors {
		fc := caps[f]
		switch {
		case !tas[f]:
			continue
		case fc.Nodes == 0:
			parts = append(parts, fmt.Sprintf("flavor %s has no nodes, and Kueue's topology-aware scheduling admits only onto nodes that exist", f))
		case w.GPUs > fc.Total:
			parts = append(parts, fmt.Sprintf("flavor %s has only %d GPUs in all", f, fc.Total))
		case w.Topology != allocator.LevelNone && w.GPUs > fc.Largest[w.Topology]:
			parts = append(parts, fmt.Sprintf("no %s of flavor %s has %d GPUs (at most %d)", w.Topology, f, w.GPUs, fc.Largest[w.Topology]))
		default:
			parts = append(parts, fmt.Sprintf("its pods do not fit on flavor %s's nodes", f))
		}
	}
	if len(parts) == 0 {
		return true, ""
	}
	return false, strings.Join(parts, "; ")
}
