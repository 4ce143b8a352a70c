package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpubot/gpubot/allocator"
)

// Kueue's settings beyond GPU quotas: CPU and memory next to GPUs
// (teams' and cohorts' quotas, the simulated nodes, what requests ask for
// per GPU), Cohort objects (a tree with quota of its own), Kueue's Fair
// Sharing (admission.mode FairSharing), borrowWithinCohort and
// flavorFungibility.

var (
	fungibilityValues = []string{allocator.MayStopSearch, allocator.TryNextFlavor}
	preferenceValues  = []string{allocator.BorrowingOverPreemption, allocator.PreemptionOverBorrowing}
	strategyValues    = []string{allocator.LessThanOrEqualToFinalShare, allocator.LessThanInitialShare}
	bwcPolicies       = []string{allocator.PreemptNever, allocator.PreemptLowerPriority}
)

// modeKueueFairSharing is admission.mode for Kueue's Fair Sharing.
const modeKueueFairSharing = "FairSharing"

const maxCores = 1_000_000

// cores reads a CPU amount in cores (an integer or a decimal, at most
// three decimals: millicores), returning millicores.
func (p *parser) cores(n *yaml.Node, path string) (int64, bool) {
	if !p.scalar(n, path, "a number of cores", "!!int", "!!float") {
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > maxCores {
		p.errorf(n, path, "must be a number of cores from 0 to %d", maxCores)
		return 0, false
	}
	return int64(math.Round(v * 1000)), true
}

// memory reads an amount of memory: a Kubernetes quantity ("512Gi",
// "1Ti", "64G", or bytes), returning bytes.
func (p *parser) memory(n *yaml.Node, path string) (int64, bool) {
	if !p.scalar(n, path, `an amount of memory like "512Gi"`, "!!str", "!!int") {
		return 0, false
	}
	b, err := parseMemory(n.Value)
	if err != nil {
		p.errorf(n, path, "%v", err)
		return 0, false
	}
	return b, true
}

var memorySuffixes = []struct {
	s string
	m int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15},
}

// parseMemory parses a Kubernetes memory quantity: a whole number with
// an optional binary (Ki, Mi, Gi, Ti, Pi) or decimal (k, M, G, T, P)
// suffix.
func parseMemory(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, sf := range memorySuffixes {
		if strings.HasSuffix(num, sf.s) {
			num, mult = strings.TrimSuffix(num, sf.s), sf.m
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not an amount of memory: write a whole number with Ki, Mi, Gi or Ti (binary) or k, M, G, T (decimal), like \"512Gi\"", s)
	}
	return v * mult, nil
}

// resourceQuota reads a team's or cohort's cpu or memory quota on a
// flavor: a bare amount (the nominal quota) or {nominal, borrowingLimit,
// lendingLimit}.
func (p *parser) resourceQuota(n *yaml.Node, path string, read func(*yaml.Node, string) (int64, bool), cohort bool) *allocator.ResourceQuota {
	if resolve(n).Kind != yaml.MappingNode {
		v, ok := read(n, path)
		if !ok {
			return nil
		}
		return &allocator.ResourceQuota{Nominal: v}
	}
	g := p.mapping(n, path, "nominal", "borrowingLimit", "lendingLimit")
	rq := &allocator.ResourceQuota{}
	if nv := p.required(g, "nominal"); nv != nil {
		rq.Nominal, _ = read(nv, field(path, "nominal"))
	}
	limit := func(key string) *int64 {
		lv := g.get(key)
		if lv == nil {
			return nil
		}
		if !cohort {
			p.errorf(lv, field(path, key), "needs a cohort to borrow from or lend to; set the team's cohort or remove it")
			return nil
		}
		v, ok := read(lv, field(path, key))
		if !ok {
			return nil
		}
		return &v
	}
	rq.BorrowingLimit = limit("borrowingLimit")
	rq.LendingLimit = limit("lendingLimit")
	if l := rq.LendingLimit; l != nil && *l > rq.Nominal {
		p.errorf(g.get("lendingLimit"), field(path, "lendingLimit"), "must not be more than nominal")
	}
	return rq
}

// resourceQuotas reads the cpu and memory keys of a flavor's quota.
func (p *parser) resourceQuotas(g *fields, path string, q *allocator.Quota, cohort bool) {
	if v := g.get("cpu"); v != nil {
		q.CPU = p.resourceQuota(v, field(path, "cpu"), p.cores, cohort)
	}
	if v := g.get("memory"); v != nil {
		q.Memory = p.resourceQuota(v, field(path, "memory"), p.memory, cohort)
	}
}

// checkGroup reports a cpu or memory quota given on some of a team's
// (or cohort's) flavors but not all: they are one Kueue resource group,
// whose flavors must each give every resource it covers.
func (p *parser) checkGroup(n *yaml.Node, path string, flavors []string, quotas map[string]allocator.Quota) {
	for _, r := range []string{"cpu", "memory"} {
		var with, without []string
		for _, f := range flavors {
			q := quotas[f]
			if (r == "cpu" && q.CPU != nil) || (r == "memory" && q.Memory != nil) {
				with = append(with, f)
			} else {
				without = append(without, f)
			}
		}
		if len(with) > 0 && len(without) > 0 {
			p.errorf(n, path, "gives a %s quota on %s but not on %s: a ClusterQueue's flavors must all give it (write %s: 0 where there is none)",
				r, strings.Join(with, ", "), strings.Join(without, ", "), r)
		}
	}
}

// flavorFungibility reads a team's flavorFungibility.
func (p *parser) flavorFungibility(n *yaml.Node, path string, ff *allocator.FlavorFungibility) {
	if n == nil {
		return
	}
	f := p.mapping(n, path, "whenCanBorrow", "whenCanPreempt", "preference")
	one := func(key string, known []string, out *string) {
		if v := f.get(key); v != nil {
			if s, ok := p.oneOf(v, field(path, key), "value", known...); ok {
				*out = s
			}
		}
	}
	one("whenCanBorrow", fungibilityValues, &ff.WhenCanBorrow)
	one("whenCanPreempt", fungibilityValues, &ff.WhenCanPreempt)
	one("preference", preferenceValues, &ff.Preference)
	if ff.Preference != "" && (ff.WhenCanBorrow != allocator.TryNextFlavor || ff.WhenCanPreempt != allocator.TryNextFlavor) {
		p.errorf(f.get("preference"), field(path, "preference"), "needs whenCanBorrow and whenCanPreempt TryNextFlavor (Kueue rejects it otherwise)")
		ff.Preference = ""
	}
}

// borrowWithinCohort reads a team's preemption.borrowWithinCohort and
// its maxPriorityThreshold (a priority name).
func (p *parser) borrowWithinCohort(f *fields, path string, pre *allocator.Preemption, cohort bool) {
	v := f.get("borrowWithinCohort")
	if v == nil {
		if m := f.get("borrowWithinCohortMaxPriority"); m != nil {
			p.errorf(m, field(path, "borrowWithinCohortMaxPriority"), "is only used with borrowWithinCohort LowerPriority")
		}
		return
	}
	s, ok := p.oneOf(v, field(path, "borrowWithinCohort"), "policy", bwcPolicies...)
	if !ok {
		return
	}
	if s != allocator.PreemptNever && !cohort {
		p.errorf(v, field(path, "borrowWithinCohort"), "needs a cohort; set the team's cohort or remove it")
		return
	}
	pre.BorrowWithinCohort = s
	m := f.get("borrowWithinCohortMaxPriority")
	if m == nil {
		return
	}
	name, ok := p.str(m, field(path, "borrowWithinCohortMaxPriority"))
	if !ok || !p.priorities.ref(p.decoder, word{name, m, field(path, "borrowWithinCohortMaxPriority")}) {
		return
	}
	for _, pr := range p.cfg.settings.Priorities {
		if pr.Name == name {
			v := pr.Value
			pre.BorrowWithinCohortMaxPriority = &v
		}
	}
}

// preemptionStrategies reads admission.preemptionStrategies.
func (p *parser) preemptionStrategies(n *yaml.Node, pol *allocator.Policy) {
	ws := p.words(n, "admission.preemptionStrategies")
	var names []string
	for _, w := range ws {
		if !contains(strategyValues, w.s) {
			p.errorf(w.node, w.path, "%s", unknown("strategy", w.s, strategyValues))
			return
		}
		names = append(names, w.s)
	}
	switch {
	case len(names) == 0:
	case len(names) == 1:
	case len(names) == 2 && names[0] == allocator.LessThanOrEqualToFinalShare && names[1] == allocator.LessThanInitialShare:
	default:
		p.errorf(n, "admission.preemptionStrategies", "must be one strategy, or %s then %s (as Kueue allows)", allocator.LessThanOrEqualToFinalShare, allocator.LessThanInitialShare)
		return
	}
	if pol.FairSharing != nil {
		pol.FairSharing.PreemptionStrategies = names
	}
}

// cohortList reads the top-level cohorts: Kueue Cohort objects with a
// parent, quota of their own and a fair-sharing weight.
func (p *parser) cohortList(n *yaml.Node) {
	if n == nil {
		return
	}
	declared := map[string]*yaml.Node{}
	for i, e := range p.entries(n, "cohorts", "cohort") {
		path := index("cohorts", i)
		f := p.mapping(e, path, "name", "parent", "weight", "quota")
		nv := p.required(f, "name")
		if nv == nil {
			continue
		}
		name, ok := p.str(nv, field(path, "name"))
		if !ok {
			continue
		}
		if !label.MatchString(name) {
			p.errorf(nv, field(path, "name"), "%q is not a valid cohort name: use %s", name, labelRule)
			continue
		}
		if _, dup := declared[name]; dup {
			p.errorf(nv, field(path, "name"), "cohort %q is listed twice", name)
			continue
		}
		declared[name] = nv
		co := allocator.Cohort{Name: name, Quotas: map[string]allocator.Quota{}}
		if v := f.get("parent"); v != nil {
			if s, ok := p.str(v, field(path, "parent")); ok {
				if label.MatchString(s) && s != name {
					co.Parent = s
				} else {
					p.errorf(v, field(path, "parent"), "%q is not another cohort's name", s)
				}
			}
		}
		if v := f.get("weight"); v != nil {
			co.Weight, _ = p.nonNegative(v, field(path, "weight"))
			if co.Weight == 0 {
				co.Weight = allocator.ZeroWeight
			}
		}
		if q := f.get("quota"); q != nil {
			g := p.anyMapping(q, field(path, "quota"))
			for _, flavor := range g.order {
				fpath := field(field(path, "quota"), flavor)
				if !p.flavors.ref(p.decoder, word{flavor, g.keys[flavor], fpath}) {
					continue
				}
				h := p.mapping(g.get(flavor), fpath, "nominal", "borrowingLimit", "lendingLimit", "cpu", "memory")
				var quota allocator.Quota
				if v := h.get("nominal"); v != nil {
					quota.Nominal, _ = p.integer(v, field(fpath, "nominal"), 0, maxGPUs)
				}
				for _, key := range []string{"borrowingLimit", "lendingLimit"} {
					lv := h.get(key)
					if lv == nil {
						continue
					}
					if co.Parent == "" {
						p.errorf(lv, field(fpath, key), "needs a parent cohort (Kueue rejects limits on a root cohort)")
						continue
					}
					if l, ok := p.integer(lv, field(fpath, key), 0, maxGPUs); ok {
						if key == "borrowingLimit" {
							quota.BorrowingLimit = &l
						} else {
							quota.LendingLimit = &l
						}
					}
				}
				p.resourceQuotas(h, fpath, &quota, co.Parent != "")
				co.Quotas[flavor] = quota
			}
			var fl []string
			for _, f := range g.order {
				if _, ok := co.Quotas[f]; ok {
					fl = append(fl, f)
				}
			}
			p.checkGroup(q, field(path, "quota"), fl, co.Quotas)
		}
		p.cfg.cluster.Cohorts = append(p.cfg.cluster.Cohorts, co)
	}
	p.cohortNodes = declared
}

// nonNegative converts a finite number >= 0.
func (p *parser) nonNegative(n *yaml.Node, path string) (float64, bool) {
	if !p.scalar(n, path, "a number", "!!int", "!!float") {
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		p.errorf(n, path, "must be a number from 0 up")
		return 0, false
	}
	return v, true
}

// checkCoverage reports teams whose quota does not cover the CPU or
// memory requests ask for (requests.cpuPerGPU, memoryPerGPU): Kueue
// admits nothing that asks for a resource its ClusterQueue has no quota
// for.
func (p *parser) checkCoverage(n *yaml.Node) {
	set := &p.cfg.settings
	if n == nil || (set.CPUPerGPU == 0 && set.MemoryPerGPU == 0) {
		return
	}
	g := p.mapping(n, "requests", "maxDuration", "endWarning", "cpuPerGPU", "memoryPerGPU")
	for i, q := range p.cfg.cluster.Queues {
		for _, f := range q.Flavors {
			qt := q.Quotas[f]
			if set.CPUPerGPU > 0 && qt.CPU == nil {
				p.errorf(g.get("cpuPerGPU"), "requests.cpuPerGPU", "team %s has no cpu quota on %s: Kueue admits nothing that asks for CPU where its ClusterQueue has no CPU quota; give teams[%d].quota.%s a cpu, or remove requests.cpuPerGPU", q.Name, f, i, f)
				return
			}
			if set.MemoryPerGPU > 0 && qt.Memory == nil {
				p.errorf(g.get("memoryPerGPU"), "requests.memoryPerGPU", "team %s has no memory quota on %s: Kueue admits nothing that asks for memory where its ClusterQueue has no memory quota; give teams[%d].quota.%s a memory, or remove requests.memoryPerGPU", q.Name, f, i, f)
				return
			}
		}
	}
}

// checkCluster lets the allocator check what the file says as a whole
// (a cycle of parent cohorts, quotas it rejects) and reports it at the
// cohorts.
func (p *parser) checkCluster(n *yaml.Node) {
	if len(p.errs) > 0 {
		return
	}
	if _, err := allocator.NewSnapshot(&p.cfg.cluster, time.Time{}, nil, nil); err != nil {
		msg := strings.TrimPrefix(err.Error(), allocator.ErrInvalid.Error()+": ")
		if n != nil {
			p.errorf(n, "cohorts", "%s", msg)
		} else {
			p.errorf(nil, "teams", "%s", msg)
		}
	}
}
