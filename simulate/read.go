package simulate

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// The readers take CSV files with a header line; columns are found by
// name (case does not matter) and may come in any order; blank lines and
// lines starting with # are ignored. Formats are told apart by their
// columns:
//
//   - openb node list: sn, gpu, model (cpu_milli, memory_mib optional).
//   - generic node list: name, flavor (or model), gpus (block, rack,
//     cpu_milli, memory_mib optional).
//   - openb pod list: name, num_gpu, gpu_milli (cpu_milli, memory_mib,
//     gpu_spec, qos, pod_phase, creation_time, deletion_time,
//     scheduled_time optional; without the times only the packing mode
//     can use it).
//   - generic trace: submit, duration, gpus (id, flavor, team, priority,
//     requested, topology, cpu_milli, memory_mib optional); see ReadTrace.

// table reads a CSV file row by row, remembering line numbers.
type table struct {
	file   string
	r      *csv.Reader
	header []string
	cols   map[string]int
	rec    []string
	line   int
}

func newTable(r io.Reader, file string) (*table, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	hdr, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: %w: the file is empty (want a header line)", file, ErrFormat)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: reading the header: %w", file, err)
	}
	t := &table{file: file, r: cr, header: append([]string(nil), hdr...), cols: map[string]int{}}
	for i, h := range t.header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		t.header[i] = h
		if _, dup := t.cols[h]; dup {
			return nil, fmt.Errorf("%s:1: %w: column %q appears twice", file, ErrFormat, h)
		}
		t.cols[h] = i
	}
	return t, nil
}

// next reads the next row. It returns io.EOF at the end, a *RowError for
// a row that is not valid CSV or has the wrong number of fields.
func (t *table) next() error {
	rec, err := t.r.Read()
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return &RowError{File: t.file, Line: pe.Line, Err: pe.Err}
		}
		return fmt.Errorf("%s: %w", t.file, err)
	}
	t.rec = rec
	t.line, _ = t.r.FieldPos(0)
	if len(rec) != len(t.header) {
		return t.errorf("has %d fields, the header %d", len(rec), len(t.header))
	}
	return nil
}

func (t *table) has(col string) bool { _, ok := t.cols[col]; return ok }

// get returns the trimmed value of col, "" if there is no such column.
func (t *table) get(col string) string {
	i, ok := t.cols[col]
	if !ok || i >= len(t.rec) {
		return ""
	}
	return strings.TrimSpace(t.rec[i])
}

func (t *table) errorf(format string, args ...any) *RowError {
	return &RowError{File: t.file, Line: t.line, Err: fmt.Errorf(format, args...)}
}

// require checks that the header has every column in cols.
func (t *table) require(format string, cols ...string) error {
	var missing []string
	for _, c := range cols {
		if !t.has(c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s:1: %w: %s needs the columns %s; missing %s", t.file, ErrFormat, format,
			strings.Join(cols, ", "), strings.Join(missing, ", "))
	}
	return nil
}

// integer parses col as an integer in [lo, hi]; empty means def.
func (t *table) integer(col string, lo, hi, def int64) (int64, error) {
	v := t.get(col)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, t.errorf("%s: %q is not a whole number", col, v)
	}
	if n < lo || n > hi {
		return 0, t.errorf("%s: %d is out of range %d..%d", col, n, lo, hi)
	}
	return n, nil
}

// duration parses col: seconds as a number ("3600", "1.5"), or a
// duration with units ("90m", "2h", "1h30m", "2d"). Empty means def.
func (t *table) duration(col string, def time.Duration) (time.Duration, error) {
	v := t.get(col)
	if v == "" {
		return def, nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return 0, t.errorf("%s: %v", col, err)
	}
	return d, nil
}

// ParseDuration reads seconds as a number ("3600", "1.5") or a duration
// with units as Go writes them, plus d for days ("90m", "1h30m", "2d").
// Negative durations are refused.
func ParseDuration(v string) (time.Duration, error) {
	if v == "" {
		return 0, errors.New("an empty duration")
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 || math.IsNaN(f) || f > float64(math.MaxInt64)/1e9 {
			return 0, fmt.Errorf("%q is not a duration of at least 0 seconds", v)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	s := v
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a duration (like 3600, 90m, 2h or 2d)", v)
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
	}
	var d time.Duration
	if s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration (like 3600, 90m, 2h or 2d)", v)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", v)
	}
	return days + d, nil
}

// rows runs row for each row of t, applying skipBad: a *RowError from
// next or row is returned, or counted in skipped when skipBad is set.
func (t *table) rows(skipBad bool, skipped *int, problems *[]error, row func() error) error {
	for {
		err := t.next()
		if err == nil {
			err = row()
		}
		if err == nil {
			continue
		}
		if err == io.EOF {
			return nil
		}
		var re *RowError
		if !errors.As(err, &re) {
			return err
		}
		if !skipBad {
			return err
		}
		*skipped++
		if len(*problems) < maxProblems {
			*problems = append(*problems, err)
		}
	}
}

// ReadNodes reads an openb or a generic node list (see the package doc).
// Nodes without GPUs are left out and counted in CPUOnly.
func ReadNodes(r io.Reader, file string, opts ReadOptions) (*NodeList, error) {
	t, err := newTable(r, file)
	if err != nil {
		return nil, err
	}
	out := &NodeList{Name: file}
	modelCol, gpuCol, nameCol := "model", "gpu", "sn"
	switch {
	case t.has("sn"):
		out.Format = "openb"
		if err := t.require("an openb node list", "sn", "gpu", "model"); err != nil {
			return nil, err
		}
	case t.has("name"):
		out.Format = "generic"
		nameCol, gpuCol, modelCol = "name", "gpus", "flavor"
		if !t.has("flavor") && t.has("model") {
			modelCol = "model"
		}
		if err := t.require("a node list", "name", modelCol, "gpus"); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s:1: %w: a node list has the columns sn,gpu,model (openb) or name,flavor,gpus; found %s",
			file, ErrFormat, strings.Join(t.header, ","))
	}
	seen := map[string]int{}
	err = t.rows(opts.SkipBad, &out.Skipped, &out.Problems, func() error {
		n := Node{Name: t.get(nameCol), Model: t.get(modelCol), Block: t.get("block"), Rack: t.get("rack")}
		if n.Name == "" {
			return t.errorf("%s: empty node name", nameCol)
		}
		if prev, dup := seen[n.Name]; dup {
			return t.errorf("%s: node %q already defined on line %d", nameCol, n.Name, prev)
		}
		gpus, err := t.integer(gpuCol, 0, allocator.MaxNodeGPUs, -1)
		if err != nil {
			return err
		}
		if gpus < 0 {
			return t.errorf("%s: empty", gpuCol)
		}
		if n.CPU, err = t.integer("cpu_milli", 0, math.MaxInt64, 0); err != nil {
			return err
		}
		if n.Memory, err = t.integer("memory_mib", 0, math.MaxInt64, 0); err != nil {
			return err
		}
		n.GPUs = int(gpus)
		if n.GPUs == 0 {
			out.CPUOnly++
			return nil
		}
		if n.Model == "" {
			return t.errorf("%s: empty for a node with %d GPUs", modelCol, n.GPUs)
		}
		seen[n.Name] = t.line
		out.Nodes = append(out.Nodes, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out.Nodes) == 0 {
		return nil, fmt.Errorf("%s: no GPU nodes", file)
	}
	return out, nil
}

// ReadTrace reads an openb pod list or a generic trace.
//
// A generic trace has one job per row: submit (seconds from the start of
// the trace, or an RFC 3339 time), duration (how long it ran: seconds, or
// 90m, 2h, 1d), gpus (a whole number, or a share of one GPU below 1 such
// as 0.5), and optionally id (default: line-<n>), flavor (pins the job to
// that flavor), team (default "default"), priority (a class name, default
// normal), requested (the duration asked for; default: derived from
// duration, see RequestedFor), topology (host, rack or block) and
// cpu_milli and memory_mib (what all its pods ask for together).
//
// An openb pod list is mapped as the package doc describes (QoS to
// priority, teams from a seeded hash of the pod name).
func ReadTrace(r io.Reader, file string, opts ReadOptions) (*Trace, error) {
	t, err := newTable(r, file)
	if err != nil {
		return nil, err
	}
	switch {
	case t.has("num_gpu"):
		return readOpenBPods(t, opts)
	case t.has("submit"):
		return readGeneric(t, opts)
	}
	return nil, fmt.Errorf("%s:1: %w: a trace has the columns name,num_gpu,gpu_milli,… (openb pod list) or submit,duration,gpus,… (generic); found %s",
		t.file, ErrFormat, strings.Join(t.header, ","))
}

func readOpenBPods(t *table, opts ReadOptions) (*Trace, error) {
	if err := t.require("an openb pod list", "name", "num_gpu", "gpu_milli"); err != nil {
		return nil, err
	}
	out := &Trace{Name: t.file, Format: "openb", Timed: t.has("creation_time") && t.has("deletion_time")}
	classes := opts.priorities()
	for _, p := range []string{"low", "normal", "high"} {
		if _, ok := priorityValue(classes, p); !ok {
			return nil, fmt.Errorf("the openb mapping needs the priority classes low, normal and high; there is no %q", p)
		}
	}
	assign := teamAssigner(opts)
	seen := map[string]int{}
	err := t.rows(opts.SkipBad, &out.Skipped, &out.Problems, func() error {
		j := Job{ID: t.get("name"), Line: t.line, QoS: t.get("qos")}
		if j.ID == "" {
			return t.errorf("name: empty pod name")
		}
		if prev, dup := seen[j.ID]; dup {
			return t.errorf("name: pod %q already listed on line %d", j.ID, prev)
		}
		n, err := t.integer("num_gpu", 0, allocator.MaxNodeGPUs, -1)
		if err != nil {
			return err
		}
		if n < 0 {
			return t.errorf("num_gpu: empty")
		}
		m, err := t.integer("gpu_milli", 0, 1000, -1)
		if err != nil {
			return err
		}
		switch {
		case m < 0:
			return t.errorf("gpu_milli: empty")
		case n > 0 && m == 0:
			return t.errorf("gpu_milli: 0 for a pod with %d GPUs", n)
		case n > 1 && m < 1000:
			return t.errorf("gpu_milli: %d: a share of a GPU (below 1000) is only possible for one GPU, not %d", m, n)
		case n == 0 && m != 0:
			return t.errorf("gpu_milli: %d for a pod without GPUs", m)
		}
		j.GPUs, j.Milli = int(n), int(m)
		if j.GPUs == 0 {
			j.Milli = 1000
		}
		if j.CPU, err = t.integer("cpu_milli", 0, math.MaxInt64, 0); err != nil {
			return err
		}
		if j.Memory, err = t.integer("memory_mib", 0, math.MaxInt64, 0); err != nil {
			return err
		}
		if spec := t.get("gpu_spec"); spec != "" {
			j.Models = strings.Split(spec, "|")
		}
		switch strings.ToUpper(j.QoS) {
		case "LS":
			j.Priority = "high"
		case "", "GUARANTEED", "BURSTABLE":
			j.Priority = "normal"
		case "BE":
			j.Priority = "low"
		default:
			return t.errorf("qos: %q is not LS, BE, Burstable or Guaranteed", j.QoS)
		}
		if out.Timed {
			c, err := t.integer("creation_time", 0, math.MaxInt64/int64(time.Second), -1)
			if err != nil {
				return err
			}
			d, err := t.integer("deletion_time", 0, math.MaxInt64/int64(time.Second), -1)
			if err != nil {
				return err
			}
			s, err := t.integer("scheduled_time", 0, math.MaxInt64/int64(time.Second), -1)
			if err != nil {
				return err
			}
			switch {
			case c < 0:
				return t.errorf("creation_time: empty")
			case d < 0:
				return t.errorf("deletion_time: empty")
			case d < c:
				return t.errorf("deletion_time: %d is before creation_time %d", d, c)
			case s >= 0 && (s < c || s > d):
				return t.errorf("scheduled_time: %d is not between creation_time %d and deletion_time %d", s, c, d)
			}
			start := c
			if s >= 0 {
				start = s
			}
			j.Submit = time.Duration(c) * time.Second
			j.Runtime = time.Duration(d-start) * time.Second
		}
		j.Team = assign(j.ID)
		seen[j.ID] = t.line
		out.Jobs = append(out.Jobs, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// teamAssigner returns the openb team of a pod: a hash of the seed and
// the pod name, drawn against the teams' weights.
func teamAssigner(opts ReadOptions) func(string) string {
	n := opts.teams()
	cum := make([]float64, n)
	total := 0.0
	for i := range n {
		w := 1.0
		if opts.TeamMix != TeamsUniform {
			w = 1 / float64(i+1)
		}
		total += w
		cum[i] = total
	}
	return func(name string) string {
		u := float64(hashString(opts.Seed, name)>>11) / (1 << 53) * total
		for i, c := range cum {
			if u < c {
				return teamName(i)
			}
		}
		return teamName(n - 1)
	}
}

// hashString mixes seed and s (FNV-1a, then a splitmix64 finaliser).
func hashString(seed uint64, s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix64(h ^ mix64(seed))
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func readGeneric(t *table, opts ReadOptions) (*Trace, error) {
	if err := t.require("a trace", "submit", "duration", "gpus"); err != nil {
		return nil, err
	}
	out := &Trace{Name: t.file, Format: "generic", Timed: true}
	classes := opts.priorities()
	seen := map[string]int{}
	var absolute, relative bool
	err := t.rows(opts.SkipBad, &out.Skipped, &out.Problems, func() error {
		j := Job{ID: t.get("id"), Line: t.line, Flavor: t.get("flavor"), Team: t.get("team"), Priority: t.get("priority")}
		if j.ID == "" {
			j.ID = fmt.Sprintf("line-%d", t.line)
		}
		if prev, dup := seen[j.ID]; dup {
			return t.errorf("id: %q already used on line %d", j.ID, prev)
		}
		sub := t.get("submit")
		if ts, err := time.Parse(time.RFC3339, sub); err == nil {
			if relative {
				return t.errorf("submit: %q is a time, but earlier rows give seconds", sub)
			}
			absolute = true
			j.Submit = ts.Sub(time.Unix(0, 0))
		} else {
			if absolute {
				return t.errorf("submit: %q is not an RFC 3339 time like the earlier rows'", sub)
			}
			d, err := t.duration("submit", -1)
			if err != nil || d < 0 {
				return t.errorf("submit: %q is neither seconds from the start nor an RFC 3339 time", sub)
			}
			relative = true
			j.Submit = d
		}
		var err error
		if j.Runtime, err = t.duration("duration", -1); err != nil {
			return err
		}
		if j.Runtime < 0 {
			return t.errorf("duration: empty")
		}
		if j.Requested, err = t.duration("requested", 0); err != nil {
			return err
		}
		g := t.get("gpus")
		f, perr := strconv.ParseFloat(g, 64)
		switch {
		case perr != nil || math.IsNaN(f):
			return t.errorf("gpus: %q is not a number", g)
		case f <= 0:
			return t.errorf("gpus: %s must be more than 0", g)
		case f < 1:
			j.GPUs, j.Milli = 1, int(math.Round(f*1000))
			if j.Milli == 0 {
				return t.errorf("gpus: %s is less than a thousandth of a GPU", g)
			}
		case f != math.Trunc(f) || f > allocator.MaxRequestGPUs:
			return t.errorf("gpus: %s: above 1 only whole numbers (at most %d)", g, allocator.MaxRequestGPUs)
		default:
			j.GPUs, j.Milli = int(f), 1000
		}
		if j.Team == "" {
			j.Team = "default"
		}
		if j.Priority == "" {
			j.Priority = DefaultPriority
		}
		if _, ok := priorityValue(classes, j.Priority); !ok {
			names := make([]string, len(classes))
			for i, c := range classes {
				names[i] = c.Name
			}
			return t.errorf("priority: %q is not one of %s", j.Priority, strings.Join(names, ", "))
		}
		if j.CPU, err = t.integer("cpu_milli", 0, math.MaxInt64, 0); err != nil {
			return err
		}
		if j.Memory, err = t.integer("memory_mib", 0, math.MaxInt64, 0); err != nil {
			return err
		}
		if topo := t.get("topology"); topo != "" {
			l, err := allocator.ParseLevel(topo)
			if err != nil {
				return t.errorf("topology: %v", err)
			}
			j.Topology = l.String()
		}
		seen[j.ID] = t.line
		out.Jobs = append(out.Jobs, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if absolute && len(out.Jobs) > 0 { // times become offsets from the first
		first := out.Jobs[0].Submit
		for _, j := range out.Jobs {
			first = min(first, j.Submit)
		}
		for i := range out.Jobs {
			out.Jobs[i].Submit -= first
		}
	}
	return out, nil
}
