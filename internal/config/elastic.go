package config

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpubot/gpubot/commands"
)

// Keys of a flavor entry that describe elastic capacity.
var elasticFlavorKeys = []string{"capacity", "pricePerGPUHour", "maxRunTime", "provisioning", "simulation"}

var capacityKinds = []string{string(commands.CapacityReserved), string(commands.CapacitySpot), string(commands.CapacityProvisioned)}

// SimFlavor is how the simulated cluster behaves for one elastic flavor.
type SimFlavor struct {
	// ReclaimAfter: a spot flavor's nodes are reclaimed from work that has
	// run this long on them (0: never).
	ReclaimAfter time.Duration
	// ProvisioningTime: a provisioned flavor's nodes come this long after
	// they are asked for.
	ProvisioningTime time.Duration
	// FailAttempts: the first this many provisioning attempts of each
	// request fail; FailurePercent: each later one fails with this
	// chance, drawn from Seed, the request and the attempt.
	FailAttempts   int
	FailurePercent float64
	Seed           int64
}

// SimFlavors returns the simulated behaviour of each elastic flavor, by name.
func (c *Config) SimFlavors() map[string]SimFlavor {
	out := map[string]SimFlavor{}
	for k, v := range c.simFlavors {
		out[k] = v
	}
	return out
}

// elasticFlavor reads the elastic keys of flavor entry f (see
// elasticFlavorKeys). It returns the flavor's terms, or false for a
// reserved flavor with nothing to say.
func (p *parser) elasticFlavor(f *fields, path, name string) (commands.FlavorTerms, bool) {
	t := commands.FlavorTerms{Flavor: name, Capacity: commands.CapacityReserved}
	if v := f.get("capacity"); v != nil {
		if s, ok := p.oneOf(v, field(path, "capacity"), "capacity", capacityKinds...); ok {
			t.Capacity = commands.CapacityKind(s)
		}
	}
	said := t.Capacity != commands.CapacityReserved
	if v := f.get("pricePerGPUHour"); v != nil {
		t.PricePerGPUHour, _ = p.positive(v, field(path, "pricePerGPUHour"))
		said = true
	}
	if v := f.get("maxRunTime"); v != nil {
		if t.Capacity == commands.CapacityReserved {
			p.errorf(v, field(path, "maxRunTime"), "is for spot and provisioned flavors; set capacity or remove it")
		} else {
			t.MaxRunTime, _ = p.duration(v, field(path, "maxRunTime"))
		}
	}
	pv := f.get("provisioning")
	switch {
	case pv != nil && t.Capacity != commands.CapacityProvisioned:
		p.errorf(f.pos("provisioning"), field(path, "provisioning"), "is only for flavors with capacity: provisioned")
	case t.Capacity == commands.CapacityProvisioned:
		t.AdmissionCheck, t.ProvisioningRequestConfig, t.ProvisioningPrior = name, name, commands.DefaultProvisioningPrior
		t.Retry = commands.DefaultProvisioningRetry
		if pv != nil {
			ppath := field(path, "provisioning")
			g := p.mapping(pv, ppath, "admissionCheck", "provisioningRequestConfig", "prior", "retries", "retryBackoff", "maxRetryBackoff")
			if v := g.get("retries"); v != nil {
				t.Retry.Limit, _ = p.integer(v, field(ppath, "retries"), 0, 1000)
			}
			for key, out := range map[string]*time.Duration{"retryBackoff": &t.Retry.Backoff, "maxRetryBackoff": &t.Retry.MaxBackoff} {
				if v := g.get(key); v != nil {
					if d, ok := p.duration(v, field(ppath, key)); ok {
						*out = d
					}
				}
			}
			if t.Retry.MaxBackoff < t.Retry.Backoff {
				p.errorf(pv, field(ppath, "maxRetryBackoff"), "(%s) is shorter than retryBackoff (%s)", t.Retry.MaxBackoff, t.Retry.Backoff)
			}
			for key, out := range map[string]*string{"admissionCheck": &t.AdmissionCheck, "provisioningRequestConfig": &t.ProvisioningRequestConfig} {
				if v := g.get(key); v != nil {
					if s, ok := p.str(v, field(ppath, key)); ok {
						if !subdomain(s) {
							p.errorf(v, field(ppath, key), "%q is not a valid Kueue object name: lowercase letters, digits, '-' and '.', at most 253 characters", s)
						} else {
							*out = s
						}
					}
				}
			}
			if v := g.get("prior"); v != nil {
				if d, ok := p.duration(v, field(ppath, "prior")); ok {
					t.ProvisioningPrior = d
				}
			}
		}
	}
	if v := f.get("simulation"); v != nil {
		spath := field(path, "simulation")
		g := p.mapping(v, spath, "reclaimAfter", "provisioningTime", "failAttempts", "failurePercent", "seed")
		sf := SimFlavor{ProvisioningTime: t.ProvisioningPrior}
		if r := g.get("reclaimAfter"); r != nil {
			if t.Capacity != commands.CapacitySpot {
				p.errorf(g.pos("reclaimAfter"), field(spath, "reclaimAfter"), "is only for flavors with capacity: spot")
			} else {
				sf.ReclaimAfter, _ = p.duration(r, field(spath, "reclaimAfter"))
			}
		}
		if r := g.get("provisioningTime"); r != nil {
			if t.Capacity != commands.CapacityProvisioned {
				p.errorf(g.pos("provisioningTime"), field(spath, "provisioningTime"), "is only for flavors with capacity: provisioned")
			} else {
				sf.ProvisioningTime, _ = p.durationOrZero(r, field(spath, "provisioningTime"))
			}
		}
		for _, key := range []string{"failAttempts", "failurePercent", "seed"} {
			r := g.get(key)
			switch {
			case r == nil:
			case t.Capacity != commands.CapacityProvisioned:
				p.errorf(g.pos(key), field(spath, key), "is only for flavors with capacity: provisioned")
			case key == "failAttempts":
				sf.FailAttempts, _ = p.integer(r, field(spath, key), 0, 1000)
			case key == "failurePercent":
				sf.FailurePercent, _ = p.percent(r, field(spath, key))
			default:
				seed, _ := p.integer(r, field(spath, key), 0, 1<<31-1)
				sf.Seed = int64(seed)
			}
		}
		if t.Capacity == commands.CapacityReserved && g.get("reclaimAfter") == nil && g.get("provisioningTime") == nil {
			p.errorf(f.pos("simulation"), spath, "is only for spot and provisioned flavors")
		}
		if p.cfg.simFlavors == nil {
			p.cfg.simFlavors = map[string]SimFlavor{}
		}
		p.cfg.simFlavors[name] = sf
	} else if t.Capacity == commands.CapacityProvisioned {
		if p.cfg.simFlavors == nil {
			p.cfg.simFlavors = map[string]SimFlavor{}
		}
		p.cfg.simFlavors[name] = SimFlavor{ProvisioningTime: t.ProvisioningPrior}
	}
	return t, said
}

// subdomain reports whether s is a Kubernetes DNS subdomain name.
func subdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if !label.MatchString(part) {
			return false
		}
	}
	return true
}

// elasticSection reads the top-level elastic section.
func (p *parser) elasticSection(n *yaml.Node) {
	e := &p.cfg.settings.Elastic
	e.OfferAfter, e.Currency, e.WeekStart = commands.DefaultOfferAfter, "$", time.Monday
	if n == nil {
		return
	}
	f := p.mapping(n, "elastic", "offerAfter", "approvalAboveGPUs", "currency", "weekStart")
	if v := f.get("offerAfter"); v != nil {
		if d, ok := p.durationOrZero(v, "elastic.offerAfter"); ok {
			e.OfferAfter = d
		}
	}
	if v := f.get("approvalAboveGPUs"); v != nil {
		e.ApprovalAboveGPUs, _ = p.integer(v, "elastic.approvalAboveGPUs", 0, maxGPUs)
	}
	if v := f.get("currency"); v != nil {
		if s, ok := p.str(v, "elastic.currency"); ok {
			if s == "" || len([]rune(s)) > 4 || strings.ContainsAny(s, " \t\n") {
				p.errorf(v, "elastic.currency", "%q is not a currency sign: use up to 4 characters without spaces, like $ or EUR", s)
			} else {
				e.Currency = s
			}
		}
	}
	if v := f.get("weekStart"); v != nil {
		days := []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
		if s, ok := p.oneOf(v, "elastic.weekStart", "day", days...); ok {
			e.WeekStart = time.Weekday(slices.Index(days, s))
		}
	}
}

// teamBudget reads a team's elasticBudget.
func (p *parser) teamBudget(f *fields, path, team string) {
	v := f.get("elasticBudget")
	if v == nil {
		return
	}
	bpath := field(path, "elasticBudget")
	g := p.mapping(v, bpath, "gpuHoursPerWeek", "moneyPerWeek")
	var b commands.Budget
	h, m := g.get("gpuHoursPerWeek"), g.get("moneyPerWeek")
	switch {
	case h != nil && m != nil:
		p.errorf(m, field(bpath, "moneyPerWeek"), "give gpuHoursPerWeek or moneyPerWeek, not both")
		return
	case h != nil:
		b.GPUHours, _ = p.positive(h, field(bpath, "gpuHoursPerWeek"))
	case m != nil:
		b.Money, _ = p.positive(m, field(bpath, "moneyPerWeek"))
	default:
		p.errorf(f.pos("elasticBudget"), bpath, "must give gpuHoursPerWeek or moneyPerWeek")
		return
	}
	if b.GPUHours == 0 && b.Money == 0 {
		return
	}
	e := &p.cfg.settings.Elastic
	if e.Budgets == nil {
		e.Budgets = map[string]commands.Budget{}
	}
	e.Budgets[team] = b
	p.budgetNodes = append(p.budgetNodes, budgetNode{team: team, node: f.pos("elasticBudget"), path: bpath, money: b.Money > 0})
}

type budgetNode struct {
	team  string
	node  *yaml.Node
	path  string
	money bool
}

// checkElastic checks what needs the whole file: a team's quota must list
// a reserved flavor (requests that name no flavor run there), a budget
// only makes sense for a team with an elastic flavor, and a budget in
// money needs every elastic flavor of the team to have a price.
func (p *parser) checkElastic() {
	terms := map[string]commands.FlavorTerms{}
	for _, t := range p.cfg.settings.Elastic.Flavors {
		terms[t.Flavor] = t
	}
	for i, q := range p.cfg.cluster.Queues {
		if len(q.Flavors) == 0 {
			continue
		}
		var elastic []string
		for _, f := range q.Flavors {
			if terms[f].Elastic() {
				elastic = append(elastic, f)
			}
		}
		if len(elastic) == len(q.Flavors) {
			p.errorf(p.teamNodes[q.Name], index("teams", i)+".quota", "lists only spot or provisioned flavors (%s); give the team a reserved flavor too, where requests that name no flavor run", strings.Join(elastic, ", "))
		}
		for _, b := range p.budgetNodes {
			if b.team != q.Name {
				continue
			}
			if len(elastic) == 0 {
				p.errorf(b.node, b.path, "team %s has no quota on a spot or provisioned flavor to spend it on", q.Name)
			}
			for _, f := range elastic {
				if b.money && terms[f].PricePerGPUHour == 0 {
					p.errorf(b.node, b.path, "is in money, but flavor %s has no pricePerGPUHour", f)
				}
			}
		}
	}
}
