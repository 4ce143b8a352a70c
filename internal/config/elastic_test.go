package config

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/commands"
)

const elasticBase = `priorities: [{name: normal, value: 1}]
people: [{name: alice}]
`

func TestElasticConfig(t *testing.T) {
	c, err := Parse("gpubot.yaml", []byte(elasticBase+`flavors:
  - {name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}, pricePerGPUHour: 2}
  - {name: spot, gpusPerNode: 8, nodes: {nodesPerRack: 2}, capacity: spot, pricePerGPUHour: 1.5, simulation: {reclaimAfter: 2h}}
  - name: dws
    gpusPerNode: 8
    nodes: {nodesPerRack: 2}
    capacity: provisioned
    maxRunTime: 7d
    provisioning: {admissionCheck: dws.check, prior: 30m, retries: 2, retryBackoff: 1m, maxRetryBackoff: 5m}
    simulation: {failAttempts: 1, failurePercent: 25, seed: 42}
teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 16}, spot: {nominal: 16}, dws: {nominal: 16}}, elasticBudget: {gpuHoursPerWeek: 100}}]
elastic: {offerAfter: 2h, approvalAboveGPUs: 8, currency: EUR, weekStart: Sunday}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := commands.ElasticSettings{
		Flavors: []commands.FlavorTerms{
			{Flavor: "h100", Capacity: commands.CapacityReserved, PricePerGPUHour: 2},
			{Flavor: "spot", Capacity: commands.CapacitySpot, PricePerGPUHour: 1.5},
			{Flavor: "dws", Capacity: commands.CapacityProvisioned, MaxRunTime: 7 * 24 * time.Hour,
				AdmissionCheck: "dws.check", ProvisioningRequestConfig: "dws", ProvisioningPrior: 30 * time.Minute,
				Retry: commands.ProvisioningRetry{Limit: 2, Backoff: time.Minute, MaxBackoff: 5 * time.Minute}},
		},
		OfferAfter: 2 * time.Hour, ApprovalAboveGPUs: 8, Currency: "EUR", WeekStart: time.Sunday,
		Budgets: map[string]commands.Budget{"nlp": {GPUHours: 100}},
	}
	if d := cmp.Diff(want, c.Settings().Elastic); d != "" {
		t.Errorf("Elastic (-want +got):\n%s", d)
	}
	wantSim := map[string]SimFlavor{"spot": {ReclaimAfter: 2 * time.Hour}, "dws": {ProvisioningTime: 30 * time.Minute, FailAttempts: 1, FailurePercent: 25, Seed: 42}}
	if d := cmp.Diff(wantSim, c.SimFlavors()); d != "" {
		t.Errorf("SimFlavors (-want +got):\n%s", d)
	}
	for _, f := range c.Cluster().Flavors {
		if f.Elastic != (f.Name != "h100") {
			t.Errorf("flavor %s: Elastic = %v", f.Name, f.Elastic)
		}
	}
}

func TestElasticValidation(t *testing.T) {
	flavors := `flavors:
  - {name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 4}}
  - {name: spot, gpusPerNode: 8, nodes: {nodesPerRack: 4}, capacity: spot}
`
	tests := map[string]struct {
		yaml string
		want []string
	}{
		"bad capacity, price, reserved maxRunTime": {
			yaml: elasticBase + `flavors:
  - {name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}, capacity: spto, pricePerGPUHour: -1, maxRunTime: 2h}
teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 8}}}]
`,
			want: []string{
				`gpubot.yaml:4:70: flavors[0].capacity: unknown capacity "spto"; did you mean "spot"?`,
				`gpubot.yaml:4:93: flavors[0].pricePerGPUHour: must be more than 0`,
				`gpubot.yaml:4:109: flavors[0].maxRunTime: is for spot and provisioned flavors; set capacity or remove it`,
			},
		},
		"provisioning on spot, reclaimAfter on provisioned": {
			yaml: elasticBase + `flavors:
  - {name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}
  - {name: spot, gpusPerNode: 8, nodes: {nodesPerRack: 2}, capacity: spot, provisioning: {prior: 1h}}
  - {name: dws, gpusPerNode: 8, nodes: {nodesPerRack: 2}, capacity: provisioned, simulation: {reclaimAfter: 1h}, provisioning: {admissionCheck: "Bad Name"}}
teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 8}}}]
`,
			want: []string{
				`gpubot.yaml:5:76: flavors[1].provisioning: is only for flavors with capacity: provisioned`,
				`gpubot.yaml:6:95: flavors[2].simulation.reclaimAfter: is only for flavors with capacity: spot`,
				`gpubot.yaml:6:145: flavors[2].provisioning.admissionCheck: "Bad Name" is not a valid Kueue object name: lowercase letters, digits, '-' and '.', at most 253 characters`,
			},
		},
		"bad retry strategy and simulated failures": {
			yaml: elasticBase + `flavors:
  - {name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}
  - {name: spot, gpusPerNode: 8, nodes: {nodesPerRack: 2}, capacity: spot, simulation: {failAttempts: 1}}
  - {name: dws, gpusPerNode: 8, nodes: {nodesPerRack: 2}, capacity: provisioned, provisioning: {retries: -1, retryBackoff: 0.001m, maxRetryBackoff: 0m}, simulation: {failurePercent: 150}}
  - {name: dws2, gpusPerNode: 8, nodes: {nodesPerRack: 2}, capacity: provisioned, provisioning: {retryBackoff: 10m, maxRetryBackoff: 5m}}
teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 8}}}]
`,
			want: []string{
				`gpubot.yaml:5:89: flavors[1].simulation.failAttempts: is only for flavors with capacity: provisioned`,
				`gpubot.yaml:6:106: flavors[2].provisioning.retries: must not be negative`,
				`gpubot.yaml:6:124: flavors[2].provisioning.retryBackoff: invalid duration "0.001m": must be more than zero`,
				`gpubot.yaml:6:149: flavors[2].provisioning.maxRetryBackoff: invalid duration "0m": must be more than zero`,
				`gpubot.yaml:6:183: flavors[2].simulation.failurePercent: is a percentage: a number from 0 to 100`,
				`gpubot.yaml:7:97: flavors[3].provisioning.maxRetryBackoff: (5m0s) is shorter than retryBackoff (10m0s)`,
			},
		},
		"only elastic quota, budget without elastic, both budgets": {
			yaml: `priorities: [{name: normal, value: 1}]
people: [{name: alice}, {name: bob}]
` + flavors + `teams:
  - {name: nlp, members: [alice], quota: {spot: {nominal: 8}}}
  - {name: cv, members: [bob], quota: {h100: {nominal: 8}}, elasticBudget: {gpuHoursPerWeek: 10}}
  - {name: tts, quota: {h100: {nominal: 8}, spot: {nominal: 8}}, elasticBudget: {gpuHoursPerWeek: 10, moneyPerWeek: 5}}
  - {name: asr, quota: {h100: {nominal: 8}, spot: {nominal: 8}}, elasticBudget: {moneyPerWeek: 5}}
`,
			want: []string{
				`gpubot.yaml:7:35: teams[0].quota: lists only spot or provisioned flavors (spot); give the team a reserved flavor too, where requests that name no flavor run`,
				`gpubot.yaml:8:61: teams[1].elasticBudget: team cv has no quota on a spot or provisioned flavor to spend it on`,
				`gpubot.yaml:9:117: teams[2].elasticBudget.moneyPerWeek: give gpuHoursPerWeek or moneyPerWeek, not both`,
				`gpubot.yaml:10:66: teams[3].elasticBudget: is in money, but flavor spot has no pricePerGPUHour`,
			},
		},
		"bad elastic section": {
			yaml: elasticBase + flavors + `teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 8}}}]
elastic: {offerAfter: soon, approvalAboveGPUs: -2, currency: "US dollars", weekStart: Mon, spend: 1}
`,
			want: []string{
				`gpubot.yaml:7:23: elastic.offerAfter: invalid duration "soon": expected a number, as in 4h`,
				`gpubot.yaml:7:48: elastic.approvalAboveGPUs: must not be negative`,
				`gpubot.yaml:7:62: elastic.currency: "US dollars" is not a currency sign: use up to 4 characters without spaces, like $ or EUR`,
				`gpubot.yaml:7:87: elastic.weekStart: unknown day "Mon" (known: Sunday, Monday, Tuesday, Wednesday, Thursday, Friday, Saturday)`,
				`gpubot.yaml:7:92: elastic.spend: unknown key "spend" (known keys: offerAfter, approvalAboveGPUs, currency, weekStart)`,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("gpubot.yaml", []byte(tc.yaml))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse() = %v, want Errors", err)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}
