package simulate

import (
	"slices"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// Report is the outcome of a replay or a packing run.
type Report struct {
	Mode       string          `json:"mode"` // "replay" or "packing"
	Trace      TraceSummary    `json:"trace"`
	Cluster    ClusterSummary  `json:"cluster"`
	Changed    *ClusterSummary `json:"changedCluster,omitempty"`
	Placement  string          `json:"placement,omitempty"`
	Resources  []string        `json:"resources,omitempty"` // replay: what counted (gpu, cpu, memory)
	Priorities []PriorityClass `json:"priorities,omitempty"`
	Seed       uint64          `json:"seed"`
	Runs       []*Run          `json:"runs,omitempty"`
	Packing    *PackingResult  `json:"packing,omitempty"`
}

// ClusterSummary describes a cluster.
type ClusterSummary struct {
	Name    string         `json:"name"`
	Nodes   int            `json:"nodes"`
	GPUs    int            `json:"gpus"`
	Flavors map[string]int `json:"gpusByFlavor"`
	Note    string         `json:"note,omitempty"`
}

func summarizeCluster(name string, nodes []Node) ClusterSummary {
	c := ClusterSummary{Name: name, Nodes: len(nodes), Flavors: map[string]int{}}
	for _, n := range nodes {
		c.GPUs += n.GPUs
		c.Flavors[Flavor(n.Model)] += n.GPUs
	}
	return c
}

// Run is one policy's replay on one cluster.
type Run struct {
	// Elastic is what the elastic pool of the what-if did; nil without one.
	Elastic  *ElasticRun `json:"elastic,omitempty"`
	Name     string      `json:"name"`
	Policy   string      `json:"policy"`
	Capacity string      `json:"capacity"`
	// Waits from submission to first start, by priority class and over
	// all jobs.
	Waits    map[string]WaitStats `json:"waitsByPriority"`
	AllWaits WaitStats            `json:"waits"`
	// Starvation is the share of high-priority jobs (class high and
	// above) that waited more than an hour.
	Starvation float64 `json:"starvation"`
	HighJobs   int     `json:"highPriorityJobs"`
	// Utilisation is the GPUs in use over the arrival window (first to
	// last submission) as a share of all; UtilisationToEnd runs to the
	// last job's end (MakespanHours after the first submission).
	Utilisation      float64 `json:"utilisation"`
	UtilisationToEnd float64 `json:"utilisationToEnd"`
	MakespanHours    float64 `json:"makespanHours"`
	// PeakUse is the most GPUs ever in use, as a share of all.
	PeakUse float64 `json:"peakUse"`
	// FragPctAll and FragPctFree are the time averages, over the samples
	// of the arrival window, of fragmentation measure (a) as a share of
	// all GPUs and of the free GPUs (samples with free GPUs only);
	// PeakFragPctAll and PeakFragPctFree the same at the sample with the
	// most GPUs in use.
	FragPctAll      float64 `json:"fragmentationPctOfAll"`
	FragPctFree     float64 `json:"fragmentationPctOfFree"`
	PeakFragPctAll  float64 `json:"fragmentationPctOfAllAtPeak"`
	PeakFragPctFree float64 `json:"fragmentationPctOfFreeAtPeak"`
	// Jain is Jain's index over teams of their jobs' mean bounded
	// slowdown (TeamSlowdown).
	Jain         float64            `json:"jainFairness"`
	TeamSlowdown map[string]float64 `json:"teamMeanSlowdown"`
	Preemptions  int                `json:"preemptions"`
	LostGPUHours float64            `json:"lostGPUHours"`
	// WaitHours is the time jobs waited for their first start, in job
	// hours, by the reason the bot gave when they were submitted, or
	// priority for jobs overtaken by a later one of higher priority (see
	// the package doc); WaitShare the same as shares of the total.
	WaitHours   map[string]float64 `json:"waitHoursByReason"`
	WaitShare   map[string]float64 `json:"waitShareByReason"`
	Calibration Calibration        `json:"calibration"`
	// Timeline is sampled over the replay (CSV and plots only).
	Timeline []Sample    `json:"-"`
	Jobs     []JobResult `json:"-"`
}

// Sample is the cluster at one time of a replay.
type Sample struct {
	Hours       float64 // since the first submission
	UsedGPUs    int
	FreeGPUs    int
	Utilisation float64
	Fragmented  float64 // measure (a), GPUs
	FragPctAll  float64
	FragPctFree float64
	Pending     int
	Running     int
}

// Calibration scores the estimates the bot would have posted: for each
// sampled submission that had to wait, the range EstimateFor gave then,
// against when the job actually started.
type Calibration struct {
	// Stride: every Stride-th job (in arrival order) was sampled; 0 when
	// calibration was off.
	Stride int `json:"stride"`
	// Estimated counts sampled jobs that waited at submission (the bot
	// posts an estimate only then); Known those whose estimate had a
	// range; Started those of them that started before the end.
	Estimated int `json:"estimated"`
	Known     int `json:"known"`
	Started   int `json:"started"`
	// Inside counts starts within the range, give or take a minute (the
	// card shows minutes); InsideShare = Inside/Started. InsideExactly
	// and its share count them without the minute.
	Inside             int     `json:"inside"`
	InsideShare        float64 `json:"insideShare"`
	InsideExactly      int     `json:"insideExactly"`
	InsideExactlyShare float64 `json:"insideExactlyShare"`
	// Absolute error of the range's middle, in seconds.
	MedianAbsErr float64 `json:"medianAbsErrorSeconds"`
	P90AbsErr    float64 `json:"p90AbsErrorSeconds"`
	// MedianWidth is the median width of the ranges; IntervalScore the
	// mean interval score (allocator.ScoreEstimates: width + 10 × how
	// far outside the start fell), in seconds. Lower is better.
	MedianWidth   float64 `json:"medianWidthSeconds"`
	IntervalScore float64 `json:"intervalScoreSeconds"`
}

// JobResult is one job's outcome (CSV only).
type JobResult struct {
	ID, Team, Priority string
	GPUs               int
	Submit, Wait       float64 // seconds: from the first submission; to first start
	Started            bool
	Runtime            float64
	Preemptions        int
	Reason             string
	EstKnown           bool
	EstEarliest        float64 // seconds from the first submission, -1 if none
	EstLatest          float64
	Inside             bool
}

// calibrationTolerance is how far outside its range a start may be and
// still count as inside: the card shows minutes.
const calibrationTolerance = time.Minute

func (e *engine) finish() {
	e.finishElastic()
	p, r := e.p, e.run
	endT := e.lastT // the last event
	r.MakespanHours = endT.Sub(p.first).Hours()
	if w := p.last.Sub(p.first).Seconds(); w > 0 && e.total > 0 {
		r.Utilisation = e.area / (float64(e.total) * w)
	}
	if w := endT.Sub(p.first).Seconds(); w > 0 && e.total > 0 {
		r.UtilisationToEnd = e.areaAll / (float64(e.total) * w)
	}
	if e.total > 0 {
		r.PeakUse = float64(e.peakUsed) / float64(e.total)
	}
	busiest := -1
	for _, sm := range r.Timeline {
		if sm.UsedGPUs > busiest {
			busiest = sm.UsedGPUs
			r.PeakFragPctAll, r.PeakFragPctFree = sm.FragPctAll, sm.FragPctFree
		}
	}
	var n, nFree int
	for _, sm := range r.Timeline {
		if sm.Hours > p.last.Sub(p.first).Hours() {
			break
		}
		n++
		r.FragPctAll += sm.FragPctAll
		if sm.FreeGPUs > 0 {
			nFree++
			r.FragPctFree += sm.FragPctFree
		}
	}
	if n > 0 {
		r.FragPctAll /= float64(n)
	}
	if nFree > 0 {
		r.FragPctFree /= float64(nFree)
	}
	waitsByPrio := map[string][]float64{}
	never := map[string]int{}
	var all []float64
	allNever := 0
	slow := map[string][]float64{}
	r.WaitHours = map[string]float64{}
	var outcomes []allocator.EstimateOutcome
	jumped := e.overtaken(endT)
	cal := &r.Calibration
	cal.Stride = p.stride
	for i, j := range p.jobs {
		s := &e.st[i]
		wait := endT.Sub(j.submit)
		if s.started {
			wait = s.firstStart.Sub(j.submit)
		} else {
			never[j.Priority]++
			allNever++
		}
		ws := wait.Seconds()
		waitsByPrio[j.Priority] = append(waitsByPrio[j.Priority], ws)
		all = append(all, ws)
		if j.prio >= p.highPrio {
			r.HighJobs++
			if wait > time.Hour {
				r.Starvation++
			}
		}
		slow[j.Team] = append(slow[j.Team], Slowdown(wait, j.Runtime))
		if s.reason != allocator.ReasonNone {
			reason := s.reason
			if e.byPrio && jumped(i) {
				reason = allocator.ReasonPriority
			}
			r.WaitHours[string(reason)] += wait.Hours()
		}
		r.LostGPUHours += s.lostGPUSeconds / 3600
		jr := JobResult{ID: j.ID, Team: j.Team, Priority: j.Priority, GPUs: j.gpus, Submit: j.submit.Sub(p.first).Seconds(),
			Wait: ws, Started: s.started, Runtime: j.Runtime.Seconds(), Preemptions: s.preemptions, Reason: string(s.reason),
			EstEarliest: -1, EstLatest: -1}
		if est := s.est; est != nil {
			cal.Estimated++
			if est.Known {
				cal.Known++
				jr.EstKnown = true
				jr.EstEarliest, jr.EstLatest = est.Earliest.Sub(p.first).Seconds(), est.Latest.Sub(p.first).Seconds()
				if s.started {
					o := allocator.EstimateOutcome{Earliest: est.Earliest, Latest: est.Latest, Start: s.firstStart}
					outcomes = append(outcomes, o)
					jr.Inside = allocator.ScoreEstimates([]allocator.EstimateOutcome{o}, calibrationTolerance).Inside == 1
				}
			}
		}
		r.Jobs = append(r.Jobs, jr)
	}
	if r.HighJobs > 0 {
		r.Starvation /= float64(r.HighJobs)
	}
	r.Waits = map[string]WaitStats{}
	for prio, ws := range waitsByPrio {
		r.Waits[prio] = waitStats(ws, never[prio])
	}
	r.AllWaits = waitStats(all, allNever)
	r.TeamSlowdown = map[string]float64{}
	var means []float64
	for _, t := range p.teams {
		xs := slow[t]
		if len(xs) == 0 {
			continue
		}
		sum := 0.0
		for _, x := range xs {
			sum += x
		}
		m := sum / float64(len(xs))
		r.TeamSlowdown[t] = m
		means = append(means, m)
	}
	r.Jain = Jain(means)
	total := 0.0
	for _, reason := range reasonOrder {
		total += r.WaitHours[string(reason)]
	}
	r.WaitShare = map[string]float64{}
	if total > 0 {
		for k, v := range r.WaitHours {
			r.WaitShare[k] = v / total
		}
	}
	if len(outcomes) > 0 {
		sc := allocator.ScoreEstimates(outcomes, calibrationTolerance)
		cal.Started, cal.Inside, cal.InsideShare = sc.N, sc.Inside, sc.Coverage
		cal.InsideExactly, cal.InsideExactlyShare = sc.InsideExactly, sc.CoverageExactly
		cal.MedianAbsErr, cal.P90AbsErr = sc.MedianAbsError.Seconds(), sc.P90AbsError.Seconds()
		cal.MedianWidth, cal.IntervalScore = sc.MedianWidth.Seconds(), sc.IntervalScore.Seconds()
	}
}

// overtaken returns whether job i was overtaken: a job of higher
// priority, submitted later, asking for as many GPUs or more on the same
// flavor (or both unpinned), started before it (before end if it never
// started). Had priority not ordered them, it could have had those GPUs:
// its wait counts as waiting for priority.
func (e *engine) overtaken(end time.Time) func(int) bool {
	type key struct {
		prio   int32
		flavor string
		gpus   int
	}
	// Per group, the jobs by submission and the earliest start among the
	// jobs submitted at or after each of them.
	type group struct {
		key    key
		submit []time.Time
		minAft []time.Time
	}
	idx := map[key]int{}
	var groups []*group
	for i, j := range e.p.jobs { // in submission order
		k := key{j.prio, j.Flavor, j.gpus}
		g, ok := idx[k]
		if !ok {
			g = len(groups)
			idx[k] = g
			groups = append(groups, &group{key: k})
		}
		start := end
		if e.st[i].started {
			start = e.st[i].firstStart
		}
		gr := groups[g]
		gr.submit = append(gr.submit, j.submit)
		gr.minAft = append(gr.minAft, start)
	}
	for _, gr := range groups {
		for i := len(gr.minAft) - 2; i >= 0; i-- {
			if gr.minAft[i+1].Before(gr.minAft[i]) {
				gr.minAft[i] = gr.minAft[i+1]
			}
		}
	}
	return func(i int) bool {
		j := e.p.jobs[i]
		start := end
		if e.st[i].started {
			start = e.st[i].firstStart
		}
		for _, gr := range groups {
			if gr.key.prio <= j.prio || gr.key.gpus < j.gpus || gr.key.flavor != j.Flavor {
				continue
			}
			k, _ := slices.BinarySearchFunc(gr.submit, j.submit, func(a, b time.Time) int {
				if a.After(b) {
					return 1
				}
				return -1
			})
			if k < len(gr.minAft) && gr.minAft[k].Before(start) {
				return true
			}
		}
		return false
	}
}

// reasonOrder lists the reasons for waiting as reports show them.
var reasonOrder = []allocator.Reason{allocator.ReasonQuota, allocator.ReasonCohort, allocator.ReasonCapacity,
	allocator.ReasonFragmentation, allocator.ReasonTopology, allocator.ReasonPriority}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
