package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// Kueue's preemption policies, by the config key that sets them.
var (
	withinTeamPolicies = []string{allocator.PreemptNever, allocator.PreemptLowerPriority, allocator.PreemptLowerOrNewerEqualPriority}
	reclaimPolicies    = []string{allocator.PreemptNever, allocator.PreemptLowerPriority, allocator.PreemptAny}
)

func (p *parser) flavorList(n *yaml.Node) {
	if n == nil {
		return
	}
	items := p.entries(n, "flavors", "flavor")
	for i, e := range items {
		path := index("flavors", i)
		f := p.mapping(e, path, append([]string{"name", "gpusPerNode", "nodes", "accelerator", "nodeLabels"}, elasticFlavorKeys...)...)
		name, ok := p.name(f, p.flavors, label, labelRule)
		fi := &flavorInfo{flavor: allocator.Flavor{Name: name}}
		terms, said := p.elasticFlavor(f, path, name)
		fi.flavor.Elastic = terms.Elastic()
		if ok && said {
			p.cfg.settings.Elastic.Flavors = append(p.cfg.settings.Elastic.Flavors, terms)
		}
		if v := p.required(f, "gpusPerNode"); v != nil {
			fi.flavor.GPUsPerNode, _ = p.integer(v, field(path, "gpusPerNode"), 1, maxGPUsPerNode)
		}
		if ok {
			p.flavorNodes(f, path, name)
		}
		blocks := p.layout(f, fi)
		if !ok || fi.flavor.GPUsPerNode == 0 || blocks == 0 {
			continue
		}
		p.flavorInfo[name] = fi
		p.cfg.cluster.Flavors = append(p.cfg.cluster.Flavors, fi.flavor)
		for b := 1; b <= blocks; b++ {
			block := fmt.Sprintf("%s-b%d", name, b)
			for r := 1; r <= fi.racksPerBlock; r++ {
				rack := fmt.Sprintf("%s-r%d", block, r)
				for k := 1; k <= fi.nodesPerRack; k++ {
					p.cfg.cluster.Nodes = append(p.cfg.cluster.Nodes, allocator.Node{
						Name:   fmt.Sprintf("%s-n%d", rack, k),
						Flavor: name,
						GPUs:   fi.flavor.GPUsPerNode,
						Block:  block,
						Rack:   rack,
						CPU:    fi.cpu,
						Memory: fi.memory,
					})
				}
			}
		}
	}
}

// layout reads a flavor's "nodes" and returns its number of blocks, or 0
// if anything in it is wrong.
func (p *parser) layout(f *fields, fi *flavorInfo) int {
	n := p.required(f, "nodes")
	if n == nil {
		return 0
	}
	errs := len(p.errs)
	path := field(f.path, "nodes")
	fi.layout, fi.layoutPath = f.pos("nodes"), path
	g := p.mapping(n, path, "blocks", "racksPerBlock", "nodesPerRack", "cpu", "memory")
	if v := g.get("cpu"); v != nil {
		fi.cpu, _ = p.cores(v, field(path, "cpu"))
	}
	if v := g.get("memory"); v != nil {
		fi.memory, _ = p.memory(v, field(path, "memory"))
	}
	count := func(key string) int {
		v := g.get(key)
		if v == nil {
			return 1
		}
		c, _ := p.integer(v, field(path, key), 1, maxLayout)
		return c
	}
	blocks := count("blocks")
	fi.racksPerBlock = count("racksPerBlock")
	if v := p.required(g, "nodesPerRack"); v != nil {
		fi.nodesPerRack, _ = p.integer(v, field(path, "nodesPerRack"), 1, maxLayout)
	}
	fi.nodes = blocks * fi.racksPerBlock * fi.nodesPerRack
	if total := len(p.cfg.cluster.Nodes) + fi.nodes; total > maxNodes && len(p.errs) == errs {
		p.errorf(n, path, "%d×%d×%d nodes make %d in the simulated cluster, more than its limit of %d", blocks, fi.racksPerBlock, fi.nodesPerRack, total, maxNodes)
	}
	if len(p.errs) > errs {
		return 0
	}
	return blocks
}

func (p *parser) teamList(n *yaml.Node) {
	if n == nil {
		return
	}
	items := p.entries(n, "teams", "team")
	for i, e := range items {
		path := index("teams", i)
		f := p.mapping(e, path, "name", "cohort", "channel", "weight", "leads", "members", "quota", "preemption", "flavorFungibility", "namespace", "localQueue", "elasticBudget")
		name, ok := p.name(f, p.teams, label, labelRule)
		if ok && contains(p.flavors.names, name) {
			p.errorf(f.get("name"), field(path, "name"), "team %q has the name of a flavor, which would make \"/gpu queue %s\" ambiguous", name, name)
		}
		team := commands.Team{Name: name, Channel: p.cfg.settings.DefaultChannel}
		queue := allocator.Queue{Name: name, Weight: 1, Quotas: map[string]allocator.Quota{},
			Preemption: allocator.Preemption{WithinClusterQueue: allocator.PreemptNever, ReclaimWithinCohort: allocator.PreemptNever}}
		if v := f.get("cohort"); v != nil {
			if s, okC := p.str(v, field(path, "cohort")); okC {
				if label.MatchString(s) {
					queue.Cohort = s
				} else {
					p.errorf(v, field(path, "cohort"), "%q is not a valid cohort name: use %s", s, labelRule)
				}
			}
		}
		if v := f.get("channel"); v != nil {
			if s, okC := p.channel(v, field(path, "channel")); okC {
				team.Channel = s
			}
		}
		if v := f.get("weight"); v != nil {
			if w, okW := p.positive(v, field(path, "weight")); okW {
				queue.Weight = w
			}
		}
		ti := &teamInfo{index: len(p.cfg.settings.Teams), people: map[string]bool{}, seeded: map[string]int{}}
		team.Leads = p.teamPeople(f, "leads", ti)
		team.Members = p.teamPeople(f, "members", ti)
		p.quota(p.required(f, "quota"), field(path, "quota"), &queue)
		p.checkGroup(f.get("quota"), field(path, "quota"), queue.Flavors, queue.Quotas)
		p.preemption(f.get("preemption"), field(path, "preemption"), &queue.Preemption, queue.Cohort != "")
		p.flavorFungibility(f.get("flavorFungibility"), field(path, "flavorFungibility"), &queue.FlavorFungibility)
		p.teamCluster(f, path, name)
		if ok {
			p.teamBudget(f, path, name)
			p.teamNodes[name] = f.pos("quota")
			p.teamInfo[name] = ti
			p.cfg.settings.Teams = append(p.cfg.settings.Teams, team)
			p.cfg.cluster.Queues = append(p.cfg.cluster.Queues, queue)
		}
	}
}

// teamPeople reads a team's leads or members; a person may be in a team
// once, as a lead or as a member.
func (p *parser) teamPeople(f *fields, key string, ti *teamInfo) []string {
	v := f.get(key)
	if v == nil {
		return nil
	}
	var out []string
	for _, w := range p.words(v, field(f.path, key)) {
		if ti.people[w.s] {
			p.errorf(w.node, w.path, "%s is already in this team (a lead need not be listed as a member)", w.s)
			continue
		}
		if p.people.ref(p.decoder, w) {
			ti.people[w.s] = true
			out = append(out, w.s)
		}
	}
	return out
}

// quota reads a team's quota per flavor, keeping the order as written.
func (p *parser) quota(n *yaml.Node, path string, q *allocator.Queue) {
	if n == nil {
		return
	}
	f := p.anyMapping(n, path)
	if len(f.order) == 0 && f.node.Kind == yaml.MappingNode {
		p.errorf(n, path, "must give a quota for at least one flavor")
	}
	for _, flavor := range f.order {
		fpath := field(path, flavor)
		okFlavor := p.flavors.ref(p.decoder, word{flavor, f.keys[flavor], fpath})
		v := p.required(f, flavor)
		if v == nil {
			continue
		}
		g := p.mapping(v, fpath, "nominal", "borrowingLimit", "lendingLimit", "cpu", "memory")
		var quota allocator.Quota
		okNominal := false
		if nv := p.required(g, "nominal"); nv != nil {
			quota.Nominal, okNominal = p.integer(nv, field(fpath, "nominal"), 0, maxGPUs)
		}
		limit := func(key string) *int {
			lv := g.get(key)
			if lv == nil {
				return nil
			}
			if q.Cohort == "" {
				p.errorf(lv, field(fpath, key), "needs a cohort to borrow from or lend to; set the team's cohort or remove it")
				return nil
			}
			l, ok := p.integer(lv, field(fpath, key), 0, maxGPUs)
			if !ok {
				return nil
			}
			return &l
		}
		quota.BorrowingLimit = limit("borrowingLimit")
		quota.LendingLimit = limit("lendingLimit")
		if l := quota.LendingLimit; l != nil && okNominal && *l > quota.Nominal {
			p.errorf(g.get("lendingLimit"), field(fpath, "lendingLimit"), "must not be more than nominal (%d)", quota.Nominal)
		}
		p.resourceQuotas(g, fpath, &quota, q.Cohort != "")
		if okFlavor {
			q.Flavors = append(q.Flavors, flavor)
			q.Quotas[flavor] = quota
			if fi := p.flavorInfo[flavor]; fi != nil {
				fi.nominal += quota.Nominal
			}
		}
	}
}

func (p *parser) preemption(n *yaml.Node, path string, pre *allocator.Preemption, cohort bool) {
	if n == nil {
		return
	}
	f := p.mapping(n, path, "withinTeam", "reclaimWithinCohort", "borrowWithinCohort", "borrowWithinCohortMaxPriority")
	p.borrowWithinCohort(f, path, pre, cohort)
	policy := func(key string, known []string, out *string) {
		if v := f.get(key); v != nil {
			if s, ok := p.oneOf(v, field(path, key), "policy", known...); ok {
				*out = s
			}
		}
	}
	policy("withinTeam", withinTeamPolicies, &pre.WithinClusterQueue)
	policy("reclaimWithinCohort", reclaimPolicies, &pre.ReclaimWithinCohort)
}

// checkQuotaTotals reports flavors whose teams' nominal quotas add up to
// more GPUs than the simulated nodes have: such a cluster could never
// give every team its quota.
func (p *parser) checkQuotaTotals() {
	for _, f := range p.cfg.cluster.Flavors {
		fi := p.flavorInfo[f.Name]
		gpus := fi.nodes * f.GPUsPerNode
		if fi.nominal <= gpus {
			continue
		}
		var parts []string
		for i, q := range p.cfg.cluster.Queues {
			if quota, ok := q.Quotas[f.Name]; ok && quota.Nominal > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", p.cfg.settings.Teams[i].Name, quota.Nominal))
			}
		}
		p.errorf(fi.layout, fi.layoutPath, "the teams' nominal quotas for %s add up to %d GPUs (%s), more than the %d GPUs of its %d nodes",
			f.Name, fi.nominal, strings.Join(parts, ", "), gpus, fi.nodes)
	}
}

// flavorNodes reads which nodes a flavor's ResourceFlavor selects:
// accelerator (the value of kubernetes.acceleratorLabel) or nodeLabels.
func (p *parser) flavorNodes(f *fields, path, flavor string) {
	acc, labels := f.get("accelerator"), f.get("nodeLabels")
	if acc != nil && labels != nil {
		p.errorf(labels, field(path, "nodeLabels"), "give accelerator or nodeLabels, not both (nodeLabels may include the accelerator label)")
		return
	}
	k := &p.cfg.kube
	if acc != nil {
		if v, ok := p.str(acc, field(path, "accelerator")); ok {
			if !labelValue.MatchString(v) {
				p.errorf(acc, field(path, "accelerator"), "%q is not a valid node label value: %s", v, labelValueRule)
				return
			}
			if k.Accelerators == nil {
				k.Accelerators = map[string]string{}
			}
			k.Accelerators[flavor] = v
		}
	}
	if labels == nil {
		return
	}
	g := p.anyMapping(labels, field(path, "nodeLabels"))
	out := map[string]string{}
	for _, key := range g.order {
		kpath := field(field(path, "nodeLabels"), key)
		if !labelKey.MatchString(key) || len(key) > 316 {
			p.errorf(g.keys[key], kpath, "%q is not a valid node label name (like nvidia.com/gpu.product)", key)
			continue
		}
		v, ok := p.str(g.get(key), kpath)
		if !ok {
			continue
		}
		if !labelValue.MatchString(v) {
			p.errorf(g.get(key), kpath, "%q is not a valid node label value: %s", v, labelValueRule)
			continue
		}
		out[key] = v
	}
	if len(out) > 0 {
		if k.NodeLabels == nil {
			k.NodeLabels = map[string]map[string]string{}
		}
		k.NodeLabels[flavor] = out
	}
}
