package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// withTeams is minimal with a second team that has a channel, in Berlin.
const withTeams = `timezone: Europe/Berlin
priorities: [{name: normal, value: 1}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: alice}]
teams:
  - {name: nlp, members: [alice], quota: {h100: {nominal: 8}}}
  - {name: vision, channel: "#gpu-vision", quota: {h100: {nominal: 8}}}
`

func TestDigestsAndReport(t *testing.T) {
	c, err := Parse("gpubot.yaml", []byte(withTeams+`digests:
  - {team: nlp, schedule: "0 9 * * 1-5"}
  - {team: vision, schedule: "30 8 * * *", timezone: America/New_York}
  - {team: vision, channel: "#vision-leads", schedule: "@daily"}
  - {channel: "#gpu-admins", schedule: "CRON_TZ=UTC 0 7 * * *"}
report:
  channel: "#gpu-admins"
  schedule: "0 9 * * 1"
`))
	if err != nil {
		t.Fatal(err)
	}
	type posting struct{ Team, Channel, Next, Zone string }
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) // a Tuesday
	var got []posting
	for _, p := range c.Digests() {
		got = append(got, posting{p.Team, p.Channel, p.Schedule.Next(from).UTC().Format(time.RFC3339), p.Location.String()})
	}
	want := []posting{
		{"nlp", "#gpu", "2026-12-01T08:00:00Z", "Europe/Berlin"}, // 09:00 Berlin; nlp has no channel: defaultChannel
		{"vision", "#gpu-vision", "2026-12-01T13:30:00Z", "America/New_York"},
		{"vision", "#vision-leads", "2026-12-01T23:00:00Z", "Europe/Berlin"},
		// CRON_TZ sets the schedule's zone; its days stay the config's.
		{"", "#gpu-admins", "2026-12-01T07:00:00Z", "Europe/Berlin"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Digests (-want +got):\n%s", d)
	}
	rep := c.Report()
	if rep.Channel != "#gpu-admins" || rep.Schedule.Next(from).UTC().Format(time.RFC3339) != "2026-12-07T08:00:00Z" || rep.Location.String() != "Europe/Berlin" {
		t.Errorf("Report = %s in %s (%s), want Mondays 09:00 Berlin in #gpu-admins", rep.Schedule, rep.Channel, rep.Location)
	}

	c, err = Parse("gpubot.yaml", []byte(withTeams+"report: {schedule: \"0 9 * * 1\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ch := c.Report().Channel; ch != "#gpu" {
		t.Errorf("report channel = %q, want defaultChannel", ch)
	}
	c, err = Parse("gpubot.yaml", []byte(withTeams))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Report().Schedule.IsZero() || len(c.Digests()) != 0 {
		t.Error("digests or a report without config")
	}
}

func TestDigestsValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml string
		want []string
	}{
		"bad spec": {
			yaml: "digests:\n  - {team: nlp, schedule: \"0 25 * * *\"}\n",
			want: []string{`gpubot.yaml:9:27: digests[0].schedule: hour field "25": 25 is outside 0–23`},
		},
		"zone without spec": {
			yaml: "digests:\n  - {team: nlp, schedule: \"CRON_TZ=UTC\"}\n",
			want: []string{`gpubot.yaml:9:27: digests[0].schedule: "CRON_TZ=UTC" has a time zone but no schedule after it`},
		},
		"never runs": {
			yaml: "report: {schedule: \"0 9 30 2 *\"}\n",
			want: []string{`gpubot.yaml:8:20: report.schedule: "0 9 30 2 *" never runs; use a cron spec`},
		},
		"missing schedule, unknown team, nothing to post to": {
			yaml: "digests:\n  - {team: nlpp}\n  - {schedule: \"@daily\"}\n",
			want: []string{
				`gpubot.yaml:9:5: digests[0].schedule: is required`,
				`gpubot.yaml:9:12: digests[0].team: unknown team "nlpp"; did you mean "nlp"?`,
				`gpubot.yaml:10:5: digests[1]: needs a team (its digest goes to the team's channel) or a channel (the cluster-wide digest goes there), or both`,
			},
		},
		"duplicate": {
			yaml: "digests:\n  - {team: vision, schedule: \"@daily\"}\n  - {team: vision, channel: \"#gpu-vision\", schedule: \"0 9 * * *\"}\n",
			want: []string{`gpubot.yaml:10:5: digests[1]: the same digest (vision's in #gpu-vision) is already listed at line 9`},
		},
		"bad zone and channel, typo": {
			yaml: "digests:\n  - {channel: gpu-admins, schedule: \"@daily\", timezone: Berlin}\nreport: {shedule: \"@weekly\"}\n",
			want: []string{
				`gpubot.yaml:9:15: digests[0].channel: "gpu-admins" is not a channel name like "#gpu" or a channel ID like C0123ABCD`,
				`gpubot.yaml:9:57: digests[0].timezone: unknown time zone "Berlin"`,
				`gpubot.yaml:10:9: report.schedule: is required`,
				`gpubot.yaml:10:10: report.shedule: unknown key "shedule"; did you mean "schedule"?`,
			},
		},
		"not a list": {
			yaml: "digests: {team: nlp}\n",
			want: []string{`gpubot.yaml:8:10: digests: must be a list, not a mapping`},
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("gpubot.yaml", []byte(withTeams+tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d = %q\nwant prefix %q", i, lines[i], w)
				}
			}
		})
	}
}
