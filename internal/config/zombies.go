package config

import (
	"math"
	"net/url"
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
)

// DefaultZombieSchedule is when the zombie sweep runs unless
// zombies.schedule says otherwise: every 10 minutes.
const DefaultZombieSchedule = "*/10 * * * *"

// Zombies is the zombies section: when the sweep for work that holds GPUs
// without using them runs, and the policy it follows.
type Zombies struct {
	// Schedule is when the sweep runs (DefaultZombieSchedule unless set),
	// in the config's time zone.
	Schedule digest.Schedule
	// Policy is also Settings().Zombies. Its PodsReadyTimeout is
	// kubernetes.podsReadyTimeout (0 when not set: the default).
	Policy commands.ZombiePolicy
}

// Metrics is the metrics section: where GPU utilization comes from.
type Metrics struct {
	// PrometheusURL is the Prometheus server's base URL; "" means no
	// Prometheus (no idle-GPU zombies on a real cluster).
	PrometheusURL string
	// PodLabel and NamespaceLabel name the labels of DCGM_FI_DEV_GPU_UTIL
	// that hold the pod and namespace a GPU is given to; "pod" and
	// "namespace" (the DCGM exporter's) unless set.
	PodLabel, NamespaceLabel string
}

// Zombies returns the zombies section, with defaults filled in.
func (c *Config) Zombies() Zombies { return c.zombies }

// Metrics returns the metrics section, with defaults filled in.
func (c *Config) Metrics() Metrics { return c.metrics }

// SeedUse is how a seeded workload (simulation.running) uses its GPUs on
// the simulated cluster.
type SeedUse struct {
	// GPUUtilization is its busiest GPU's utilization in percent; nil:
	// busy.
	GPUUtilization *float64
	// PodsNeverReady: its pods never become ready (podsReady: false).
	PodsNeverReady bool
}

// SeedUses returns how each seed uses its GPUs, in the order of Seeds.
func (c *Config) SeedUses() []SeedUse {
	out := make([]SeedUse, len(c.seedUse))
	copy(out, c.seedUse)
	return out
}

// promLabel is a Prometheus label name.
var promLabel = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// zombiesSection reads the top-level zombies section.
func (p *parser) zombiesSection(n *yaml.Node) {
	z := &p.cfg.zombies
	z.Schedule, _ = digest.ParseSchedule(DefaultZombieSchedule, p.cfg.settings.Location)
	if n == nil {
		return
	}
	f := p.mapping(n, "zombies", "schedule", "idleThreshold", "idleWindow", "leadsGrace", "releaseGrace", "keepFor", "action", "scope")
	if v := f.get("schedule"); v != nil {
		if sch, ok := p.cronSchedule(v, "zombies.schedule", p.cfg.settings.Location); ok {
			z.Schedule = sch
		}
	}
	if v := f.get("idleThreshold"); v != nil {
		if t, ok := p.positive(v, "zombies.idleThreshold"); ok {
			if t > 100 {
				p.errorf(v, "zombies.idleThreshold", "is a percentage of GPU utilization: at most 100")
			} else {
				z.Policy.IdleThreshold = t
			}
		}
	}
	for key, out := range map[string]*durationField{
		"idleWindow": {&z.Policy.IdleWindow}, "leadsGrace": {&z.Policy.LeadsGrace},
		"releaseGrace": {&z.Policy.ReleaseGrace}, "keepFor": {&z.Policy.KeepFor},
	} {
		if v := f.get(key); v != nil {
			*out.d, _ = p.duration(v, field("zombies", key))
		}
	}
	if v := f.get("action"); v != nil {
		if s, ok := p.oneOf(v, "zombies.action", "action", "notify", "release"); ok {
			z.Policy.Release = s == "release"
		}
	}
	if v := f.get("scope"); v != nil {
		if s, ok := p.oneOf(v, "zombies.scope", "scope", "gpubot", "all"); ok {
			z.Policy.All = s == "all"
		}
	}
}

type durationField struct{ d *time.Duration }

// oneOf reads a string that must be one of words.
func (p *parser) oneOf(n *yaml.Node, path, what string, words ...string) (string, bool) {
	s, ok := p.str(n, path)
	if !ok {
		return "", false
	}
	if !contains(words, s) {
		p.errorf(n, path, "%s", unknown(what, s, words))
		return "", false
	}
	return s, true
}

// metricsSection reads the top-level metrics section.
func (p *parser) metricsSection(n *yaml.Node) {
	m := &p.cfg.metrics
	m.PodLabel, m.NamespaceLabel = "pod", "namespace"
	if n == nil {
		return
	}
	f := p.mapping(n, "metrics", "prometheusURL", "podLabel", "namespaceLabel")
	if v := f.get("prometheusURL"); v != nil {
		if u, ok := p.str(v, "metrics.prometheusURL"); ok {
			if pu, err := url.Parse(u); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" || pu.RawQuery != "" || pu.Fragment != "" {
				p.errorf(v, "metrics.prometheusURL", "%q is not a Prometheus server's URL; use one like http://prometheus.monitoring:9090", u)
			} else {
				m.PrometheusURL = u
			}
		}
	}
	for key, out := range map[string]*string{"podLabel": &m.PodLabel, "namespaceLabel": &m.NamespaceLabel} {
		if v := f.get(key); v != nil {
			if s, ok := p.str(v, field("metrics", key)); ok {
				if !promLabel.MatchString(s) {
					p.errorf(v, field("metrics", key), "%q is not a Prometheus label name (letters, digits and _, not starting with a digit)", s)
				} else {
					*out = s
				}
			}
		}
	}
}

// seedUse reads a seed's gpuUtilization and podsReady keys.
func (p *parser) seedUse(f *fields, path string) SeedUse {
	var u SeedUse
	if v := f.get("gpuUtilization"); v != nil {
		if x, ok := p.percent(v, field(path, "gpuUtilization")); ok {
			u.GPUUtilization = &x
		}
	}
	if v := f.get("podsReady"); v != nil {
		if ready, ok := p.boolean(v, field(path, "podsReady")); ok {
			u.PodsNeverReady = !ready
		}
	}
	return u
}

// percent converts a finite number from 0 to 100.
func (p *parser) percent(n *yaml.Node, path string) (float64, bool) {
	if !p.scalar(n, path, "a number", "!!int", "!!float") {
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 100 {
		p.errorf(n, path, "is a percentage: a number from 0 to 100")
		return 0, false
	}
	return v, true
}
