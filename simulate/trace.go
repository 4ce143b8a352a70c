package simulate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Node is one GPU node of the simulated cluster, as a node list gives it.
type Node struct {
	Name string
	// Model is the GPU model ("G2", "T4") of an openb node list, or the
	// flavor of a generic one. Flavor names are Model in lower case.
	Model string
	GPUs  int
	// CPU in millicores and Memory in MiB; 0 when the list does not say.
	CPU, Memory int64
	// Block and Rack are topology labels (generic node lists only).
	Block, Rack string
}

// Flavor is the allocator flavor name of a GPU model.
func Flavor(model string) string { return strings.ToLower(model) }

// Job is one unit of work of a trace: one pod of the openb trace, one row
// of a generic trace.
type Job struct {
	ID string
	// Submit is when it was submitted, from the start of the trace.
	Submit time.Duration
	// Runtime is how long it ran once started (preempted work restarts
	// from the beginning).
	Runtime time.Duration
	// Requested is the duration the user asked for; 0 means unknown, and
	// the replay derives it from Runtime (see RequestedFor).
	Requested time.Duration
	// GPUs is the number of GPUs; 0 for a CPU-only pod.
	GPUs int
	// Milli is the share of each GPU in thousandths: 1000 is a whole
	// GPU; less (openb gpu_milli) is a share of one GPU.
	Milli int
	// CPU in millicores and Memory in MiB (openb only; packing uses them).
	CPU, Memory int64
	// Models lists the GPU models the job may run on (openb gpu_spec);
	// empty means any.
	Models []string
	// Flavor pins the job to one flavor (generic traces); "" means any.
	Flavor   string
	Topology string // "", "host", "rack" or "block"
	Team     string
	Priority string // a priority class name
	QoS      string // openb QoS, kept for reports
	Line     int    // line in the trace file
}

// Fractional reports whether the job asks for a share of one GPU.
func (j *Job) Fractional() bool { return j.GPUs == 1 && j.Milli < 1000 }

// Demand is the job's GPU demand in GPUs (shares counted as such).
func (j *Job) Demand() float64 { return float64(j.GPUs) * float64(j.Milli) / 1000 }

// Trace is what a trace reader returns.
type Trace struct {
	Name   string // the file it came from
	Format string // "openb" or "generic"
	Jobs   []Job  // in file order
	// Timed is false when the file has no submission times (some openb
	// pod lists); only the packing mode can use such a trace.
	Timed bool
	// Skipped counts rows left out because they could not be read
	// (ReadOptions.SkipBad); Problems keeps the first few reasons.
	Skipped  int
	Problems []error
}

// NodeList is what the node list reader returns.
type NodeList struct {
	Name     string
	Format   string // "openb" or "generic"
	Nodes    []Node
	CPUOnly  int // nodes without GPUs, left out
	Skipped  int
	Problems []error
}

// PriorityClass is a named priority (a Kueue WorkloadPriorityClass).
type PriorityClass struct {
	Name  string `json:"name"`
	Value int32  `json:"value"`
}

// DefaultPriorities are gpubot's example configuration's classes.
var DefaultPriorities = []PriorityClass{{"low", 100}, {"normal", 200}, {"high", 500}, {"urgent", 1000}}

// DefaultPriority is the class of jobs whose trace does not say.
const DefaultPriority = "normal"

// TeamMix is how the openb mapping spreads pods over teams.
type TeamMix string

const (
	// TeamsZipf gives team i (from 1) a weight 1/i: a few teams submit
	// most of the work, as in shared clusters.
	TeamsZipf TeamMix = "zipf"
	// TeamsUniform gives every team the same weight.
	TeamsUniform TeamMix = "uniform"
)

// ReadOptions tunes the trace and node list readers.
type ReadOptions struct {
	// SkipBad skips rows that cannot be read, counting them, instead of
	// failing at the first with a RowError.
	SkipBad bool
	// Teams is the number of teams openb pods are spread over (default 4)
	// and TeamMix how (default TeamsZipf); Seed varies the assignment.
	Teams   int
	TeamMix TeamMix
	Seed    uint64
	// Priorities are the known classes (default DefaultPriorities): a
	// generic trace's priority column must name one; the openb QoS
	// mapping uses "high", "normal" and "low".
	Priorities []PriorityClass
}

func (o ReadOptions) teams() int {
	if o.Teams <= 0 {
		return 4
	}
	return o.Teams
}

func (o ReadOptions) priorities() []PriorityClass {
	if len(o.Priorities) == 0 {
		return DefaultPriorities
	}
	return o.Priorities
}

// ErrFormat is wrapped by errors about a file's header: a missing column
// or a format the readers do not know.
var ErrFormat = errors.New("unknown file format")

// RowError is a row that could not be read: the file, the line (from 1)
// and what was wrong.
type RowError struct {
	File string
	Line int
	Err  error
}

func (e *RowError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *RowError) Unwrap() error { return e.Err }

// maxProblems is how many skipped rows' reasons a reader keeps.
const maxProblems = 10

// teamName is the name of team i (from 0).
func teamName(i int) string { return fmt.Sprintf("team%d", i+1) }

// priorityValue returns the value of class name among classes.
func priorityValue(classes []PriorityClass, name string) (int32, bool) {
	i := slices.IndexFunc(classes, func(c PriorityClass) bool { return strings.EqualFold(c.Name, name) })
	if i < 0 {
		return 0, false
	}
	return classes[i].Value, true
}

// HasCPU and HasMemory report whether some job asks for CPU (memory):
// a trace that does not say (generic CSV without the columns) counts
// GPUs only.
func (t *Trace) HasCPU() bool {
	for _, j := range t.Jobs {
		if j.CPU > 0 {
			return true
		}
	}
	return false
}

func (t *Trace) HasMemory() bool {
	for _, j := range t.Jobs {
		if j.Memory > 0 {
			return true
		}
	}
	return false
}
