package config

import (
	"cmp"
	"math"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"time"

	_ "time/tzdata" // time zones load on images without /usr/share/zoneinfo

	"go.yaml.in/yaml/v3"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// Defaults of the optional keys; the README's configuration reference lists them for users.
const (
	defaultChannel      = "#gpu"
	defaultTemplate     = "default"
	defaultHalfLife     = 7 * 24 * time.Hour
	defaultEntryPenalty = time.Hour
	defaultEndWarning   = 15 * time.Minute
)

// Limits that catch typos (an extra zero) before they allocate a huge
// simulated cluster.
const (
	maxGPUsPerNode = 64
	maxLayout      = 1000  // blocks, racks per block, nodes per rack
	maxNodes       = 10000 // in all flavors
	maxGPUs        = 1_000_000
)

var (
	// label is a Kubernetes DNS-1123 label: teams are namespaces, flavors
	// ResourceFlavors, priorities WorkloadPriorityClasses.
	label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// handle is a person's name as typed in chat.
	handle    = regexp.MustCompile(`^[a-z0-9]([-._a-z0-9]{0,62}[a-z0-9])?$`)
	slackUser = regexp.MustCompile(`^[UW][A-Z0-9]+$`)
	// channel is a Slack channel name (#gpu-nlp) or ID (C0123ABCD).
	channel = regexp.MustCompile(`^(#[a-z0-9][-_a-z0-9]{0,79}|[CG][A-Z0-9]+)$`)
	// labelKey and labelValue are Kubernetes label names (an optional
	// DNS-subdomain prefix and a name) and values.
	labelKey   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelValue = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
)

const (
	labelRule      = "lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
	handleRule     = "lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit"
	channelRule    = `a channel name like "#gpu" or a channel ID like C0123ABCD`
	labelValueRule = "at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
)

// parser turns the checked YAML tree into a Config, remembering where each
// name was declared so that references to it can be checked.
type parser struct {
	*decoder
	cfg Config

	priorities *registry
	templates  *registry
	flavors    *registry
	people     *registry
	teams      *registry

	flavorInfo map[string]*flavorInfo
	teamInfo   map[string]*teamInfo
	// cohortNodes: the cohorts list declares these names.
	cohortNodes map[string]*yaml.Node
	// teamNodes is where each team's quota is, and budgetNodes where its
	// elastic budget is, for checks across sections.
	teamNodes   map[string]*yaml.Node
	budgetNodes []budgetNode
}

type flavorInfo struct {
	flavor              allocator.Flavor
	racksPerBlock       int
	nodesPerRack        int
	nodes               int // in the simulated cluster
	layout              *yaml.Node
	layoutPath          string
	nominal, seededGPUs int
	cpu, memory         int64 // per simulated node; 0: not counted
}

type teamInfo struct {
	index  int // in Settings.Teams and Cluster.Queues
	people map[string]bool
	seeded map[string]int // GPUs of seeds per flavor
}

func (p *parser) config(root *yaml.Node) *Config {
	p.priorities = newRegistry("priority")
	p.templates = newRegistry("template")
	p.flavors = newRegistry("flavor")
	p.people = newRegistry("person")
	p.teams = newRegistry("team")
	p.flavorInfo = map[string]*flavorInfo{}
	p.teamInfo = map[string]*teamInfo{}
	p.teamNodes = map[string]*yaml.Node{}

	f := p.mapping(root, "",
		"timezone", "defaultChannel", "admission", "priorities", "defaultPriority",
		"requests", "approval", "templates", "flavors", "cohorts", "people", "teams", "simulation", "kubernetes", "slack",
		"zombies", "metrics", "digests", "report", "elastic")
	p.timezone(f)
	p.defaultChannel(f)
	p.admission(f.get("admission"))
	p.priorityList(p.required(f, "priorities"))
	p.defaultPriority(f)
	p.requests(f.get("requests"))
	p.templateList(f)
	p.approval(f.get("approval"))
	p.flavorList(p.required(f, "flavors"))
	p.cohortList(f.get("cohorts"))
	p.personList(p.required(f, "people"))
	p.teamList(p.required(f, "teams"))
	p.checkQuotaTotals()
	p.checkCoverage(f.get("requests"))
	p.checkCluster(f.get("cohorts"))
	p.elasticSection(f.get("elastic"))
	p.checkElastic()
	p.kubernetes(f.get("kubernetes"))
	p.slackSection(f.get("slack"))
	p.zombiesSection(f.get("zombies"))
	p.cfg.zombies.Policy.PodsReadyTimeout = p.cfg.kube.PodsReadyTimeout
	p.metricsSection(f.get("metrics"))
	p.digestList(f.get("digests"))
	p.reportSection(f.get("report"))
	if n := f.get("simulation"); n != nil {
		s := p.mapping(n, "simulation", "running")
		if r := s.get("running"); r != nil {
			p.seedList(r)
		}
	}
	return &p.cfg
}

func (p *parser) timezone(f *fields) {
	p.cfg.settings.Location = time.UTC
	n := f.get("timezone")
	if n == nil {
		return
	}
	s, ok := p.str(n, "timezone")
	if !ok {
		return
	}
	loc, err := time.LoadLocation(s)
	if err != nil || s == "" {
		p.errorf(n, "timezone", "unknown time zone %q; use an IANA name like Europe/Berlin or America/New_York", s)
		return
	}
	p.cfg.settings.Location = loc
}

func (p *parser) defaultChannel(f *fields) {
	p.cfg.settings.DefaultChannel = defaultChannel
	if n := f.get("defaultChannel"); n != nil {
		if s, ok := p.channel(n, "defaultChannel"); ok {
			p.cfg.settings.DefaultChannel = s
		}
	}
}

func (p *parser) channel(n *yaml.Node, path string) (string, bool) {
	s, ok := p.str(n, path)
	if ok && !channel.MatchString(s) {
		p.errorf(n, path, "%q is not %s", s, channelRule)
		ok = false
	}
	return s, ok
}

func (p *parser) admission(n *yaml.Node) {
	pol := &p.cfg.cluster.Policy
	*pol = allocator.Policy{Mode: allocator.BestEffortFIFO, HalfLife: defaultHalfLife, EntryPenalty: defaultEntryPenalty}
	if n == nil {
		return
	}
	f := p.mapping(n, "admission", "mode", "fairSharing", "preemptionStrategies")
	modeOK := true
	if m := f.get("mode"); m != nil {
		s, ok := p.str(m, "admission.mode")
		modes := []string{string(allocator.BestEffortFIFO), string(allocator.FairSharing), modeKueueFairSharing}
		switch {
		case !ok:
			modeOK = false
		case !contains(modes, s):
			p.errorf(m, "admission.mode", "%s", unknown("admission mode", s, modes))
			modeOK = false
		case s == modeKueueFairSharing:
			pol.FairSharing = &allocator.KueueFairSharing{}
		default:
			pol.Mode = allocator.Mode(s)
		}
	}
	if ps := f.get("preemptionStrategies"); ps != nil {
		if modeOK && pol.FairSharing == nil {
			p.errorf(f.pos("preemptionStrategies"), "admission.preemptionStrategies", "is only used with mode %s; set admission.mode or remove it", modeKueueFairSharing)
		}
		p.preemptionStrategies(ps, pol)
	}
	fs := f.get("fairSharing")
	if fs == nil {
		return
	}
	if modeOK && pol.Mode != allocator.FairSharing {
		p.errorf(f.pos("fairSharing"), "admission.fairSharing", "is only used with mode AdmissionFairSharing; set admission.mode or remove it")
	}
	g := p.mapping(fs, "admission.fairSharing", "halfLife", "entryPenalty")
	if h := g.get("halfLife"); h != nil {
		if v, ok := p.duration(h, "admission.fairSharing.halfLife"); ok {
			pol.HalfLife = v
		}
	}
	if e := g.get("entryPenalty"); e != nil {
		if v, ok := p.durationOrZero(e, "admission.fairSharing.entryPenalty"); ok {
			pol.EntryPenalty = v
		}
	}
}

func (p *parser) priorityList(n *yaml.Node) {
	if n == nil {
		return
	}
	values := map[int]*yaml.Node{}
	items := p.entries(n, "priorities", "priority")
	for i, e := range items {
		path := index("priorities", i)
		f := p.mapping(e, path, "name", "value")
		name, okName := p.name(f, p.priorities, label, labelRule)
		v := p.required(f, "value")
		if v == nil {
			continue
		}
		value, ok := p.integer(v, field(path, "value"), math.MinInt32, math.MaxInt32)
		if !ok {
			continue
		}
		if first, dup := values[value]; dup {
			p.errorf(v, field(path, "value"), "duplicate priority value %d (first at line %d)", value, first.Line)
			continue
		}
		values[value] = v
		if okName {
			p.cfg.settings.Priorities = append(p.cfg.settings.Priorities, commands.Priority{Name: name, Value: int32(value)})
		}
	}
	slices.SortStableFunc(p.cfg.settings.Priorities, func(a, b commands.Priority) int {
		return cmp.Compare(a.Value, b.Value)
	})
}

func (p *parser) defaultPriority(f *fields) {
	n := f.get("defaultPriority")
	if n == nil {
		if len(p.cfg.settings.Priorities) > 0 {
			p.cfg.settings.DefaultPriority = p.cfg.settings.Priorities[0].Name
		}
		return
	}
	if s, ok := p.str(n, "defaultPriority"); ok && p.priorities.ref(p.decoder, word{s, n, "defaultPriority"}) {
		p.cfg.settings.DefaultPriority = s
	}
}

func (p *parser) requests(n *yaml.Node) {
	s := &p.cfg.settings
	s.EndWarning = defaultEndWarning
	if n == nil {
		return
	}
	f := p.mapping(n, "requests", "maxDuration", "endWarning", "cpuPerGPU", "memoryPerGPU")
	if v := f.get("cpuPerGPU"); v != nil {
		s.CPUPerGPU, _ = p.cores(v, "requests.cpuPerGPU")
	}
	if v := f.get("memoryPerGPU"); v != nil {
		s.MemoryPerGPU, _ = p.memory(v, "requests.memoryPerGPU")
	}
	if m := f.get("maxDuration"); m != nil {
		if v, ok := p.duration(m, "requests.maxDuration"); ok {
			s.MaxDuration = v
		}
	}
	if e := f.get("endWarning"); e != nil {
		if v, ok := p.duration(e, "requests.endWarning"); ok {
			if s.MaxDuration > 0 && v >= s.MaxDuration {
				p.errorf(e, "requests.endWarning", "must be shorter than requests.maxDuration (%s)", f.get("maxDuration").Value)
			} else {
				s.EndWarning = v
			}
		}
	}
}

func (p *parser) templateList(f *fields) {
	n := f.get("templates")
	if n == nil {
		p.templates.names = []string{defaultTemplate}
		p.cfg.settings.Templates = []string{defaultTemplate}
		return
	}
	ws := p.words(n, "templates")
	if len(ws) == 0 && n.Kind == yaml.SequenceNode {
		p.errorf(n, "templates", "must list at least one template; leave the key out for [%s]", defaultTemplate)
	}
	for _, w := range ws {
		if p.declare(p.templates, w, label, labelRule) {
			p.cfg.settings.Templates = append(p.cfg.settings.Templates, w.s)
		}
	}
}

func (p *parser) approval(n *yaml.Node) {
	if n == nil {
		return
	}
	a := &p.cfg.settings.Approval
	f := p.mapping(n, "approval", "aboveGPUs", "priorities", "borrowing")
	if v := f.get("aboveGPUs"); v != nil {
		a.AboveGPUs, _ = p.integer(v, "approval.aboveGPUs", 0, maxGPUs)
	}
	if v := f.get("priorities"); v != nil {
		seen := map[string]*yaml.Node{}
		for _, w := range p.words(v, "approval.priorities") {
			if first, dup := seen[w.s]; dup {
				p.errorf(w.node, w.path, "%q is listed twice (first at line %d)", w.s, first.Line)
				continue
			}
			seen[w.s] = w.node
			if p.priorities.ref(p.decoder, w) {
				a.Priorities = append(a.Priorities, w.s)
			}
		}
	}
	if v := f.get("borrowing"); v != nil {
		a.Borrowing, _ = p.boolean(v, "approval.borrowing")
	}
}

func (p *parser) personList(n *yaml.Node) {
	if n == nil {
		return
	}
	items := p.entries(n, "people", "person")
	slackIDs := map[string]*yaml.Node{}
	for i, e := range items {
		path := index("people", i)
		f := p.mapping(e, path, "name", "slackID", "email", "admin")
		name, ok := p.name(f, p.people, handle, handleRule)
		person := commands.Person{Name: name}
		if v := f.get("slackID"); v != nil {
			if s, okID := p.str(v, field(path, "slackID")); okID {
				switch first, dup := slackIDs[s]; {
				case !slackUser.MatchString(s):
					p.errorf(v, field(path, "slackID"), "%q is not a Slack user ID: U or W followed by capital letters and digits, like U0123ABCD", s)
				case dup:
					p.errorf(v, field(path, "slackID"), "duplicate slackID %q (first at line %d)", s, first.Line)
				default:
					slackIDs[s] = v
					person.ChatID = s
				}
			}
		}
		if v := f.get("email"); v != nil {
			if s, okMail := p.str(v, field(path, "email")); okMail {
				if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
					p.errorf(v, field(path, "email"), "%q is not an email address like alice@example.com", s)
				} else {
					person.Email = s
				}
			}
		}
		if v := f.get("admin"); v != nil {
			person.Admin, _ = p.boolean(v, field(path, "admin"))
		}
		if ok {
			p.cfg.settings.People = append(p.cfg.settings.People, person)
		}
	}
}

// name reads the required "name" of a list entry, checks it against rule
// and declares it in r. ok is false if the entry is to be left out.
func (p *parser) name(f *fields, r *registry, rule *regexp.Regexp, ruleText string) (string, bool) {
	n := p.required(f, "name")
	if n == nil {
		return "", false
	}
	path := field(f.path, "name")
	s, ok := p.str(n, path)
	if !ok {
		return "", false
	}
	return s, p.declare(r, word{s, n, path}, rule, ruleText)
}

// declare checks w against rule and declares it in r. A badly formed name
// is still declared, so that references to it do not add more errors.
func (p *parser) declare(r *registry, w word, rule *regexp.Regexp, ruleText string) bool {
	if !r.declare(p.decoder, w) {
		return false
	}
	if !rule.MatchString(w.s) {
		p.errorf(w.node, w.path, "%q is not a valid %s name: use %s", w.s, r.what, ruleText)
		return false
	}
	return true
}

// registry is the set of names of one kind declared in the file.
type registry struct {
	what  string
	names []string
	first map[string]*yaml.Node // by lower-cased name: where declared
}

func newRegistry(what string) *registry {
	return &registry{what: what, first: map[string]*yaml.Node{}}
}

// declare adds w; names that differ only in case are duplicates, since
// chat commands ignore case.
func (r *registry) declare(d *decoder, w word) bool {
	key := strings.ToLower(w.s)
	if first, dup := r.first[key]; dup {
		d.errorf(w.node, w.path, "duplicate %s %q (first at line %d)", r.what, w.s, first.Line)
		return false
	}
	r.first[key] = w.node
	r.names = append(r.names, w.s)
	return true
}

// ref checks that w names a declared entry, suggesting the closest if not.
func (r *registry) ref(d *decoder, w word) bool {
	if contains(r.names, w.s) {
		return true
	}
	d.errorf(w.node, w.path, "%s", unknown(r.what, w.s, r.names))
	return false
}
