package simulate

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// Preparing a trace for the replay: the jobs the replay runs, in arrival
// order, with the load applied; what is common to every policy.

// job is one trace job prepared for the replay.
type job struct {
	Job
	idx       int
	submit    time.Time
	requested time.Duration
	gpus      int
	prio      int32
	topo      allocator.Level
}

// prepared is the part of a replay common to every policy.
type prepared struct {
	jobs        []*job
	teams       []string
	classes     []PriorityClass
	mix         allocator.Mix
	summary     TraceSummary
	highPrio    int32
	stride      int // calibration: every stride-th job (0: none)
	sampleEvery time.Duration
	first, last time.Time
	cpu, mem    bool // count CPU, memory (Setup.CPU, Memory; set by Replay)
	// history is the runtime history the estimates start from
	// (Setup.History).
	history []allocator.RuntimeSample
}

// TraceSummary describes the trace as replayed.
type TraceSummary struct {
	Name    string `json:"name"`
	Format  string `json:"format"`
	Rows    int    `json:"rows"`
	Skipped int    `json:"skippedRows"`
	Jobs    int    `json:"jobs"`
	// CPUOnly counts pods that ask for no GPU: the replay leaves them
	// out, the packing mode places them (they take CPU and memory).
	CPUOnly        int     `json:"cpuOnly"`
	Fractional     int     `json:"fractional"`
	FractionalMode string  `json:"fractionalMode"`
	Unrunnable     int     `json:"unrunnableLeftOut"`
	Teams          int     `json:"teams"`
	SpanHours      float64 `json:"spanHours"`
	// ArrivalRate is the factor by which arrivals were sped up (1: as
	// recorded). MeanDemand and PeakDemand are the GPUs the jobs would
	// have used, had none waited, on average over the arrival window and
	// at the busiest moment, as shares of the cluster's GPUs; Recorded…
	// the same before scaling.
	Load               string  `json:"load"`
	ArrivalRate        float64 `json:"arrivalRateFactor"`
	MeanDemand         float64 `json:"meanDemand"`
	PeakDemand         float64 `json:"peakDemand"`
	RecordedMeanDemand float64 `json:"recordedMeanDemand"`
	RecordedPeakDemand float64 `json:"recordedPeakDemand"`
	GPUHours           float64 `json:"gpuHours"`
	// ShareGPUHours is what the fractional jobs actually asked for;
	// rounding up gives them FractionalGPUHours.
	ShareGPUHours      float64 `json:"fractionalShareGPUHours"`
	FractionalGPUHours float64 `json:"fractionalRoundedGPUHours"`
	// History and HistoryRuns are the trace whose runs the estimates
	// learned from before the replay (Setup.History; "" and 0: none) and
	// how many of its runs that was.
	History     string `json:"history,omitempty"`
	HistoryRuns int    `json:"historyRuns,omitempty"`
}

// RequestedFor is the duration a person would have asked for a job that
// ran for run: the first of 15m, 30m, 1h, 2h, 4h, 8h, 12h, 1d, 2d, 3d
// and 7d that is at least run, and beyond a week whole days.
func RequestedFor(run time.Duration) time.Duration {
	for _, d := range []time.Duration{15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour,
		8 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 72 * time.Hour, 7 * 24 * time.Hour} {
		if run <= d {
			return d
		}
	}
	day := 24 * time.Hour
	return (run + day - 1) / day * day
}

// totalGPUs is the number of GPUs of nodes.
func totalGPUs(nodes []Node) int {
	n := 0
	for _, x := range nodes {
		n += x.GPUs
	}
	return n
}

func prepare(s *Setup) (*prepared, error) {
	tr := s.Trace
	if tr == nil {
		return nil, errors.New("no trace")
	}
	if !tr.Timed {
		return nil, fmt.Errorf("%s has no submission times (creation_time, deletion_time): only the packing mode can use it", tr.Name)
	}
	p := &prepared{classes: s.Priorities}
	if len(p.classes) == 0 {
		p.classes = DefaultPriorities
	}
	frac := s.Fractional
	if frac == "" {
		frac = FractionalRoundUp
	}
	if frac != FractionalRoundUp && frac != FractionalSkip {
		return nil, fmt.Errorf("the replay handles fractional GPUs by %s or %s, not %q", FractionalRoundUp, FractionalSkip, frac)
	}
	p.highPrio, _ = priorityValue(p.classes, "high")
	if p.highPrio == 0 {
		p.highPrio = math.MaxInt32
		for _, c := range p.classes {
			p.highPrio = min(p.highPrio, c.Value)
		}
	}
	models := map[string]int{}
	for _, n := range s.Nodes {
		models[Flavor(n.Model)] = max(models[Flavor(n.Model)], n.GPUs)
	}
	sum := &p.summary
	*sum = TraceSummary{Name: tr.Name, Format: tr.Format, Rows: len(tr.Jobs) + tr.Skipped, Skipped: tr.Skipped, FractionalMode: string(frac)}
	teams := map[string]bool{}
	var gpuSeconds float64
	jm := jobMapping{classes: p.classes, frac: frac, models: models, format: tr.Format}
	for i := range tr.Jobs {
		tj := &tr.Jobs[i]
		if tj.GPUs == 0 {
			sum.CPUOnly++
			continue
		}
		if tj.Fractional() {
			sum.Fractional++
			if frac == FractionalSkip {
				continue
			}
			sum.ShareGPUHours += tj.Demand() * tj.Runtime.Hours()
			sum.FractionalGPUHours += tj.Runtime.Hours()
		}
		j, ok, err := jm.job(tr.Name, tj)
		if err != nil {
			return nil, err
		}
		if !ok {
			sum.Unrunnable++
			continue
		}
		teams[j.Team] = true
		gpuSeconds += float64(j.gpus) * tj.Runtime.Seconds()
		p.jobs = append(p.jobs, j)
	}
	if len(p.jobs) == 0 {
		return nil, fmt.Errorf("%s: no jobs with GPUs to replay", tr.Name)
	}
	if s.History != nil {
		var err error
		if p.history, err = jm.history(s.History); err != nil {
			return nil, err
		}
		sum.History, sum.HistoryRuns = s.History.Name, len(p.history)
	}
	for t := range teams {
		p.teams = append(p.teams, t)
	}
	slices.SortFunc(p.teams, naturalCmp)
	sum.Jobs, sum.Teams = len(p.jobs), len(p.teams)
	sum.GPUHours = gpuSeconds / 3600
	// Arrival order, then load scaling.
	slices.SortStableFunc(p.jobs, func(a, b *job) int {
		if c := cmp.Compare(a.Submit, b.Submit); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	capacity := float64(totalGPUs(s.Nodes))
	sum.RecordedMeanDemand, sum.RecordedPeakDemand = demand(p.jobs, 1)
	sum.RecordedMeanDemand /= capacity
	sum.RecordedPeakDemand /= capacity
	scale, err := s.Load.scale(p.jobs, capacity)
	if err != nil {
		return nil, err
	}
	sum.Load, sum.ArrivalRate = s.Load.String(), 1/scale
	sum.MeanDemand, sum.PeakDemand = demand(p.jobs, scale)
	sum.MeanDemand /= capacity
	sum.PeakDemand /= capacity
	first := p.jobs[0].Submit
	sum.SpanHours = (p.jobs[len(p.jobs)-1].Submit - first).Hours() * scale
	for i, j := range p.jobs {
		j.idx = i
		j.submit = Epoch.Add(time.Duration(float64(j.Submit-first) * scale))
	}
	p.first, p.last = p.jobs[0].submit, p.jobs[len(p.jobs)-1].submit
	// The pod-size mix of fragmentation measure (a): the whole trace's,
	// each job split into pods as on its flavor (unpinned jobs: the first
	// flavor tried, the one with the most GPUs).
	totals := map[string]int{}
	for _, n := range s.Nodes {
		totals[Flavor(n.Model)] += n.GPUs
	}
	largest := ""
	for f, t := range totals {
		if largest == "" || t > totals[largest] || (t == totals[largest] && f < largest) {
			largest = f
		}
	}
	p.mix = allocator.Mix{}
	for _, j := range p.jobs {
		per, f := j.gpus, j.Flavor
		if f == "" {
			f = largest
		}
		if gpn := models[f]; j.topo != allocator.LevelHost && per > gpn {
			pods := (per + gpn - 1) / gpn
			per = per / pods
		}
		p.mix[per]++
	}
	switch {
	case s.Calibrate < 0:
		p.stride = 1
	case s.Calibrate > 0:
		p.stride = max(1, (len(p.jobs)+s.Calibrate-1)/s.Calibrate)
	}
	n := s.Samples
	if n <= 0 {
		n = 400
	}
	p.sampleEvery = max(time.Second, p.last.Sub(p.first)/time.Duration(n))
	return p, nil
}

// jobMapping turns a trace's jobs into the replay's: the same for the
// trace replayed and for a history (Setup.History), so that both map
// teams, priorities, requested durations and flavors alike.
type jobMapping struct {
	classes []PriorityClass
	frac    Fractional
	models  map[string]int // flavor: GPUs of its largest node
	format  string
}

// job maps tj, a job with GPUs (not a share left out by FractionalSkip);
// ok is false if it cannot run on the cluster (its GPU models are not
// there). Submission and load are left to the caller.
func (m jobMapping) job(trace string, tj *Job) (j *job, ok bool, err error) {
	j = &job{Job: *tj, gpus: tj.GPUs}
	prio, found := priorityValue(m.classes, tj.Priority)
	if !found {
		return nil, false, fmt.Errorf("%s:%d: priority %q is not a configured class", trace, tj.Line, tj.Priority)
	}
	j.prio = prio
	j.requested = tj.Requested
	if j.requested <= 0 {
		j.requested = RequestedFor(tj.Runtime)
	}
	if tj.Topology != "" {
		j.topo, _ = allocator.ParseLevel(tj.Topology)
	} else if m.format == "openb" {
		j.topo = allocator.LevelHost // an openb pod is one pod: one node
	}
	if len(tj.Models) > 0 { // the first listed model the cluster has
		j.Flavor = ""
		for _, md := range tj.Models {
			if _, ok := m.models[Flavor(md)]; ok {
				j.Flavor = Flavor(md)
				break
			}
		}
		if j.Flavor == "" {
			return nil, false, nil
		}
	} else if j.Flavor != "" {
		j.Flavor = Flavor(j.Flavor)
		if _, ok := m.models[j.Flavor]; !ok {
			return nil, false, nil
		}
	}
	return j, true, nil
}

// naturalCmp orders team2 before team10.
func naturalCmp(a, b string) int {
	ta, tb := strings.TrimRight(a, "0123456789"), strings.TrimRight(b, "0123456789")
	if ta == tb && len(a) != len(b) {
		return cmp.Compare(len(a), len(b))
	}
	return strings.Compare(a, b)
}

func (p *prepared) maxRuntime() time.Duration {
	var m time.Duration
	for _, j := range p.jobs {
		m = max(m, j.Runtime)
	}
	return m
}
