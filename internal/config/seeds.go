package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// seedList reads simulation.running: work already running on a fresh
// simulated cluster. Each seed must be a request the bot would accept,
// fit its flavor's nodes and topology, and fit next to the seeds before
// it in the flavor's GPUs and its team's quota.
func (p *parser) seedList(n *yaml.Node) {
	for i, e := range p.list(n, "simulation.running") {
		if s, use, ok := p.seed(e, index("simulation.running", i)); ok {
			p.cfg.seeds = append(p.cfg.seeds, s)
			p.cfg.seedUse = append(p.cfg.seedUse, use)
		}
	}
}

func (p *parser) seed(n *yaml.Node, path string) (commands.Seed, SeedUse, bool) {
	f := p.mapping(n, path, "requester", "team", "gpus", "flavor", "priority",
		"startedAgo", "duration", "topology", "template", "reason", "gpuUtilization", "podsReady")
	ok := true
	use := p.seedUse(f, path)
	// ref reads a required or optional reference to a declared name.
	ref := func(key string, r *registry, required bool) string {
		var v *yaml.Node
		if required {
			v = p.required(f, key)
		} else {
			v = f.get(key)
		}
		if v == nil {
			ok = ok && !required
			return ""
		}
		s, okS := p.str(v, field(path, key))
		if !okS || !r.ref(p.decoder, word{s, v, field(path, key)}) {
			ok = false
		}
		return s
	}
	seed := commands.Seed{
		Requester: ref("requester", p.people, true),
		Spec: commands.RequestSpec{
			Team:     ref("team", p.teams, true),
			Flavor:   ref("flavor", p.flavors, true),
			Priority: ref("priority", p.priorities, false),
			Template: ref("template", p.templates, false),
		},
	}
	if seed.Spec.Priority == "" {
		seed.Spec.Priority = p.cfg.settings.DefaultPriority
	}
	if seed.Spec.Template == "" && len(p.cfg.settings.Templates) > 0 {
		seed.Spec.Template = p.cfg.settings.Templates[0]
	}
	if v := f.get("reason"); v != nil {
		seed.Spec.Reason, _ = p.str(v, field(path, "reason"))
	}
	level := allocator.LevelNone
	if v := f.get("topology"); v != nil {
		if s, okS := p.str(v, field(path, "topology")); okS {
			l, err := allocator.ParseLevel(s)
			if err != nil {
				p.errorf(v, field(path, "topology"), "%s", unknown("topology level", s, []string{"host", "rack", "block"}))
				ok = false
			}
			level = l
			seed.Spec.Topology = l.String()
		}
	}
	if v := f.get("startedAgo"); v != nil {
		seed.StartedAgo, _ = p.durationOrZero(v, field(path, "startedAgo"))
	}
	if v := p.required(f, "duration"); v != nil {
		if d, okD := p.duration(v, field(path, "duration")); okD {
			max := p.cfg.settings.MaxDuration
			switch {
			case d <= seed.StartedAgo:
				p.errorf(v, field(path, "duration"), "must be longer than startedAgo (%s): the work would have ended already", f.get("startedAgo").Value)
			case max > 0 && d > max:
				p.errorf(v, field(path, "duration"), "is longer than requests.maxDuration allows")
			default:
				seed.Spec.Duration = d
			}
		}
	}
	gpusNode := p.required(f, "gpus")
	if gpusNode != nil {
		seed.Spec.GPUs, _ = p.integer(gpusNode, field(path, "gpus"), 1, maxGPUs)
	}
	if !ok || seed.Spec.GPUs == 0 || seed.Spec.Duration == 0 {
		return seed, use, false
	}
	gpusPath := field(path, "gpus")
	ti, fi := p.teamInfo[seed.Spec.Team], p.flavorInfo[seed.Spec.Flavor]
	if ti == nil || fi == nil {
		return seed, use, false
	}
	if !ti.people[seed.Requester] {
		p.errorf(f.get("requester"), field(path, "requester"), "%s is not a lead or member of team %s", seed.Requester, seed.Spec.Team)
		return seed, use, false
	}
	queue := p.cfg.cluster.Queues[ti.index]
	quota, hasQuota := queue.Quotas[seed.Spec.Flavor]
	if !hasQuota {
		p.errorf(f.get("flavor"), field(path, "flavor"), "team %s has no quota for %s (its flavors: %s)", seed.Spec.Team, seed.Spec.Flavor, strings.Join(queue.Flavors, ", "))
		return seed, use, false
	}
	if msg := fits(seed.Spec.GPUs, level, fi); msg != "" {
		p.errorf(gpusNode, gpusPath, "%s", msg)
		return seed, use, false
	}
	if total, after := fi.nodes*fi.flavor.GPUsPerNode, fi.seededGPUs+seed.Spec.GPUs; after > total {
		p.errorf(gpusNode, gpusPath, "with the seeds before it, %d %s GPUs would run, more than the %d there are", after, seed.Spec.Flavor, total)
		return seed, use, false
	}
	used := ti.seeded[seed.Spec.Flavor] + seed.Spec.GPUs
	switch {
	case queue.Cohort == "" && used > quota.Nominal:
		p.errorf(gpusNode, gpusPath, "with the seeds before it, team %s would use %d %s GPUs, more than its nominal quota of %d (it has no cohort to borrow from)",
			seed.Spec.Team, used, seed.Spec.Flavor, quota.Nominal)
		return seed, use, false
	case quota.BorrowingLimit != nil && used > quota.Nominal+*quota.BorrowingLimit:
		p.errorf(gpusNode, gpusPath, "with the seeds before it, team %s would use %d %s GPUs, more than its nominal quota of %d plus its borrowingLimit of %d",
			seed.Spec.Team, used, seed.Spec.Flavor, quota.Nominal, *quota.BorrowingLimit)
		return seed, use, false
	}
	fi.seededGPUs += seed.Spec.GPUs
	ti.seeded[seed.Spec.Flavor] = used
	return seed, use, true
}

// fits explains why gpus GPUs at the given topology level cannot run on a
// flavor's nodes, or returns "". The pods are split by allocator.PodShape,
// the one rule chat, the form, templates and the simulator use: G GPUs on
// N-GPU nodes are ceil(G/N) equal pods, so 10 on 8-GPU nodes is 2 pods of
// 5 and 9 is refused.
func fits(gpus int, level allocator.Level, fi *flavorInfo) string {
	per := fi.flavor.GPUsPerNode
	if _, _, err := allocator.PodShape(gpus, per); err != nil {
		return fmt.Sprintf("on %s nodes: %v", fi.flavor.Name, err)
	}
	domain, what := fi.nodes*per, "all of "+fi.flavor.Name
	switch level {
	case allocator.LevelHost:
		domain, what = per, "one "+fi.flavor.Name+" node"
	case allocator.LevelRack:
		domain, what = fi.nodesPerRack*per, "one "+fi.flavor.Name+" rack"
	case allocator.LevelBlock:
		domain, what = fi.racksPerBlock*fi.nodesPerRack*per, "one "+fi.flavor.Name+" block"
	}
	if gpus > domain {
		return fmt.Sprintf("%d GPUs do not fit in %s, which has %d", gpus, what, domain)
	}
	return ""
}
