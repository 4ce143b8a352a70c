package simulate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const openBPodHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"

func TestReadOpenBPods(t *testing.T) {
	in := openBPodHeader +
		"p0,12000,16384,1,1000,,LS,Running,0,7200,0\n" + // high, 2h
		"p1,6000,12288,1,460,,BE,Running,100,3700,600\n" + // low, share, 3100s from scheduling
		"p2,8000,30517,0,0,,Burstable,Running,200,400,\n" + // CPU-only; never scheduled: from creation
		"p3,4000,8192,8,1000,V100M16|V100M32,Guaranteed,Failed,300,300,300\n" + // normal, models, zero runtime
		"p4,1000,1024,2,1000,,,Pending,400,1000,\n" // no QoS: normal
	tr, err := ReadTrace(strings.NewReader(in), "pods.csv", ReadOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: "p0", Submit: 0, Runtime: 2 * time.Hour, GPUs: 1, Milli: 1000, CPU: 12000, Memory: 16384, Priority: "high", QoS: "LS", Line: 2},
		{ID: "p1", Submit: 100 * time.Second, Runtime: 3100 * time.Second, GPUs: 1, Milli: 460, CPU: 6000, Memory: 12288, Priority: "low", QoS: "BE", Line: 3},
		{ID: "p2", Submit: 200 * time.Second, Runtime: 200 * time.Second, GPUs: 0, Milli: 1000, CPU: 8000, Memory: 30517, Priority: "normal", QoS: "Burstable", Line: 4},
		{ID: "p3", Submit: 300 * time.Second, GPUs: 8, Milli: 1000, CPU: 4000, Memory: 8192, Models: []string{"V100M16", "V100M32"}, Priority: "normal", QoS: "Guaranteed", Line: 5},
		{ID: "p4", Submit: 400 * time.Second, Runtime: 600 * time.Second, GPUs: 2, Milli: 1000, CPU: 1000, Memory: 1024, Priority: "normal", Line: 6},
	}
	if diff := cmp.Diff(want, tr.Jobs, cmpopts.IgnoreFields(Job{}, "Team")); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if !tr.Timed || tr.Format != "openb" || tr.Skipped != 0 {
		t.Errorf("trace = %+v", tr)
	}
	if !tr.Jobs[1].Fractional() || tr.Jobs[0].Fractional() || tr.Jobs[1].Demand() != 0.46 {
		t.Errorf("fractional: %v %v %v", tr.Jobs[1].Fractional(), tr.Jobs[0].Fractional(), tr.Jobs[1].Demand())
	}
}

func TestReadOpenBPodsWithoutTimes(t *testing.T) {
	tr, err := ReadTrace(strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\n"), "multigpu.csv", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Timed || len(tr.Jobs) != 1 {
		t.Fatalf("trace = %+v", tr)
	}
	n, _ := ReadNodes(strings.NewReader("sn,gpu,model\nn1,8,G2\n"), "nodes.csv", ReadOptions{})
	_, err = Replay(Setup{Nodes: n.Nodes, Trace: tr})
	if err == nil || !strings.Contains(err.Error(), "only the packing mode") {
		t.Errorf("Replay of an untimed trace: %v", err)
	}
}

// TestReadErrors checks that every bad row is reported with its file and
// line, and that SkipBad skips and counts it instead.
func TestReadErrors(t *testing.T) {
	cases := map[string]struct {
		nodes bool
		in    string
		want  string // the error, or the first problem when skipping
	}{
		"node: GPUs not a number": {nodes: true, in: "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,eight,G2\n", want: `nodes.csv:2: gpu: "eight" is not a whole number`},
		"node: no model":          {nodes: true, in: "sn,gpu,model\nn1,8,G2\nn2,8,\n", want: "nodes.csv:3: model: empty for a node with 8 GPUs"},
		"node: twice":             {nodes: true, in: "sn,gpu,model\nn1,8,G2\nn1,8,G2\n", want: `nodes.csv:3: sn: node "n1" already defined on line 2`},
		"node: too many fields":   {nodes: true, in: "name,flavor,gpus\nn1,h100,8,extra\n", want: "nodes.csv:2: has 4 fields, the header 3"},
		"node: negative GPUs":     {nodes: true, in: "name,flavor,gpus\nn1,h100,-8\n", want: "nodes.csv:2: gpus: -8 is out of range 0..1024"},
		"pod: share of two GPUs":  {in: openBPodHeader + "p0,1,1,2,500,,LS,Running,0,10,0\n", want: "pods.csv:2: gpu_milli: 500: a share of a GPU (below 1000) is only possible for one GPU, not 2"},
		"pod: share above 1000":   {in: openBPodHeader + "p0,1,1,1,1500,,LS,Running,0,10,0\n", want: "pods.csv:2: gpu_milli: 1500 is out of range 0..1000"},
		"pod: deleted before created": {in: openBPodHeader + "p0,1,1,1,1000,,LS,Running,0,10,0\np1,1,1,1,1000,,LS,Running,50,40,\n",
			want: "pods.csv:3: deletion_time: 40 is before creation_time 50"},
		"pod: scheduled after deleted": {in: openBPodHeader + "p0,1,1,1,1000,,LS,Running,0,10,20\n", want: "pods.csv:2: scheduled_time: 20 is not between creation_time 0 and deletion_time 10"},
		"pod: unknown QoS":             {in: openBPodHeader + "p0,1,1,1,1000,,Gold,Running,0,10,0\n", want: `pods.csv:2: qos: "Gold" is not LS, BE, Burstable or Guaranteed`},
		"pod: bad quoting":             {in: openBPodHeader + "p0,1,1,1,1000,,LS,Running,0,10,0\n\"p1,1,1,1,1000,,LS,Running,0,10,0\n", want: "pods.csv:3"},
		"generic: unknown priority":    {in: "submit,duration,gpus,priority\n0,1h,1,normal\n60,1h,2,critical\n", want: `pods.csv:3: priority: "critical" is not one of low, normal, high, urgent`},
		"generic: bad duration":        {in: "submit,duration,gpus\n0,soon,1\n", want: `pods.csv:2: duration: "soon" is not a duration (like 3600, 90m, 2h or 2d)`},
		"generic: half a GPU pair":     {in: "submit,duration,gpus\n0,1h,1.5\n", want: "pods.csv:2: gpus: 1.5: above 1 only whole numbers (at most 16777216)"},
		"generic: no GPUs":             {in: "submit,duration,gpus\n0,1h,0\n", want: "pods.csv:2: gpus: 0 must be more than 0"},
		"generic: bad topology":        {in: "submit,duration,gpus,topology\n0,1h,8,zone\n", want: `pods.csv:2: topology: unknown topology level "zone" (want host, rack or block)`},
		"generic: mixed submit times":  {in: "submit,duration,gpus\n2025-03-01T09:00:00Z,1h,1\n60,1h,1\n", want: `pods.csv:3: submit: "60" is not an RFC 3339 time like the earlier rows'`},
		"generic: same id twice":       {in: "id,submit,duration,gpus\na,0,1h,1\na,5,1h,1\n", want: `pods.csv:3: id: "a" already used on line 2`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			read := func(skip bool) (int, []error, error) {
				if tc.nodes {
					nl, err := ReadNodes(strings.NewReader(tc.in), "nodes.csv", ReadOptions{SkipBad: skip})
					if err != nil {
						return 0, nil, err
					}
					return nl.Skipped, nl.Problems, nil
				}
				tr, err := ReadTrace(strings.NewReader(tc.in), "pods.csv", ReadOptions{SkipBad: skip})
				if err != nil {
					return 0, nil, err
				}
				return tr.Skipped, tr.Problems, nil
			}
			_, _, err := read(false)
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T), want a *RowError", err, err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error:\n %s\nwant:\n %s", err, tc.want)
			}
			skipped, problems, err := read(true)
			if err != nil && !strings.Contains(err.Error(), "no GPU nodes") {
				t.Fatalf("with SkipBad: %v", err)
			}
			if err == nil && (skipped != 1 || len(problems) != 1 || !strings.HasPrefix(problems[0].Error(), tc.want)) {
				t.Errorf("with SkipBad: skipped %d, problems %v", skipped, problems)
			}
		})
	}
}

func TestReadFormatErrors(t *testing.T) {
	cases := map[string]struct {
		nodes bool
		in    string
		want  string
	}{
		"empty":                     {in: "", want: "x.csv: unknown file format: the file is empty"},
		"unknown trace":             {in: "a,b\n1,2\n", want: "x.csv:1: unknown file format: a trace has the columns"},
		"generic trace lacks gpus":  {in: "submit,duration\n0,1h\n", want: "x.csv:1: unknown file format: a trace needs the columns submit, duration, gpus; missing gpus"},
		"unknown node list":         {nodes: true, in: "host,gpu\n", want: "x.csv:1: unknown file format: a node list has the columns"},
		"openb node list lacks gpu": {nodes: true, in: "sn,model\nn1,G2\n", want: "x.csv:1: unknown file format: an openb node list needs the columns sn, gpu, model; missing gpu"},
		"duplicate column":          {in: "submit,submit,gpus\n", want: `x.csv:1: unknown file format: column "submit" appears twice`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.nodes {
				_, err = ReadNodes(strings.NewReader(tc.in), "x.csv", ReadOptions{})
			} else {
				_, err = ReadTrace(strings.NewReader(tc.in), "x.csv", ReadOptions{})
			}
			if !errors.Is(err, ErrFormat) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrFormat starting %q", err, tc.want)
			}
		})
	}
}

func TestReadNodes(t *testing.T) {
	in := "# comment\nname,flavor,gpus,block,rack,cpu_milli\nh1,H100,8,b1,r1,96000\nh2,H100,8,b1,r2,\ncpu1,none,0,,,\n"
	nl, err := ReadNodes(strings.NewReader(in), "n.csv", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{{Name: "h1", Model: "H100", GPUs: 8, CPU: 96000, Block: "b1", Rack: "r1"}, {Name: "h2", Model: "H100", GPUs: 8, Block: "b1", Rack: "r2"}}
	if diff := cmp.Diff(want, nl.Nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if nl.CPUOnly != 1 || nl.Format != "generic" {
		t.Errorf("CPUOnly %d, format %s", nl.CPUOnly, nl.Format)
	}
}

func TestReadGeneric(t *testing.T) {
	in := "id,submit,duration,gpus,flavor,team,priority,requested,topology\n" +
		"a,2025-03-01T09:00:00Z,2h,8,h100,nlp,high,4h,host\n" +
		"b,2025-03-01T08:30:00Z,90,0.25,,,,,\n" +
		"c,2025-03-01T10:00:00Z,1d2h,1,,vision,low,,rack\n"
	tr, err := ReadTrace(strings.NewReader(in), "g.csv", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: "a", Submit: 30 * time.Minute, Runtime: 2 * time.Hour, Requested: 4 * time.Hour, GPUs: 8, Milli: 1000, Flavor: "h100", Topology: "host", Team: "nlp", Priority: "high", Line: 2},
		{ID: "b", Submit: 0, Runtime: 90 * time.Second, GPUs: 1, Milli: 250, Team: "default", Priority: "normal", Line: 3},
		{ID: "c", Submit: 90 * time.Minute, Runtime: 26 * time.Hour, GPUs: 1, Milli: 1000, Topology: "rack", Team: "vision", Priority: "low", Line: 4},
	}
	if diff := cmp.Diff(want, tr.Jobs); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"3600": time.Hour, "1.5": 1500 * time.Millisecond, "90m": 90 * time.Minute, "2d": 48 * time.Hour,
		"1d12h": 36 * time.Hour, "0": 0, "1h30m": 90 * time.Minute,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-5", "-1h", "soon", "d", "2x", "NaN"} {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
		}
	}
}

// TestTeamAssignment checks the openb team mapping: a pure function of the
// seed and the pod name, spread by the team weights.
func TestTeamAssignment(t *testing.T) {
	names := make([]string, 6000)
	for i := range names {
		names[i] = fmt.Sprintf("openb-pod-%04d", i)
	}
	count := func(o ReadOptions) (map[string]int, []string) {
		assign := teamAssigner(o)
		c := map[string]int{}
		var seq []string
		for _, n := range names {
			team := assign(n)
			c[team]++
			seq = append(seq, team)
		}
		return c, seq
	}
	zipf, seq1 := count(ReadOptions{Seed: 1})
	// Weights 1, 1/2, 1/3, 1/4 of 25/12: 48%, 24%, 16%, 12% of 6000.
	for team, want := range map[string]int{"team1": 2880, "team2": 1440, "team3": 960, "team4": 720} {
		if got := zipf[team]; got < want*9/10 || got > want*11/10 {
			t.Errorf("zipf: %s has %d pods, want about %d (%v)", team, got, want, zipf)
		}
	}
	uni, _ := count(ReadOptions{Seed: 1, Teams: 3, TeamMix: TeamsUniform})
	for _, team := range []string{"team1", "team2", "team3"} {
		if got := uni[team]; got < 1800 || got > 2200 {
			t.Errorf("uniform: %s has %d pods, want about 2000 (%v)", team, got, uni)
		}
	}
	_, again := count(ReadOptions{Seed: 1})
	_, other := count(ReadOptions{Seed: 2})
	if !cmp.Equal(seq1, again) {
		t.Error("the same seed gave other teams")
	}
	if cmp.Equal(seq1, other) {
		t.Error("seeds 1 and 2 gave the same teams")
	}
}
