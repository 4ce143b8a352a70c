package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
)

func TestZombiesSection(t *testing.T) {
	cases := map[string]struct {
		yaml string
		want Zombies
		errs []string // each with its line and column
	}{
		"absent": {want: Zombies{Schedule: mustSchedule(t, DefaultZombieSchedule)}},
		"empty":  {yaml: "zombies:\n", want: Zombies{Schedule: mustSchedule(t, DefaultZombieSchedule)}},
		"all keys": {
			yaml: "zombies:\n  schedule: \"*/5 8-18 * * MON-FRI\"\n  idleThreshold: 2.5\n  idleWindow: 45m\n  leadsGrace: 2h\n  releaseGrace: 1d\n  keepFor: 3d\n  action: release\n  scope: all\nkubernetes: {podsReadyTimeout: 20m}\n",
			want: Zombies{Schedule: mustSchedule(t, "*/5 8-18 * * MON-FRI"), Policy: commands.ZombiePolicy{
				PodsReadyTimeout: 20 * time.Minute, IdleThreshold: 2.5, IdleWindow: 45 * time.Minute, LeadsGrace: 2 * time.Hour,
				ReleaseGrace: 24 * time.Hour, KeepFor: 72 * time.Hour, Release: true, All: true}},
		},
		"descriptors": {
			yaml: "zombies: {schedule: \"CRON_TZ=Europe/Berlin @every 15m\", action: notify, scope: gpubot}\n",
			want: Zombies{Schedule: mustSchedule(t, "CRON_TZ=Europe/Berlin @every 15m")},
		},
		"bad values": {
			yaml: "zombies:\n  idleThreshold: 120\n  idleWindow: 30\n  action: kill\n  scope: everything\n  leadsGrace: 0m\n",
			errs: []string{
				"gpubot.yaml:6:18: zombies.idleThreshold: is a percentage of GPU utilization: at most 100",
				"gpubot.yaml:7:15: zombies.idleWindow: must be a duration like 90m, 6h or 2d",
				`gpubot.yaml:8:11: zombies.action: unknown action "kill"`,
				`gpubot.yaml:9:10: zombies.scope: unknown scope "everything"`,
				"gpubot.yaml:10:15: zombies.leadsGrace:",
			},
		},
		"typo": {
			yaml: "zombies:\n  idleTreshold: 5\n",
			errs: []string{`gpubot.yaml:6:3: zombies.idleTreshold: unknown key "idleTreshold"; did you mean "idleThreshold"?`},
		},
		"six fields":   {yaml: "zombies: {schedule: \"0 */10 * * * *\"}\n", errs: []string{"gpubot.yaml:5:21: zombies.schedule: has 6 fields; a cron spec has 5"}},
		"bad hour":     {yaml: "zombies: {schedule: \"0 25 * * *\"}\n", errs: []string{`zombies.schedule: hour field "25": 25 is outside 0–23`}},
		"bad step":     {yaml: "zombies: {schedule: \"*/0 * * * *\"}\n", errs: []string{`zombies.schedule: minute field "*/0": the step "0" must be a whole number of at least 1`}},
		"backwards":    {yaml: "zombies: {schedule: \"0 9 * * FRI-MON\"}\n", errs: []string{`zombies.schedule: day-of-week field "FRI-MON": the range FRI-MON runs backwards`}},
		"bad name":     {yaml: "zombies: {schedule: \"0 9 * JANUARY *\"}\n", errs: []string{`zombies.schedule: month field "JANUARY": "JANUARY" is not a number from 1 to 12 or a name like jan`}},
		"bad every":    {yaml: "zombies: {schedule: \"@every soon\"}\n", errs: []string{`zombies.schedule: @every needs a positive duration like 10m or 1h30m, not "soon"`}},
		"bad zone":     {yaml: "zombies: {schedule: \"TZ=Mars/Olympus 0 9 * * *\"}\n", errs: []string{`zombies.schedule: unknown time zone "Mars/Olympus"`}},
		"bad descr":    {yaml: "zombies: {schedule: \"@fortnightly\"}\n", errs: []string{`zombies.schedule: unknown descriptor "@fortnightly"`}},
		"not a string": {yaml: "zombies: {schedule: 10}\n", errs: []string{"zombies.schedule: must be a string, not the integer 10"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("gpubot.yaml", []byte(minimal+tc.yaml))
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("no error; want %q", tc.errs)
				}
				for _, e := range tc.errs {
					if !strings.Contains(err.Error(), e) {
						t.Errorf("error lacks %q:\n%v", e, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, c.Zombies(), cmp.Comparer(func(a, b digest.Schedule) bool { return a.String() == b.String() })); d != "" {
				t.Errorf("Zombies() (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.want.Policy, c.Settings().Zombies); d != "" {
				t.Errorf("Settings().Zombies (-want +got):\n%s", d)
			}
		})
	}
}

func mustSchedule(t *testing.T, spec string) digest.Schedule {
	t.Helper()
	s, err := digest.ParseSchedule(spec, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkSchedule, which explains mistakes, agrees with the scheduler's own
// parser (digest.ParseSchedule, robfig/cron's standard one) on specs it
// takes and on a few it refuses.
func TestCheckSchedule(t *testing.T) {
	for _, ok := range []string{"*/10 * * * *", "0 9 * * 1-5", "0 9 * * mon-fri", "15,45 */2 1-7 JAN,JUL ?", "0 0 1/2 * *",
		"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually", "@every 90s", "TZ=UTC 0 9 * * *", " 0 9 * * * "} {
		if msg := checkSchedule(ok); msg != "" {
			t.Errorf("checkSchedule(%q) = %q, want ok", ok, msg)
		}
		if _, err := digest.ParseSchedule(ok, time.UTC); err != nil {
			t.Errorf("digest.ParseSchedule(%q) = %v, but checkSchedule takes it", ok, err)
		}
	}
	for _, bad := range []string{"", "* * * *", "60 * * * *", "* * 0 * *", "* * * 13 *", "* * * * 7", "a-b * * * *", "1-2-3 * * * *", "*/x * * * *", "@every -5m", "@every", "CRON_TZ= * * * * *"} {
		if msg := checkSchedule(bad); msg == "" {
			t.Errorf("checkSchedule(%q) accepted it", bad)
		}
		// checkSchedule is stricter than robfig/cron in two places: a
		// negative @every and an empty CRON_TZ= are refused, not read as
		// "every minute" and UTC.
		if _, err := digest.ParseSchedule(bad, time.UTC); err == nil && bad != "@every -5m" && bad != "CRON_TZ= * * * * *" {
			t.Errorf("digest.ParseSchedule(%q) takes it, but checkSchedule refuses it", bad)
		}
	}
}

func TestMetricsSection(t *testing.T) {
	cases := map[string]struct {
		yaml string
		want Metrics
		errs []string
	}{
		"absent":   {want: Metrics{PodLabel: "pod", NamespaceLabel: "namespace"}},
		"url only": {yaml: "metrics: {prometheusURL: \"http://prometheus.monitoring:9090\"}\n", want: Metrics{PrometheusURL: "http://prometheus.monitoring:9090", PodLabel: "pod", NamespaceLabel: "namespace"}},
		"labels": {
			yaml: "metrics:\n  prometheusURL: https://prom.example.com/prometheus/\n  podLabel: exported_pod\n  namespaceLabel: exported_namespace\n",
			want: Metrics{PrometheusURL: "https://prom.example.com/prometheus/", PodLabel: "exported_pod", NamespaceLabel: "exported_namespace"},
		},
		"bad url":   {yaml: "metrics: {prometheusURL: prometheus:9090}\n", errs: []string{`gpubot.yaml:5:26: metrics.prometheusURL: "prometheus:9090" is not a Prometheus server's URL`}},
		"query":     {yaml: "metrics: {prometheusURL: \"http://p:9090/?x=1\"}\n", errs: []string{"metrics.prometheusURL:"}},
		"bad label": {yaml: "metrics: {podLabel: pod-name}\n", errs: []string{`metrics.podLabel: "pod-name" is not a Prometheus label name`}},
		"typo":      {yaml: "metrics: {prometheusUrl: \"http://p:9090\"}\n", errs: []string{`metrics.prometheusUrl: unknown key "prometheusUrl"; did you mean "prometheusURL"?`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("gpubot.yaml", []byte(minimal+tc.yaml))
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("no error; want %q", tc.errs)
				}
				for _, e := range tc.errs {
					if !strings.Contains(err.Error(), e) {
						t.Errorf("error lacks %q:\n%v", e, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, c.Metrics()); d != "" {
				t.Errorf("Metrics() (-want +got):\n%s", d)
			}
		})
	}
}

// Seeds say how they use their GPUs; the uses line up with Seeds.
func TestSeedUses(t *testing.T) {
	run := "simulation:\n  running:\n" +
		"    - {requester: alice, team: nlp, gpus: 8, flavor: h100, duration: 4h}\n" +
		"    - {requester: alice, team: nlp, gpus: 4, flavor: h100, duration: 4h, gpuUtilization: 0}\n" +
		"    - {requester: alice, team: nlp, gpus: 2, flavor: h100, duration: 4h, gpuUtilization: 3.5, podsReady: true}\n" +
		"    - {requester: alice, team: nlp, gpus: 2, flavor: h100, duration: 4h, podsReady: false}\n"
	c, err := Parse("gpubot.yaml", []byte(minimal+run))
	if err != nil {
		t.Fatal(err)
	}
	zero, three := 0.0, 3.5
	want := []SeedUse{{}, {GPUUtilization: &zero}, {GPUUtilization: &three}, {PodsNeverReady: true}}
	if d := cmp.Diff(want, c.SeedUses()); d != "" {
		t.Errorf("SeedUses (-want +got):\n%s", d)
	}
	if len(c.Seeds()) != len(c.SeedUses()) {
		t.Errorf("%d seeds, %d uses", len(c.Seeds()), len(c.SeedUses()))
	}
	_, err = Parse("gpubot.yaml", []byte(minimal+"simulation:\n  running:\n    - {requester: alice, team: nlp, gpus: 8, flavor: h100, duration: 4h, gpuUtilization: 101, podsReady: maybe}\n"))
	for _, e := range []string{"simulation.running[0].gpuUtilization: is a percentage: a number from 0 to 100", "simulation.running[0].podsReady: must be true or false"} {
		if err == nil || !strings.Contains(err.Error(), e) {
			t.Errorf("error lacks %q: %v", e, err)
		}
	}
	if _, err := Parse("gpubot.yaml", []byte(minimal+"simulation:\n  running:\n    - {requester: alice, team: nlp, gpus: 8, flavor: h100, duration: 4h, gpuUtilization: -1}\n")); err == nil {
		t.Error("a negative utilization was accepted")
	}
}

// The bundled example has one idle seed and one whose pods never become
// ready, so that the simulated cluster shows the sweep.
func TestDefaultSeedUses(t *testing.T) {
	c := mustDefault(t)
	var idle, stuck []string
	for i, u := range c.SeedUses() {
		s := c.Seeds()[i]
		if u.GPUUtilization != nil && *u.GPUUtilization < c.Zombies().Policy.IdleThreshold {
			idle = append(idle, s.Requester+" "+s.Spec.Reason)
		}
		if u.PodsNeverReady {
			stuck = append(stuck, s.Requester+" "+s.Spec.Reason)
		}
	}
	if d := cmp.Diff([]string{"grace ASR fine-tuning"}, idle); d != "" {
		t.Errorf("idle seeds (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"frank TTS vocoder training"}, stuck); d != "" {
		t.Errorf("seeds with pods never ready (-want +got):\n%s", d)
	}
	if z := c.Zombies(); z.Schedule.String() != DefaultZombieSchedule || !z.Policy.Release {
		t.Errorf("example zombies section %+v", z)
	}
}
