package simulate

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// Epoch is the simulated time of the start of every trace.
var Epoch = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)

// Fractional says what the replay does with a job that asks for a share
// of one GPU (openb gpu_milli < 1000). The allocator, like Kueue's
// nvidia.com/gpu quota, counts whole GPUs.
type Fractional string

const (
	// FractionalRoundUp gives the job a whole GPU (the default).
	FractionalRoundUp Fractional = "round-up"
	// FractionalSkip leaves the job out.
	FractionalSkip Fractional = "skip"
	// FractionalShare packs shares onto GPUs: the packing mode only.
	FractionalShare Fractional = "share"
)

// Setup describes a replay.
type Setup struct {
	Nodes []Node
	Trace *Trace
	// Priorities default to DefaultPriorities.
	Priorities []PriorityClass
	// Policies default to StandardPolicies(GpubotDefaults).
	Policies []Policy
	// Placement for every policy; "" is the allocator's default.
	Placement allocator.Placement
	// Seed varies random placement.
	Seed       uint64
	Load       Load
	Fractional Fractional // "" is FractionalRoundUp
	// Changes, if any, are replayed too, and compared with the cluster as
	// given. At most one may add an elastic pool (see elastic.go).
	Changes []Change
	// OfferAfter, ProvisioningTime and ElasticPrice describe the elastic
	// pool's use: jobs switch after waiting OfferAfter (default 1 h), a
	// provisioned pool's jobs start ProvisioningTime later (default 20
	// min), and a GPU-hour there costs ElasticPrice (0: not priced).
	OfferAfter, ProvisioningTime time.Duration
	ElasticPrice                 float64
	// Currency is put before prices ("$"; default none).
	Currency string
	// History, if set, is a trace whose runs the estimates learn runtimes
	// from before the replay begins, as the bot learns from the finished
	// requests its store keeps: the bot in its steady state rather than
	// on its first day. Read it with the same ReadOptions as Trace (the
	// same seed and teams), so that its jobs map to teams, templates
	// (requested durations) and flavors as the replay's do; Trace itself
	// may serve, as yesterday's runs. Every job of it that the replay
	// would run counts, as one run finished unpreempted for its recorded
	// runtime; its submission times do not matter. nil: none, a cold
	// start (the default).
	History *Trace
	// Calibrate is how many submissions at most get the estimate the bot
	// would have posted (see the package doc); 0 means none, < 0 all.
	Calibrate int
	// Samples is how many times the cluster is sampled over the arrival
	// window (fragmentation and GPUs in use over time); 0 means 400.
	Samples int
	// CPU and Memory count the CPU and memory the trace's pods ask for and
	// the nodes have (openb gives both): pods need room for them on a
	// node, and every team has a share of each flavor's CPU (memory) as
	// quota, as a ClusterQueue covering cpu and memory with the GPUs
	// would. Off, only GPUs count; so too when a node does not say
	// (Report.Resources says what counted).
	CPU, Memory bool
	// Progress, if set, is called from the replays (perhaps
	// concurrently) as they go: first once for every run with done 0,
	// before any starts, then as each goes (done never decreases for a
	// run, and total stays the same).
	Progress func(run string, done, total int)

	// check, if set (tests), is called after every step of every run.
	check func(run string, s *allocator.Snapshot, used, running, pending int) error
}

// Replay runs every policy (and, with Changes, every policy again on the
// changed cluster) over the trace and returns the report. Runs go in
// parallel, one per CPU; each is deterministic.
func Replay(s Setup) (*Report, error) {
	p, err := prepare(&s)
	if err != nil {
		return nil, err
	}
	pols := s.Policies
	if len(pols) == 0 {
		pols = StandardPolicies(GpubotDefaults)
	}
	type variant struct {
		name  string
		nodes []Node
	}
	variants := []variant{{"as given", s.Nodes}}
	rep := &Report{Mode: "replay", Trace: p.summary, Placement: string(s.Placement), Seed: s.Seed, Priorities: p.classes}
	// CPU (memory) counts only when every node says how much it has: a
	// node of a generic list without the column would have none to share
	// as quota.
	p.cpu = s.CPU && everyNode(s.Nodes, func(n Node) bool { return n.CPU > 0 })
	p.mem = s.Memory && everyNode(s.Nodes, func(n Node) bool { return n.Memory > 0 })
	rep.Resources = []string{"gpu"}
	if p.cpu {
		rep.Resources = append(rep.Resources, "cpu")
	}
	if p.mem {
		rep.Resources = append(rep.Resources, "memory")
	}
	if rep.Placement == "" {
		rep.Placement = string(allocator.PlacementFragmentationAware)
	}
	rep.Cluster = summarizeCluster("as given", s.Nodes)
	if len(s.Changes) > 0 {
		nodes, note, err := ApplyChanges(s.Nodes, s.Changes)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, c := range s.Changes {
			names = append(names, c.String())
		}
		v := variant{strings.Join(names, " "), nodes}
		variants = append(variants, v)
		cs := summarizeCluster(v.name, nodes)
		cs.Note = note
		rep.Changed = &cs
	}
	type task struct {
		pol Policy
		v   variant
		out *Run
	}
	var tasks []*task
	for _, v := range variants {
		for _, pol := range pols {
			tasks = append(tasks, &task{pol: pol, v: v})
		}
	}
	runName := func(t *task) string {
		if t.v.name != "as given" {
			return t.pol.Name + " " + t.v.name
		}
		return t.pol.Name
	}
	if s.Progress != nil {
		// Every run counts from the start, so that the total never grows.
		for _, t := range tasks {
			s.Progress(runName(t), 0, len(p.jobs))
		}
	}
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var es *elasticSim
			pool := ""
			if c, ok := elasticOf(s.Changes); ok && t.v.name != "as given" {
				es = newElasticSim(&s, c)
				pool = es.flavor
				es.base = c.Flavor
			}
			cl, err := buildCluster(t.v.nodes, p.teams, t.pol, s.Placement, s.Seed, p.cpu, p.mem, pool)
			if err != nil {
				errs[i] = err
				return
			}
			t.out, errs[i] = replayOne(p, cl, t.pol, t.v.name, runName(t), s.Progress, s.check, es)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, t := range tasks {
		rep.Runs = append(rep.Runs, t.out)
	}
	return rep, nil
}

// state is one job's outcome in one run.
type state struct {
	started, finished bool
	pending           bool
	firstStart        time.Time
	lastStart         time.Time
	end               time.Time
	preemptions       int
	lostGPUSeconds    float64
	est               *allocator.Estimate
	reason            allocator.Reason // at submission, if it waited
	switched          bool             // moved to the elastic pool
}

// workload is job i as the allocator sees it, on flavor ("" for any),
// with its CPU and memory where they count.
func (e *engine) workload(i int, flavor string) allocator.Workload {
	j := e.p.jobs[i]
	w := allocator.Workload{ID: j.ID, Queue: j.Team, Priority: j.prio, GPUs: j.gpus, Flavor: flavor,
		Topology: j.topo, Created: j.submit, Duration: j.requested}
	if e.p.cpu {
		w.CPU = j.CPU
	}
	if e.p.mem {
		w.Memory = j.Memory << 20
	}
	return w
}

// engine is one replay in progress.
type engine struct {
	p        *prepared
	snap     *allocator.Snapshot
	byID     map[string]*job
	st       []state
	run      *Run
	total    int // GPUs
	used     int
	peakUsed int
	lastT    time.Time
	area     float64 // GPU-seconds used inside the arrival window
	areaAll  float64
	running  int
	pending  []int                     // job indexes, unordered
	pendPos  []int                     // position in pending, -1 if not there
	runtimes []allocator.RuntimeSample // finished without preemption
	arrived  []int                     // job indexes in arrival order
	finished int                       // jobs finished
	check    func(string, *allocator.Snapshot, int, int, int) error
	byPrio   bool // the policy orders by priority
	elastic  *elasticSim
}

func replayOne(p *prepared, cl *allocator.Cluster, pol Policy, capacity, name string, progress func(string, int, int),
	check func(string, *allocator.Snapshot, int, int, int) error, es *elasticSim) (*Run, error) {
	snap, err := allocator.NewSnapshot(cl, Epoch, nil, nil)
	if err != nil {
		return nil, err
	}
	e := &engine{
		p: p, snap: snap, byID: make(map[string]*job, len(p.jobs)), st: make([]state, len(p.jobs)),
		run:     &Run{Policy: pol.Name, Capacity: capacity, Name: name},
		lastT:   Epoch,
		pendPos: make([]int, len(p.jobs)),
		check:   check,
		byPrio:  pol.Mode != allocator.FirstComeFirstServed,
		elastic: es,
		// The history first, as the bot's store holds it; the replay's
		// finished runs are appended (never to p.history's array).
		runtimes: p.history[:len(p.history):len(p.history)],
	}
	for _, n := range cl.Nodes {
		e.total += n.GPUs
	}
	for i, j := range p.jobs {
		e.byID[j.ID] = j
		e.pendPos[i] = -1
	}
	// The jobs run their recorded runtimes, whatever they asked for.
	drv := allocator.NewRunner(snap, func(w allocator.Workload) time.Time { return w.Admission.At.Add(e.byID[w.ID].Runtime) })
	nextSample := p.first
	nextReport, every := 0, max(1, len(p.jobs)/100)
	for i := 0; i < len(p.jobs); {
		t := p.jobs[i].submit
		if nextSample.Before(t) {
			if err := e.step(drv.Advance(nextSample)); err != nil {
				return nil, err
			}
			e.sample(nextSample)
			nextSample = nextSample.Add(p.sampleEvery)
			if err := e.stepElastic(drv); err != nil {
				return nil, err
			}
			continue
		}
		// As the simulated cluster does: catch up to the time, add what
		// arrives, run a cycle.
		if err := e.step(drv.Advance(t)); err != nil {
			return nil, err
		}
		k := i
		for ; k < len(p.jobs) && p.jobs[k].submit.Equal(t); k++ {
			j := p.jobs[k]
			if err := drv.Add(e.workload(k, j.Flavor)); err != nil {
				return nil, fmt.Errorf("%s: job %s: %w", name, j.ID, err)
			}
			e.addPending(k)
			e.arrived = append(e.arrived, k)
		}
		if err := e.step(drv.Schedule()); err != nil {
			return nil, err
		}
		if err := e.stepElastic(drv); err != nil {
			return nil, err
		}
		for ; i < k; i++ {
			if !e.st[i].pending {
				continue
			}
			e.st[i].reason = e.reasonOf(p.jobs[i])
			if p.stride > 0 && i%p.stride == 0 {
				est := allocator.EstimateFor(snap, p.jobs[i].ID, e.estimateOptions())
				e.st[i].est = &est
			}
		}
		if progress != nil && i >= nextReport {
			progress(name, i, len(p.jobs))
			nextReport = i + every
		}
	}
	if progress != nil {
		progress(name, len(p.jobs), len(p.jobs))
	}
	// Drain: keep sampling for up to one more window, then run to the end.
	window := p.last.Sub(p.first)
	for e.running > 0 && !nextSample.After(p.last.Add(window)) {
		if err := e.step(drv.Advance(nextSample)); err != nil {
			return nil, err
		}
		e.sample(nextSample)
		nextSample = nextSample.Add(p.sampleEvery)
		if err := e.stepElastic(drv); err != nil {
			return nil, err
		}
	}
	for e.running > 0 || e.elastic != nil && len(e.elastic.held) > 0 {
		if e.elastic != nil && len(e.elastic.held) > 0 {
			if err := e.step(drv.Advance(e.elastic.held[0].ready)); err != nil {
				return nil, err
			}
			if err := e.stepElastic(drv); err != nil {
				return nil, err
			}
			continue
		}
		if err := e.step(drv.Advance(snap.Now().Add(24*time.Hour + p.maxRuntime()))); err != nil {
			return nil, err
		}
	}
	e.finish()
	return e.run, nil
}

func (e *engine) addPending(i int) {
	e.st[i].pending = true
	e.pendPos[i] = len(e.pending)
	e.pending = append(e.pending, i)
}

func (e *engine) dropPending(i int) {
	e.st[i].pending = false
	k := e.pendPos[i]
	last := e.pending[len(e.pending)-1]
	e.pending[k] = last
	e.pendPos[last] = k
	e.pending = e.pending[:len(e.pending)-1]
	e.pendPos[i] = -1
}

// advanceTo accounts GPU use up to t.
func (e *engine) advanceTo(t time.Time) {
	if !t.After(e.lastT) {
		return
	}
	a, b := e.lastT, t
	e.areaAll += float64(e.used) * b.Sub(a).Seconds()
	if a.Before(e.p.last) && b.After(e.p.first) {
		lo, hi := a, b
		if lo.Before(e.p.first) {
			lo = e.p.first
		}
		if hi.After(e.p.last) {
			hi = e.p.last
		}
		e.area += float64(e.used) * hi.Sub(lo).Seconds()
	}
	e.lastT = t
}

// step takes in what a step of the replay did, and checks the state in
// tests.
func (e *engine) step(evs []allocator.Event) error {
	e.handle(evs)
	if e.check == nil {
		return nil
	}
	return e.check(e.run.Name, e.snap, e.used, e.running, len(e.pending))
}

func (e *engine) handle(evs []allocator.Event) {
	for _, ev := range evs {
		j := e.byID[ev.ID]
		s := &e.st[j.idx]
		e.advanceTo(ev.At)
		e.noteElastic(ev, j.idx, j.gpus)
		switch ev.Kind {
		case allocator.EventAdmitted:
			if !s.started {
				s.started, s.firstStart = true, ev.At
			}
			s.lastStart = ev.At
			e.dropPending(j.idx)
			e.used += j.gpus
			e.running++
			e.peakUsed = max(e.peakUsed, e.used)
		case allocator.EventPreempted:
			s.preemptions++
			s.lostGPUSeconds += float64(j.gpus) * ev.At.Sub(s.lastStart).Seconds()
			e.run.Preemptions++
			e.addPending(j.idx)
			e.used -= j.gpus
			e.running--
		case allocator.EventFinished:
			s.finished, s.end = true, ev.At
			e.finished++
			e.used -= j.gpus
			e.running--
			if s.preemptions == 0 && j.requested > 0 {
				e.runtimes = append(e.runtimes, j.runtimeSample())
			}
		}
	}
}

// reasonOf is why a pending job waits, as the bot would say. Every team
// lends all its quota and may borrow without limit, so the cohort's pool
// is the cluster itself: a job the allocator finds short of pool is
// short of free GPUs, and is reported as waiting for capacity.
func (e *engine) reasonOf(j *job) allocator.Reason {
	r := e.snap.Diagnose(j.ID)
	if r == allocator.ReasonCohort {
		r = allocator.ReasonCapacity
	}
	return r
}

// estimateOptions are the options the bot would use now (see
// commands.Service.estimateOptions): runtime ranges learned from the
// history (Setup.History) and the jobs finished so far without
// preemption, per team and template
// (allocator.LearnRuntimes; a trace has no templates, so the requested
// duration stands for one), for every job in the cluster; and the load
// of the last day's arrivals per priority (allocator.LearnArrivals),
// each job counting its GPUs × requested duration × its learned median
// runtime factor.
func (e *engine) estimateOptions() allocator.EstimateOptions {
	m := allocator.LearnRuntimes(e.runtimes, allocator.LearnOptions{})
	type learned struct {
		r      allocator.Range
		median float64
	}
	cache := map[[2]string]learned{}
	of := func(j *job) learned {
		k := [2]string{j.Team, template(j)}
		l, ok := cache[k]
		if !ok {
			l = learned{m.Range(k[0], k[1]), m.Median(k[0], k[1])}
			cache[k] = l
		}
		return l
	}
	now := e.snap.Now()
	opts := allocator.EstimateOptions{Horizon: allocator.DefaultHorizon, Workloads: make(map[string]allocator.Range, len(e.arrived)-e.finished)}
	for _, i := range e.arrived {
		s := &e.st[i]
		j := e.p.jobs[i]
		switch {
		case s.finished:
		case s.pending || j.requested <= 0:
			opts.Workloads[j.ID] = of(j).r
		default: // running: among the runs at least as long as this one so far
			opts.Workloads[j.ID] = m.RangeAfter(j.Team, template(j), now.Sub(s.lastStart).Hours()/j.requested.Hours())
		}
	}
	var arr []allocator.ArrivalSample
	for k := len(e.arrived) - 1; k >= 0; k-- {
		j := e.p.jobs[e.arrived[k]]
		if !j.submit.After(now.Add(-arrivalWindow)) {
			break
		}
		arr = append(arr, allocator.ArrivalSample{At: j.submit, Queue: j.Team, Priority: j.prio, Flavor: j.Flavor, Size: j.gpus,
			GPUHours: float64(j.gpus) * j.requested.Hours() * of(j).median})
	}
	opts.Arrivals = allocator.LearnArrivals(arr, now, arrivalWindow)
	return opts
}

// arrivalWindow is how far back the replay's (and the bot's) arrival
// rates look.
const arrivalWindow = 24 * time.Hour

// template is what stands for a job's template in learning its runtime:
// the duration it asked for.
func template(j *job) string { return j.requested.String() }

// runtimeSample is j as one finished run, for learning runtimes.
func (j *job) runtimeSample() allocator.RuntimeSample {
	return allocator.RuntimeSample{Team: j.Team, Template: template(j), Requested: j.requested, Actual: j.Runtime}
}

// sample records the cluster at t (after Advance to t).
func (e *engine) sample(t time.Time) {
	e.advanceTo(t)
	caps := e.snap.Capacity(e.p.mix)
	var sm Sample
	sm.Hours = t.Sub(e.p.first).Hours()
	for _, c := range caps {
		sm.UsedGPUs += c.Used
		sm.FreeGPUs += c.Free
		sm.Fragmented += c.Fragmented
	}
	if e.total > 0 {
		sm.FragPctAll = 100 * sm.Fragmented / float64(e.total)
		sm.Utilisation = float64(sm.UsedGPUs) / float64(e.total)
	}
	if sm.FreeGPUs > 0 {
		sm.FragPctFree = 100 * sm.Fragmented / float64(sm.FreeGPUs)
	}
	sm.Pending = len(e.pending)
	sm.Running = e.running
	e.run.Timeline = append(e.run.Timeline, sm)
}

func everyNode(nodes []Node, ok func(Node) bool) bool {
	for _, n := range nodes {
		if !ok(n) {
			return false
		}
	}
	return len(nodes) > 0
}
