package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/deploy"
	"github.com/gpubot/gpubot/digest"
)

// Config is a validated configuration. It is immutable: every accessor
// returns a fresh copy that the caller may change.
type Config struct {
	name     string
	cluster  allocator.Cluster
	settings commands.Settings
	seeds    []commands.Seed
	kube     Kubernetes
	slack    Slack
	zombies  Zombies
	metrics  Metrics
	// seedUse is how each seed uses its GPUs, in the order of seeds.
	seedUse []SeedUse
	// digests and the weekly report (report is zero without one).
	digests []digest.Posting
	report  digest.Posting
	// simFlavors is the simulated behaviour of elastic flavors.
	simFlavors map[string]SimFlavor
}

// Load reads and validates the YAML file at path. Problems in the file are
// reported as Errors naming the file by path, as given; a file that
// cannot be read gives the file system's error, wrapped.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(path, data)
}

// Parse validates data; name is used in error messages (for example
// "gpubot.yaml" or "embedded example"). If anything is wrong it returns
// nil and an Errors listing every problem found, in file order.
func Parse(name string, data []byte) (*Config, error) {
	d := &decoder{file: name}
	root, ok := d.document(data)
	if !ok {
		return nil, d.errs
	}
	c := (&parser{decoder: d}).config(root)
	c.name = name
	if len(d.errs) > 0 {
		d.errs.sort()
		return nil, d.errs
	}
	return c, nil
}

// Default returns the bundled example configuration (deploy.ExampleConfig),
// parsed. gpubot runs with it when given no configuration at all: a
// simulated cluster with a realistic load.
func Default() (*Config, error) {
	return Parse("embedded example", deploy.ExampleConfig)
}

// document parses data as one YAML document and returns its root node (nil
// for an empty file). ok is false if the YAML itself is broken, since its
// tree is then incomplete.
func (d *decoder) document(data []byte) (root *yaml.Node, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, true
		}
		d.syntaxError(err, data)
		return nil, false
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		d.errorf(&next, "", "a config file holds one YAML document; remove the \"---\" and what follows, or merge it into the first")
	case !errors.Is(err, io.EOF):
		d.syntaxError(err, data)
		return nil, false
	}
	if len(doc.Content) == 0 {
		return nil, true
	}
	if n, err := expandedSize(doc.Content[0], map[*yaml.Node]int{}); err != "" {
		d.errorf(n, "", "%s", err)
		return nil, false
	}
	return doc.Content[0], true
}

// maxValues caps the number of values a document may expand to through
// aliases, so that a few nested aliases cannot make validation run for
// ever ("billion laughs").
const maxValues = 100_000

// expandedSize checks that n, with its aliases expanded, has at most
// maxValues values and no alias inside its own anchor. size memoizes the
// size of each node; -1 marks one being measured.
func expandedSize(n *yaml.Node, size map[*yaml.Node]int) (*yaml.Node, string) {
	switch s, seen := size[n]; {
	case seen && s < 0:
		return n, "an alias refers to a value that contains it"
	case seen:
		return nil, ""
	}
	size[n] = -1
	total := 1
	children := n.Content
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		children = []*yaml.Node{n.Alias}
	}
	for _, c := range children {
		if at, err := expandedSize(c, size); err != "" {
			return at, err
		}
		total += size[c]
		if total > maxValues {
			return n, fmt.Sprintf("the document expands to more than %d values; use fewer aliases", maxValues)
		}
	}
	size[n] = total
	return nil, ""
}

// Name returns the name the configuration was parsed under: the path
// given to Load, the name given to Parse, or "embedded example".
func (c *Config) Name() string { return c.name }

// Cluster returns the simulated cluster the configuration describes: the
// flavors in file order, nodes generated from each flavor's layout (named
// <flavor>-b<block>-r<rack>-n<node>, counting from 1), one queue per team,
// and the admission policy.
func (c *Config) Cluster() *allocator.Cluster {
	cl := c.cluster
	cl.Flavors = slices.Clone(cl.Flavors)
	cl.Nodes = slices.Clone(cl.Nodes)
	cl.Queues = slices.Clone(cl.Queues)
	for i := range cl.Queues {
		q := &cl.Queues[i]
		q.Flavors = slices.Clone(q.Flavors)
		q.Quotas = cloneQuotas(q.Quotas)
		if m := q.Preemption.BorrowWithinCohortMaxPriority; m != nil {
			v := *m
			q.Preemption.BorrowWithinCohortMaxPriority = &v
		}
	}
	cl.Cohorts = slices.Clone(cl.Cohorts)
	for i := range cl.Cohorts {
		cl.Cohorts[i].Quotas = cloneQuotas(cl.Cohorts[i].Quotas)
	}
	if fs := cl.Policy.FairSharing; fs != nil {
		cl.Policy.FairSharing = &allocator.KueueFairSharing{PreemptionStrategies: slices.Clone(fs.PreemptionStrategies)}
	}
	return &cl
}

func cloneQuotas(in map[string]allocator.Quota) map[string]allocator.Quota {
	out := maps.Clone(in)
	for f, quota := range out {
		quota.BorrowingLimit = clonePtr(quota.BorrowingLimit)
		quota.LendingLimit = clonePtr(quota.LendingLimit)
		for _, rq := range []**allocator.ResourceQuota{&quota.CPU, &quota.Memory} {
			if *rq != nil {
				c := **rq
				*rq = &c
			}
		}
		out[f] = quota
	}
	return out
}

func clonePtr(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Settings returns the people, teams, priorities (ascending by value),
// approval rules, request limits, templates, default channel and location,
// with every default filled in: each team has a channel, EndWarning is
// set, DefaultPriority names a priority and Location is not nil.
func (c *Config) Settings() commands.Settings {
	s := c.settings
	s.People = slices.Clone(s.People)
	s.Teams = slices.Clone(s.Teams)
	for i := range s.Teams {
		s.Teams[i].Members = slices.Clone(s.Teams[i].Members)
		s.Teams[i].Leads = slices.Clone(s.Teams[i].Leads)
	}
	s.Priorities = slices.Clone(s.Priorities)
	s.Approval.Priorities = slices.Clone(s.Approval.Priorities)
	s.Templates = slices.Clone(s.Templates)
	s.Zombies = c.zombies.Policy
	s.Elastic.Flavors = slices.Clone(s.Elastic.Flavors)
	s.Elastic.Budgets = maps.Clone(s.Elastic.Budgets)
	return s
}

// Vocabulary returns the words the /gpu parser accepts: flavor and team
// names in file order, priorities from lowest to highest, templates with
// the default first.
func (c *Config) Vocabulary() commands.Vocabulary {
	v := commands.Vocabulary{Templates: slices.Clone(c.settings.Templates)}
	for _, f := range c.cluster.Flavors {
		v.Flavors = append(v.Flavors, f.Name)
	}
	for _, t := range c.settings.Teams {
		v.Teams = append(v.Teams, t.Name)
	}
	for _, p := range c.settings.Priorities {
		v.Priorities = append(v.Priorities, p.Name)
	}
	return v
}

// Seeds returns the work already running on a fresh simulated cluster
// (simulation.running), in file order, with priority and template
// defaults filled in.
func (c *Config) Seeds() []commands.Seed { return slices.Clone(c.seeds) }
