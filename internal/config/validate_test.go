package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/deploy"
)

// TestValidation feeds broken configurations and expects every problem,
// exactly as reported. Each case is a whole file; its lines are numbered
// from 1 as written.
func TestValidation(t *testing.T) {
	tests := map[string]struct {
		yaml string
		want []string
	}{
		"empty file": {
			yaml: "",
			want: []string{
				"gpubot.yaml: priorities: is required",
				"gpubot.yaml: flavors: is required",
				"gpubot.yaml: people: is required",
				"gpubot.yaml: teams: is required",
			},
		},
		"yaml syntax": {
			yaml: "teams: [\n",
			want: []string{"gpubot.yaml:1: did not find expected node content"},
		},
		// go-yaml itself reports these lines 3, 4, 2, 2 and none.
		"yaml syntax: a list item's key indented one space too far": {
			yaml: "timezone: UTC\ndefaultChannel: \"#gpu\"\nteams:\n  - name: x\n   bad: y\n",
			want: []string{"gpubot.yaml:5: did not find expected '-' indicator"},
		},
		"yaml syntax: a key indented less than its siblings": {
			yaml: "timezone: UTC\ndefaultChannel: \"#gpu\"\nsimulation:\n  running: []\n startedAgo: 1h\n",
			want: []string{"gpubot.yaml:5: did not find expected key"},
		},
		"yaml syntax: a list item in a mapping": {
			yaml: "timezone: UTC\ndefaultChannel: \"#gpu\"\n- teams\n",
			want: []string{"gpubot.yaml:3: did not find expected key"},
		},
		"yaml syntax: an unclosed flow list": {
			yaml: "timezone: UTC\ndefaultChannel: \"#gpu\"\ntemplates: [default, train\npeople: []\n",
			want: []string{"gpubot.yaml:3: did not find expected ',' or ']'"},
		},
		"yaml syntax: an unknown alias": {
			yaml: "timezone: UTC\ndefaultChannel: \"#gpu\"\ntemplates: *names\n",
			want: []string{"gpubot.yaml:3: unknown anchor 'names' referenced"},
		},
		"yaml syntax: a tab for indentation": {
			yaml: "timezone: UTC\ndefaultChannel: \"#gpu\"\nteams:\n\t- name: x\n",
			want: []string{"gpubot.yaml:4: found character that cannot start any token"},
		},
		"two documents": {
			yaml: minimal + "---\nteams: []\n",
			want: []string{`gpubot.yaml:5:1: a config file holds one YAML document; remove the "---" and what follows, or merge it into the first`},
		},
		"root not a mapping": {
			yaml: "- teams\n",
			want: []string{"gpubot.yaml:1:1: must be a mapping, not a list"},
		},
		"unknown key with suggestion": {
			yaml: strings.Replace(minimal, "{name: alice}", "{name: alice, slackId: U0ALICE}", 1),
			want: []string{`gpubot.yaml:3:24: people[0].slackId: unknown key "slackId"; did you mean "slackID"?`},
		},
		"unknown key in snake case": {
			yaml: strings.Replace(minimal, "gpusPerNode", "gpus_per_node", 1),
			want: []string{
				"gpubot.yaml:2:11: flavors[0].gpusPerNode: is required",
				`gpubot.yaml:2:24: flavors[0].gpus_per_node: unknown key "gpus_per_node"; did you mean "gpusPerNode"?`,
			},
		},
		"unknown top-level key": {
			yaml: minimal + "notifications: {at: 9am}\n",
			want: []string{`gpubot.yaml:5:1: notifications: unknown key "notifications" (known keys: timezone, defaultChannel, admission, priorities, defaultPriority, requests, approval, templates, flavors, cohorts, people, teams, simulation, kubernetes, slack, zombies, metrics, digests, report, elastic)`},
		},
		"a near miss of digests": {
			yaml: minimal + "digest: [{team: nlp, schedule: \"0 9 * * *\"}]\n",
			want: []string{`gpubot.yaml:5:1: digest: unknown key "digest"; did you mean "digests"?`},
		},
		"duplicate key": {
			yaml: minimal + "timezone: UTC\ntimezone: Europe/Paris\n",
			want: []string{"gpubot.yaml:6:1: timezone: duplicate key (first at line 5)"},
		},
		"merge key": {
			yaml: minimal + "requests: {<<: {maxDuration: 1d}}\n",
			want: []string{"gpubot.yaml:5:12: requests: merge keys (<<) are not supported; repeat the keys instead"},
		},
		"wrong types": {
			yaml: `priorities: {name: normal}
flavors: [{name: h100, gpusPerNode: eight, nodes: 4}]
people: alice
teams: [{name: 42, weight: heavy, quota: {h100: {nominal: 1.5}}}]
approval: {borrowing: yes}
`,
			want: []string{
				"gpubot.yaml:1:13: priorities: must be a list, not a mapping",
				`gpubot.yaml:2:37: flavors[0].gpusPerNode: must be an integer, not the string "eight"`,
				"gpubot.yaml:2:51: flavors[0].nodes: must be a mapping, not the integer 4",
				`gpubot.yaml:3:9: people: must be a list, not the string "alice"`,
				"gpubot.yaml:4:16: teams[0].name: must be a string, not the integer 42; quote it if you mean the text",
				`gpubot.yaml:4:28: teams[0].weight: must be a number, not the string "heavy"`,
				"gpubot.yaml:4:59: teams[0].quota.h100.nominal: must be an integer, not the number 1.5",
				`gpubot.yaml:5:23: approval.borrowing: must be true or false, not the string "yes"`,
			},
		},
		"missing required keys": {
			yaml: `priorities: [{name: normal}]
flavors: [{name: h100, nodes: {blocks: 2}}]
people: []
teams: [{name: nlp, quota: {h100: {}}}]
`,
			want: []string{
				"gpubot.yaml:1:14: priorities[0].value: is required",
				"gpubot.yaml:2:11: flavors[0].gpusPerNode: is required",
				"gpubot.yaml:2:31: flavors[0].nodes.nodesPerRack: is required",
				"gpubot.yaml:3:9: people: must list at least one person",
				"gpubot.yaml:4:35: teams[0].quota.h100.nominal: is required",
			},
		},
		"empty value of a required key": {
			yaml: strings.Replace(minimal, "quota: {h100: {nominal: 16}}", "quota: ", 1),
			want: []string{"gpubot.yaml:4:39: teams[0].quota: must not be empty"},
		},
		"duplicate names": {
			yaml: `priorities: [{name: normal, value: 1}, {name: Normal, value: 1}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}, {name: h100, gpusPerNode: 4, nodes: {nodesPerRack: 1}}]
people: [{name: alice, slackID: U0A}, {name: alice}, {name: bob, slackID: U0A}]
teams: [{name: nlp, members: [alice, alice], leads: [alice], quota: {h100: {nominal: 16}}}, {name: nlp, quota: {h100: {nominal: 0}}}]
templates: [default, default]
`,
			want: []string{
				`gpubot.yaml:1:47: priorities[1].name: duplicate priority "Normal" (first at line 1)`,
				"gpubot.yaml:1:62: priorities[1].value: duplicate priority value 1 (first at line 1)",
				`gpubot.yaml:2:74: flavors[1].name: duplicate flavor "h100" (first at line 2)`,
				`gpubot.yaml:3:46: people[1].name: duplicate person "alice" (first at line 3)`,
				`gpubot.yaml:3:75: people[2].slackID: duplicate slackID "U0A" (first at line 3)`,
				"gpubot.yaml:4:31: teams[0].members[0]: alice is already in this team (a lead need not be listed as a member)",
				"gpubot.yaml:4:38: teams[0].members[1]: alice is already in this team (a lead need not be listed as a member)",
				`gpubot.yaml:4:100: teams[1].name: duplicate team "nlp" (first at line 4)`,
				`gpubot.yaml:5:22: templates[1]: duplicate template "default" (first at line 5)`,
			},
		},
		"bad names": {
			yaml: `priorities: [{name: Normal, value: 1}]
flavors: [{name: h100_sxm, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: Alice Smith}]
teams: [{name: nlp, cohort: Research, quota: {h100_sxm: {nominal: 16}}}]
`,
			want: []string{
				`gpubot.yaml:1:21: priorities[0].name: "Normal" is not a valid priority name: use ` + labelRule,
				`gpubot.yaml:2:18: flavors[0].name: "h100_sxm" is not a valid flavor name: use ` + labelRule,
				`gpubot.yaml:3:17: people[0].name: "Alice Smith" is not a valid person name: use ` + handleRule,
				`gpubot.yaml:4:29: teams[0].cohort: "Research" is not a valid cohort name: use ` + labelRule,
			},
		},
		"unknown references": {
			yaml: `priorities: [{name: normal, value: 1}, {name: high, value: 2}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: alice}, {name: bob}]
teams: [{name: nlp, leads: [bbo], members: [zed], quota: {h10: {nominal: 16}}}]
defaultPriority: nromal
approval: {priorities: [hihg]}
templates: [default, dev-box]
simulation: {running: [{requester: alice, team: nlpp, gpus: 8, flavor: h100, priority: high, template: devbox, duration: 1h}]}
`,
			want: []string{
				`gpubot.yaml:4:29: teams[0].leads[0]: unknown person "bbo"; did you mean "bob"?`,
				`gpubot.yaml:4:45: teams[0].members[0]: unknown person "zed" (known: alice, bob)`,
				`gpubot.yaml:4:59: teams[0].quota.h10: unknown flavor "h10"; did you mean "h100"?`,
				`gpubot.yaml:5:18: defaultPriority: unknown priority "nromal"; did you mean "normal"?`,
				`gpubot.yaml:6:25: approval.priorities[0]: unknown priority "hihg"; did you mean "high"?`,
				`gpubot.yaml:8:49: simulation.running[0].team: unknown team "nlpp"; did you mean "nlp"?`,
				`gpubot.yaml:8:104: simulation.running[0].template: unknown template "devbox"; did you mean "dev-box"?`,
			},
		},
		"people and channels": {
			yaml: strings.Replace(minimal, "{name: alice}", `{name: alice, slackID: u0alice, email: "alice at example.com"}`, 1) +
				"defaultChannel: gpu\n",
			want: []string{
				`gpubot.yaml:3:33: people[0].slackID: "u0alice" is not a Slack user ID: U or W followed by capital letters and digits, like U0123ABCD`,
				`gpubot.yaml:3:49: people[0].email: "alice at example.com" is not an email address like alice@example.com`,
				`gpubot.yaml:5:17: defaultChannel: "gpu" is not a channel name like "#gpu" or a channel ID like C0123ABCD`,
			},
		},
		"quotas": {
			yaml: `priorities: [{name: normal, value: 1}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: alice}]
teams:
  - {name: nlp, cohort: research, quota: {h100: {nominal: -8, borrowingLimit: -1}}}
  - {name: vision, cohort: research, quota: {h100: {nominal: 8, lendingLimit: 16}}}
  - {name: speech, quota: {h100: {nominal: 8, borrowingLimit: 8}}}
  - {name: h100, quota: {h100: {nominal: 0}}}
`,
			want: []string{
				"gpubot.yaml:5:59: teams[0].quota.h100.nominal: must not be negative",
				"gpubot.yaml:5:79: teams[0].quota.h100.borrowingLimit: must not be negative",
				"gpubot.yaml:6:79: teams[1].quota.h100.lendingLimit: must not be more than nominal (8)",
				"gpubot.yaml:7:63: teams[2].quota.h100.borrowingLimit: needs a cohort to borrow from or lend to; set the team's cohort or remove it",
				`gpubot.yaml:8:12: teams[3].name: team "h100" has the name of a flavor, which would make "/gpu queue h100" ambiguous`,
			},
		},
		"quotas above capacity": {
			yaml: `priorities: [{name: normal, value: 1}]
flavors:
  - name: h100
    gpusPerNode: 8
    nodes: {blocks: 1, racksPerBlock: 2, nodesPerRack: 2}
people: [{name: alice}]
teams:
  - {name: nlp, quota: {h100: {nominal: 24}}}
  - {name: vision, quota: {h100: {nominal: 16}}}
`,
			want: []string{"gpubot.yaml:5:5: flavors[0].nodes: the teams' nominal quotas for h100 add up to 40 GPUs (nlp 24, vision 16), more than the 32 GPUs of its 4 nodes"},
		},
		"layout out of range": {
			yaml: strings.Replace(minimal, "gpusPerNode: 8, nodes: {nodesPerRack: 2}", "gpusPerNode: 80, nodes: {blocks: 0, nodesPerRack: 2}", 1),
			want: []string{
				"gpubot.yaml:2:37: flavors[0].gpusPerNode: must be between 1 and 64",
				"gpubot.yaml:2:57: flavors[0].nodes.blocks: must be at least 1",
			},
		},
		"too many nodes": {
			yaml: strings.Replace(minimal, "nodes: {nodesPerRack: 2}", "nodes: {blocks: 100, racksPerBlock: 10, nodesPerRack: 20}", 1),
			want: []string{"gpubot.yaml:2:47: flavors[0].nodes: 100×10×20 nodes make 20000 in the simulated cluster, more than its limit of 10000"},
		},
		"policies": {
			yaml: minimal + `admission: {mode: FairShare, fairSharing: {halfLife: 0m, entryPenalty: 7x}}
`,
			want: []string{
				`gpubot.yaml:5:19: admission.mode: unknown admission mode "FairShare"; did you mean "FairSharing"?`,
				`gpubot.yaml:5:54: admission.fairSharing.halfLife: invalid duration "0m": must be more than zero`,
				`gpubot.yaml:5:72: admission.fairSharing.entryPenalty: invalid duration "7x": unknown unit 'x' (use m, h or d)`,
			},
		},
		"fair sharing settings without fair sharing": {
			yaml: minimal + "admission: {fairSharing: {halfLife: 1d}}\n",
			want: []string{"gpubot.yaml:5:13: admission.fairSharing: is only used with mode AdmissionFairSharing; set admission.mode or remove it"},
		},
		"preemption": {
			yaml: strings.Replace(minimal, "quota:", "preemption: {withinTeam: Any, reclaimWithinCohort: lowerPriority}, quota:", 1),
			want: []string{
				`gpubot.yaml:4:64: teams[0].preemption.withinTeam: unknown policy "Any" (known: Never, LowerPriority, LowerOrNewerEqualPriority)`,
				`gpubot.yaml:4:90: teams[0].preemption.reclaimWithinCohort: unknown policy "lowerPriority"; did you mean "LowerPriority"?`,
			},
		},
		"requests and time zone": {
			yaml: minimal + "requests: {maxDuration: 1h, endWarning: 2h}\ntimezone: Europe/Berln\ntemplates: []\n",
			want: []string{
				"gpubot.yaml:5:41: requests.endWarning: must be shorter than requests.maxDuration (1h)",
				`gpubot.yaml:6:11: timezone: unknown time zone "Europe/Berln"; use an IANA name like Europe/Berlin or America/New_York`,
				"gpubot.yaml:7:12: templates: must list at least one template; leave the key out for [default]",
			},
		},
		"durations": {
			yaml: minimal + "requests: {maxDuration: 7, endWarning: -5m}\n" +
				"simulation: {running: [{requester: alice, team: nlp, gpus: 8, flavor: h100, duration: 0m, startedAgo: 0x}]}\n",
			want: []string{
				"gpubot.yaml:5:25: requests.maxDuration: must be a duration like 90m, 6h or 2d, not the integer 7",
				`gpubot.yaml:5:40: requests.endWarning: invalid duration "-5m": negative durations are not allowed`,
				`gpubot.yaml:6:87: simulation.running[0].duration: invalid duration "0m": must be more than zero`,
				`gpubot.yaml:6:103: simulation.running[0].startedAgo: invalid duration "0x": unknown unit 'x' (use m, h or d)`,
			},
		},
		"seeds": {
			yaml: `priorities: [{name: normal, value: 1}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {racksPerBlock: 2, nodesPerRack: 2}}, {name: a100, gpusPerNode: 4, nodes: {nodesPerRack: 1}}]
people: [{name: alice}, {name: bob}, {name: carol}]
teams:
  - {name: nlp, cohort: c, members: [alice], quota: {h100: {nominal: 8, borrowingLimit: 8}}}
  - {name: vision, members: [bob], quota: {h100: {nominal: 8}}}
  - {name: speech, cohort: c, members: [carol], quota: {h100: {nominal: 16}}}
requests: {maxDuration: 1d}
simulation:
  running:
    - {requester: bob, team: nlp, gpus: 8, flavor: h100, duration: 1h}
    - {requester: alice, team: nlp, gpus: 8, flavor: a100, duration: 1h}
    - {requester: alice, team: nlp, gpus: 9, flavor: h100, duration: 1h}
    - {requester: alice, team: nlp, gpus: 24, flavor: h100, duration: 1h, topology: rack}
    - {requester: alice, team: nlp, gpus: 8, flavor: h100, duration: 1h, topology: blok}
    - {requester: alice, team: nlp, gpus: 8, flavor: h100, duration: 1h, startedAgo: 1h}
    - {requester: alice, team: nlp, gpus: 8, flavor: h100, duration: 2d}
    - {requester: alice, team: nlp, gpus: 0, flavor: h100, duration: 1h}
    - {requester: alice, team: nlp, gpus: 16, flavor: h100, duration: 1h}
    - {requester: alice, team: nlp, gpus: 8, flavor: h100, duration: 1h}
    - {requester: bob, team: vision, gpus: 8, flavor: h100, duration: 1h}
    - {requester: bob, team: vision, gpus: 8, flavor: h100, duration: 1h}
    - {requester: carol, team: speech, gpus: 16, flavor: h100, duration: 1h}
`,
			want: []string{
				"gpubot.yaml:11:19: simulation.running[0].requester: bob is not a lead or member of team nlp",
				"gpubot.yaml:12:54: simulation.running[1].flavor: team nlp has no quota for a100 (its flavors: h100)",
				"gpubot.yaml:13:43: simulation.running[2].gpus: on h100 nodes: 9 GPUs cannot be split into 2 equal pods of at most 8 GPUs (one pod per node); the nearest sizes that can are 8 and 10",
				"gpubot.yaml:14:43: simulation.running[3].gpus: 24 GPUs do not fit in one h100 rack, which has 16",
				`gpubot.yaml:15:84: simulation.running[4].topology: unknown topology level "blok"; did you mean "block"?`,
				"gpubot.yaml:16:70: simulation.running[5].duration: must be longer than startedAgo (1h): the work would have ended already",
				"gpubot.yaml:17:70: simulation.running[6].duration: is longer than requests.maxDuration allows",
				"gpubot.yaml:18:43: simulation.running[7].gpus: must be at least 1",
				"gpubot.yaml:20:43: simulation.running[9].gpus: with the seeds before it, team nlp would use 24 h100 GPUs, more than its nominal quota of 8 plus its borrowingLimit of 8",
				"gpubot.yaml:22:44: simulation.running[11].gpus: with the seeds before it, team vision would use 16 h100 GPUs, more than its nominal quota of 8 (it has no cohort to borrow from)",
				"gpubot.yaml:23:46: simulation.running[12].gpus: with the seeds before it, 40 h100 GPUs would run, more than the 32 there are",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("gpubot.yaml", []byte(tc.yaml))
			if c != nil {
				t.Errorf("Parse returned a Config along with errors")
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse() = %v, want Errors", err)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAliases(t *testing.T) {
	tests := map[string]struct {
		yaml string
		want string // "" for no error
	}{
		"shared preemption": {
			yaml: `priorities: [{name: normal, value: 1}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: alice}]
teams:
  - {name: nlp, quota: {h100: {nominal: 8}}, preemption: &p {withinTeam: LowerPriority}}
  - {name: vision, quota: {h100: {nominal: 8}}, preemption: *p}
`,
		},
		"alias bomb": {
			yaml: `a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
`,
			want: "gpubot.yaml:5:4: the document expands to more than 100000 values; use fewer aliases",
		},
		"alias inside its anchor": {
			yaml: "teams: &t [*t]\n",
			want: "gpubot.yaml:1:8: an alias refers to a value that contains it",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("gpubot.yaml", []byte(tc.yaml))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("Parse() error = %q, want %q", got, tc.want)
			}
			if err == nil && c.Cluster().Queues[1].Preemption.WithinClusterQueue != "LowerPriority" {
				t.Errorf("alias not followed: %+v", c.Cluster().Queues[1])
			}
		})
	}
}

// FuzzParse checks that no input makes Parse panic, and that it returns
// either a Config or errors.
func FuzzParse(f *testing.F) {
	f.Add(deploy.ExampleConfig)
	f.Add([]byte(minimal))
	f.Add([]byte(""))
	f.Add([]byte("teams: [{name: nlp, quota: {h100: &a {nominal: *a}}}]"))
	f.Add([]byte("simulation: {running: [{requester: alice, team: nlp, gpus: 8, flavor: h100, duration: 0m}]}\n" + minimal))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse() = %v, %v: want exactly one of them", c, err)
		}
	})
}
