package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// minimal is the smallest valid configuration; tests change it.
const minimal = `priorities: [{name: normal, value: 1}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: alice}]
teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 16}}}]
`

func mustDefault(t *testing.T) *Config {
	t.Helper()
	c, err := Default()
	if err != nil {
		t.Fatalf("Default: %v", err)
	}
	return c
}

func ptr(v int) *int { return &v }

// locations compares time zones by name.
var locations = cmp.Comparer(func(a, b *time.Location) bool { return a.String() == b.String() })

func TestDefaultName(t *testing.T) {
	if got := mustDefault(t).Name(); got != "embedded example" {
		t.Errorf("Name() = %q, want %q", got, "embedded example")
	}
}

func TestDefaultCluster(t *testing.T) {
	c := mustDefault(t).Cluster()

	wantFlavors := []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}, {Name: "a100", GPUsPerNode: 8},
		{Name: "h100-spot", GPUsPerNode: 8, Elastic: true}, {Name: "h100-dws", GPUsPerNode: 8, Elastic: true}}
	if diff := cmp.Diff(wantFlavors, c.Flavors); diff != "" {
		t.Errorf("Flavors (-want +got):\n%s", diff)
	}

	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
		if n.GPUs != 8 || !strings.HasPrefix(n.Name, n.Rack+"-") || !strings.HasPrefix(n.Rack, n.Block+"-") || !strings.HasPrefix(n.Block, n.Flavor+"-") {
			t.Errorf("node %+v: inconsistent flavor, block, rack or size", n)
		}
	}
	wantNames := []string{
		"h100-b1-r1-n1", "h100-b1-r1-n2", "h100-b1-r1-n3", "h100-b1-r1-n4",
		"h100-b1-r2-n1", "h100-b1-r2-n2", "h100-b1-r2-n3", "h100-b1-r2-n4",
		"h100-b2-r1-n1", "h100-b2-r1-n2", "h100-b2-r1-n3", "h100-b2-r1-n4",
		"h100-b2-r2-n1", "h100-b2-r2-n2", "h100-b2-r2-n3", "h100-b2-r2-n4",
		"a100-b1-r1-n1", "a100-b1-r1-n2", "a100-b1-r1-n3", "a100-b1-r1-n4",
		"a100-b1-r2-n1", "a100-b1-r2-n2", "a100-b1-r2-n3", "a100-b1-r2-n4",
		"h100-spot-b1-r1-n1", "h100-spot-b1-r1-n2", "h100-spot-b1-r1-n3", "h100-spot-b1-r1-n4",
		"h100-dws-b1-r1-n1", "h100-dws-b1-r1-n2", "h100-dws-b1-r1-n3", "h100-dws-b1-r1-n4",
		"h100-dws-b1-r2-n1", "h100-dws-b1-r2-n2", "h100-dws-b1-r2-n3", "h100-dws-b1-r2-n4",
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("node names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(allocator.Node{Name: "h100-b2-r1-n3", Flavor: "h100", GPUs: 8, Block: "h100-b2", Rack: "h100-b2-r1"}, c.Nodes[10]); diff != "" {
		t.Errorf("Nodes[10] (-want +got):\n%s", diff)
	}

	preempt := allocator.Preemption{WithinClusterQueue: "LowerPriority", ReclaimWithinCohort: "Any"}
	wantQueues := []allocator.Queue{
		{Name: "nlp", Cohort: "research", Flavors: []string{"h100", "a100", "h100-spot", "h100-dws"}, Weight: 2, Preemption: preempt,
			Quotas: map[string]allocator.Quota{
				"h100":      {Nominal: 64, BorrowingLimit: ptr(32), LendingLimit: ptr(16)},
				"a100":      {Nominal: 16, BorrowingLimit: ptr(16), LendingLimit: ptr(8)},
				"h100-spot": {Nominal: 16, BorrowingLimit: ptr(16)},
				"h100-dws":  {Nominal: 32, BorrowingLimit: ptr(32)},
			}},
		{Name: "vision", Cohort: "research", Flavors: []string{"h100", "a100", "h100-spot", "h100-dws"}, Weight: 1, Preemption: preempt,
			Quotas: map[string]allocator.Quota{
				"h100":      {Nominal: 48, BorrowingLimit: ptr(32), LendingLimit: ptr(24)},
				"a100":      {Nominal: 16, BorrowingLimit: ptr(16), LendingLimit: ptr(16)},
				"h100-spot": {Nominal: 8, BorrowingLimit: ptr(16)},
				"h100-dws":  {Nominal: 16, BorrowingLimit: ptr(32)},
			}},
		{Name: "speech", Cohort: "research", Flavors: []string{"a100", "h100", "h100-spot", "h100-dws"}, Weight: 1, Preemption: preempt,
			Quotas: map[string]allocator.Quota{
				"a100":      {Nominal: 32, BorrowingLimit: ptr(16), LendingLimit: ptr(16)},
				"h100":      {Nominal: 16, BorrowingLimit: ptr(16)},
				"h100-spot": {Nominal: 8, BorrowingLimit: ptr(16)},
				"h100-dws":  {Nominal: 16, BorrowingLimit: ptr(32)},
			}},
	}
	if diff := cmp.Diff(wantQueues, c.Queues); diff != "" {
		t.Errorf("Queues (-want +got):\n%s", diff)
	}

	wantPolicy := allocator.Policy{Mode: allocator.BestEffortFIFO, HalfLife: 7 * 24 * time.Hour, EntryPenalty: time.Hour}
	if diff := cmp.Diff(wantPolicy, c.Policy); diff != "" {
		t.Errorf("Policy (-want +got):\n%s", diff)
	}
}

func TestDefaultSettings(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	want := commands.Settings{
		People: []commands.Person{
			{Name: "alice", ChatID: "U0ALICE", Email: "alice@example.com"},
			{Name: "bob", ChatID: "U0BOB", Email: "bob@example.com"},
			{Name: "carol", ChatID: "U0CAROL", Email: "carol@example.com", Admin: true},
			{Name: "dave", ChatID: "U0DAVE", Email: "dave@example.com"},
			{Name: "erin", ChatID: "U0ERIN", Email: "erin@example.com"},
			{Name: "frank", ChatID: "U0FRANK", Email: "frank@example.com"},
			{Name: "grace", ChatID: "U0GRACE", Email: "grace@example.com"},
		},
		Teams: []commands.Team{
			{Name: "nlp", Leads: []string{"bob"}, Members: []string{"alice"}, Channel: "#gpu-nlp"},
			{Name: "vision", Leads: []string{"erin"}, Members: []string{"dave"}, Channel: "#gpu-vision"},
			{Name: "speech", Leads: []string{"frank"}, Members: []string{"grace"}, Channel: "#gpu"},
		},
		Priorities: []commands.Priority{
			{Name: "low", Value: 100}, {Name: "normal", Value: 200}, {Name: "high", Value: 500}, {Name: "urgent", Value: 1000},
		},
		DefaultPriority: "normal",
		Approval:        commands.ApprovalRules{AboveGPUs: 16, Priorities: []string{"high", "urgent"}, Borrowing: true},
		MaxDuration:     7 * 24 * time.Hour,
		EndWarning:      15 * time.Minute,
		Templates:       []string{"default", "pytorch-ddp", "dev-box"},
		DefaultChannel:  "#gpu",
		Location:        berlin,
		Zombies: commands.ZombiePolicy{IdleThreshold: 5, IdleWindow: 30 * time.Minute, LeadsGrace: 30 * time.Minute,
			ReleaseGrace: 30 * time.Minute, KeepFor: 24 * time.Hour, Release: true},
		Elastic: commands.ElasticSettings{
			Flavors: []commands.FlavorTerms{
				{Flavor: "h100-spot", Capacity: commands.CapacitySpot, PricePerGPUHour: 3.2, MaxRunTime: 24 * time.Hour},
				{Flavor: "h100-dws", Capacity: commands.CapacityProvisioned, PricePerGPUHour: 5.4, MaxRunTime: 7 * 24 * time.Hour,
					AdmissionCheck: "dws-h100", ProvisioningRequestConfig: "dws-h100", ProvisioningPrior: 20 * time.Minute, Retry: commands.DefaultProvisioningRetry},
			},
			OfferAfter: time.Hour, ApprovalAboveGPUs: 32, Currency: "$", WeekStart: time.Monday,
			Budgets: map[string]commands.Budget{"nlp": {Money: 5000}, "vision": {GPUHours: 400}, "speech": {Money: 500}},
		},
	}
	if diff := cmp.Diff(want, mustDefault(t).Settings(), locations); diff != "" {
		t.Errorf("Settings() (-want +got):\n%s", diff)
	}
}

func TestDefaultVocabulary(t *testing.T) {
	want := commands.Vocabulary{
		Flavors:    []string{"h100", "a100", "h100-spot", "h100-dws"},
		Teams:      []string{"nlp", "vision", "speech"},
		Priorities: []string{"low", "normal", "high", "urgent"},
		Templates:  []string{"default", "pytorch-ddp", "dev-box"},
	}
	if diff := cmp.Diff(want, mustDefault(t).Vocabulary()); diff != "" {
		t.Errorf("Vocabulary() (-want +got):\n%s", diff)
	}
}

func TestDefaultSeeds(t *testing.T) {
	seeds := mustDefault(t).Seeds()
	if len(seeds) < 6 || len(seeds) > 9 {
		t.Fatalf("%d seeds, want 6 to 9", len(seeds))
	}
	want := commands.Seed{
		Requester:  "dave",
		StartedAgo: 2 * time.Hour,
		Spec: commands.RequestSpec{GPUs: 32, Flavor: "h100", Duration: 6 * time.Hour, Team: "vision",
			Priority: "normal", Topology: "rack", Template: "pytorch-ddp", Reason: "detector pretraining"},
	}
	if diff := cmp.Diff(want, seeds[0]); diff != "" {
		t.Errorf("Seeds()[0] (-want +got):\n%s", diff)
	}
	teams := map[string]bool{}
	ends := map[time.Duration]bool{}
	for _, s := range seeds {
		teams[s.Spec.Team] = true
		ends[s.Spec.Duration-s.StartedAgo] = true
		if s.Spec.Priority == "" || s.Spec.Template == "" {
			t.Errorf("seed %+v: priority or template default not filled in", s)
		}
	}
	if len(teams) != 3 {
		t.Errorf("seeds come from %d teams, want all 3", len(teams))
	}
	if len(ends) < len(seeds)-2 {
		t.Errorf("seeds end at only %d different times", len(ends))
	}
}

// TestDefaultPlacement checks what the example's comment promises, with
// the placement it describes: seeds in file order, each pod on the first
// node in name order with room.
func TestDefaultPlacement(t *testing.T) {
	c := mustDefault(t)
	cl := c.Cluster()
	free := map[string]int{}
	for _, n := range cl.Nodes {
		free[n.Name] = n.GPUs
	}
	for _, s := range c.Seeds() {
		per := 8
		pods := []int{s.Spec.GPUs}
		if s.Spec.GPUs > per {
			pods = nil
			for range s.Spec.GPUs / per {
				pods = append(pods, per)
			}
		}
		racks := map[string]bool{}
		for _, pod := range pods {
			placed := false
			for _, n := range cl.Nodes {
				if n.Flavor == s.Spec.Flavor && free[n.Name] >= pod {
					free[n.Name] -= pod
					racks[n.Rack] = true
					placed = true
					break
				}
			}
			if !placed {
				t.Fatalf("seed %+v does not fit", s.Spec)
			}
		}
		if s.Spec.Topology == "rack" && len(racks) != 1 {
			t.Errorf("seed %+v needs one rack but lands in %v", s.Spec, racks)
		}
	}

	used := map[string]int{}
	largest := map[string]int{}
	for _, n := range cl.Nodes {
		if n.Flavor != "h100" && n.Flavor != "a100" {
			continue // the elastic pools start empty
		}
		used[n.Flavor] += n.GPUs - free[n.Name]
		largest[n.Flavor] = max(largest[n.Flavor], free[n.Name])
	}
	if diff := cmp.Diff(map[string]int{"h100": 117, "a100": 32}, used); diff != "" {
		t.Errorf("GPUs used (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"h100": 4, "a100": 8}, largest); diff != "" {
		t.Errorf("largest one-pod request that fits (-want +got):\n%s", diff)
	}
	gotFree := map[string]int{}
	for name, f := range free {
		if strings.HasPrefix(name, "h100-b") && f > 0 {
			gotFree[name] = f
		}
	}
	wantFree := map[string]int{"h100-b2-r2-n1": 2, "h100-b2-r2-n2": 4, "h100-b2-r2-n3": 2, "h100-b2-r2-n4": 3}
	if diff := cmp.Diff(wantFree, gotFree); diff != "" {
		t.Errorf("free h100 GPUs by node (-want +got):\n%s", diff)
	}
}

func TestAccessorsReturnCopies(t *testing.T) {
	c := mustDefault(t)
	cl := c.Cluster()
	cl.Nodes[0].Name = "changed"
	cl.Queues[0].Flavors[0] = "changed"
	*cl.Queues[0].Quotas["h100"].BorrowingLimit = -1
	s := c.Settings()
	s.Teams[0].Members[0] = "changed"
	s.Priorities[0].Name = "changed"
	c.Seeds()[0].Requester = "changed"
	c.Vocabulary().Templates[0] = "changed"

	if diff := cmp.Diff(mustDefault(t).Cluster(), c.Cluster()); diff != "" {
		t.Errorf("Cluster() changed by a caller (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mustDefault(t).Settings(), c.Settings(), locations); diff != "" {
		t.Errorf("Settings() changed by a caller (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mustDefault(t).Seeds(), c.Seeds()); diff != "" {
		t.Errorf("Seeds() changed by a caller (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mustDefault(t).Vocabulary(), c.Vocabulary()); diff != "" {
		t.Errorf("Vocabulary() changed by a caller (-want +got):\n%s", diff)
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse("gpubot.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Settings()
	wantSettings := commands.Settings{
		People:          []commands.Person{{Name: "alice"}},
		Teams:           []commands.Team{{Name: "nlp", Members: []string{"alice"}, Channel: "#gpu"}},
		Priorities:      []commands.Priority{{Name: "normal", Value: 1}},
		DefaultPriority: "normal",
		EndWarning:      15 * time.Minute,
		Templates:       []string{"default"},
		DefaultChannel:  "#gpu",
		Location:        time.UTC,
		Elastic:         commands.ElasticSettings{OfferAfter: time.Hour, Currency: "$", WeekStart: time.Monday},
	}
	if diff := cmp.Diff(wantSettings, s, locations); diff != "" {
		t.Errorf("Settings() (-want +got):\n%s", diff)
	}
	wantCluster := &allocator.Cluster{
		Flavors: []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}},
		Nodes: []allocator.Node{
			{Name: "h100-b1-r1-n1", Flavor: "h100", GPUs: 8, Block: "h100-b1", Rack: "h100-b1-r1"},
			{Name: "h100-b1-r1-n2", Flavor: "h100", GPUs: 8, Block: "h100-b1", Rack: "h100-b1-r1"},
		},
		Queues: []allocator.Queue{{Name: "nlp", Flavors: []string{"h100"}, Weight: 1,
			Quotas:     map[string]allocator.Quota{"h100": {Nominal: 16}},
			Preemption: allocator.Preemption{WithinClusterQueue: "Never", ReclaimWithinCohort: "Never"}}},
		Policy: allocator.Policy{Mode: allocator.BestEffortFIFO, HalfLife: 168 * time.Hour, EntryPenalty: time.Hour},
	}
	if diff := cmp.Diff(wantCluster, c.Cluster()); diff != "" {
		t.Errorf("Cluster() (-want +got):\n%s", diff)
	}
	if got := c.Seeds(); len(got) != 0 {
		t.Errorf("Seeds() = %v, want none", got)
	}
}

func TestDurations(t *testing.T) {
	tests := map[string]struct {
		maxDuration string
		want        time.Duration
	}{
		"days":            {"7d", 7 * 24 * time.Hour},
		"hours":           {"6h", 6 * time.Hour},
		"minutes":         {"90m", 90 * time.Minute},
		"hours and mins":  {"1h30m", 90 * time.Minute},
		"quoted duration": {`"2d"`, 48 * time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("gpubot.yaml", []byte(minimal+"requests: {maxDuration: "+tc.maxDuration+"}\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Settings().MaxDuration; got != tc.want {
				t.Errorf("MaxDuration = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "gpubot.yaml")
	if err := os.WriteFile(good, []byte(minimal+"timezone: Asia/Tokyo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Name() != good || c.Settings().Location.String() != "Asia/Tokyo" {
		t.Errorf("Load gave name %q, location %v; want %s, Asia/Tokyo", c.Name(), c.Settings().Location, good)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(minimal+"timezone: Mars/Olympus\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	want := bad + `:5:11: timezone: unknown time zone "Mars/Olympus"; use an IANA name like Europe/Berlin or America/New_York`
	if err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v, want %s", err, want)
	}

	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want an fs.ErrNotExist", err)
	}
}

func TestZeroDurations(t *testing.T) {
	tests := map[string]struct {
		entryPenalty, startedAgo string
		wantPenalty, wantAgo     time.Duration
	}{
		"zero minutes": {"0m", "0h", 0, 0},
		"zero days":    {"0d", "00m", 0, 0},
		"fraction":     {"0.5h", "1h30m", 30 * time.Minute, 90 * time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			yaml := minimal + "admission: {mode: AdmissionFairSharing, fairSharing: {entryPenalty: " + tc.entryPenalty + "}}\n" +
				"simulation: {running: [{requester: alice, team: nlp, gpus: 8, flavor: h100, startedAgo: " + tc.startedAgo + ", duration: 2h}]}\n"
			c, err := Parse("gpubot.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Cluster().Policy.EntryPenalty; got != tc.wantPenalty {
				t.Errorf("EntryPenalty = %v, want %v", got, tc.wantPenalty)
			}
			if got := c.Seeds()[0].StartedAgo; got != tc.wantAgo {
				t.Errorf("StartedAgo = %v, want %v", got, tc.wantAgo)
			}
		})
	}
}
