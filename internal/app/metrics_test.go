package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/internal/promenv"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

type fakeZombies []records.Zombie

func (z fakeZombies) Zombies(context.Context, time.Time, time.Time) ([]records.Zombie, error) {
	return z, nil
}

type fakeSlack struct {
	up      bool
	pending int
	limited uint64
}

func (s fakeSlack) Ready() error {
	if !s.up {
		return errors.New("down")
	}
	return nil
}
func (s fakeSlack) Pending() int        { return s.pending }
func (s fakeSlack) RateLimited() uint64 { return s.limited }

// metricsServer is gpubot's /metrics over the bundled example on the
// simulated cluster, after alice asked for 8 H100s (held for approval:
// nlp would borrow), bob for 8 A100s (admitted at once) and dave for 8
// H100s (admitted at once by preempting alice's 4-GPU r5, which vision
// reclaims from nlp: r5 is queued again).
func metricsServer(t *testing.T) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	sim, _, err := simcluster.New(ctx, cfg.Cluster(), db, clk)
	if err != nil {
		t.Fatal(err)
	}
	tel := newTelemetry(db)
	svc, err := commands.NewService(ctx, cfg.Settings(), commands.Deps{
		Cluster: sim, Requests: tel.watchRequests(db), IDs: db, Audit: tel.audit(db), Usage: db, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Seed(ctx, cfg.Seeds()); err != nil {
		t.Fatal(err)
	}
	tel.watchCluster(svc, fakeZombies{
		{ID: "z1", Team: "nlp", GPUs: 8, Kind: records.ZombieIdle},
		{ID: "z2", Team: "vision", GPUs: 4, Kind: records.ZombieIdle},
		{ID: "z3", Team: "vision", GPUs: 16, Kind: records.ZombiePastEnd, Outcome: records.ZombieKept},
	}, clk.Now)
	tel.watchSlack(fakeSlack{up: true, pending: 3, limited: 7})
	tel.observeAPI("GET", 200, 20*time.Millisecond)
	tel.slack.WithLabelValues("chat.postMessage").Observe(0.05)
	clk.Step(10 * time.Minute)
	svc.Handle(ctx, commands.Input{User: "U0ALICE", Text: "request 8xh100 for 4h"})
	svc.Handle(ctx, commands.Input{User: "U0BOB", Text: "request 8xa100 for 2h"})
	svc.Handle(ctx, commands.Input{User: "U0DAVE", Text: "request 8xh100 for 4h"})
	svc.Settle(ctx) // as the refresher does: the preempted seed gets its new estimate
	srv := httptest.NewServer(tel.handler())
	t.Cleanup(srv.Close)
	return srv
}

func scrape(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestMetricsPassPromtoolAndSayWhatHappened(t *testing.T) {
	body := scrape(t, metricsServer(t))
	for _, want := range []string{
		`gpubot_gpus{flavor="h100",state="used"} 121`,
		`gpubot_gpus{flavor="a100",state="used"} 40`,
		`gpubot_requests_pending{state="awaiting-approval",team="nlp"} 1`,
		`gpubot_requests_pending{state="queued",team="nlp"} 1`,
		`gpubot_requests{state="queued"} 1`,
		`gpubot_request_wait_seconds_count{priority="normal",team="nlp"} 1`,
		`gpubot_request_wait_seconds_bucket{priority="normal",team="nlp",le="60"} 1`,
		`gpubot_request_wait_seconds_count{priority="normal",team="vision"} 1`,
		`gpubot_estimate_coverage_ratio 1`,
		`gpubot_estimate_error_seconds_count 0`,
		`gpubot_estimate_changes_total 4`,                       // the seed and three requests
		`gpubot_estimate_refreshes_total{result="simulated"} 1`, // one Settle for all four
		`gpubot_estimate_refreshes_total{result="reused"} 0`,
		`gpubot_estimate_refreshes_total{result="unchanged"} 0`,
		`gpubot_estimate_from_checkpoints_total 0`, // no computation came before the requests
		`gpubot_zombies{kind="idle"} 2`,
		`gpubot_zombies{kind="past-end"} 0`,
		`gpubot_zombie_gpus{kind="idle"} 12`,
		`gpubot_slack_connected 1`,
		`gpubot_slack_outbound_queue_calls 3`,
		`gpubot_slack_rate_limited_total 7`,
		`gpubot_decisions_total{action="request",outcome="ok"} 3`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// used + free + fragmented is every GPU of the flavor.
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	sum := map[string]float64{}
	for _, m := range fams["gpubot_gpus"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "flavor" {
				sum[l.GetValue()] += m.GetGauge().GetValue()
			}
		}
	}
	if sum["h100"] != 128 || sum["a100"] != 64 {
		t.Errorf("gpubot_gpus sums to %v, want h100 128 and a100 64", sum)
	}
	if frag := gauge(fams, "gpubot_gpus", "h100", "fragmented"); !(frag > 0 && frag <= 7) {
		t.Errorf("fragmented h100 GPUs = %v, want some of the 7 scattered free ones", frag)
	}
	cmd := exec.Command(promenv.Promtool(t), "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func gauge(fams map[string]*dto.MetricFamily, name, flavor, state string) float64 {
	for _, m := range fams[name].GetMetric() {
		var f, s string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "flavor":
				f = l.GetValue()
			case "state":
				s = l.GetValue()
			}
		}
		if f == flavor && s == state {
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// TestDashboardQueriesWork: every query of deploy/grafana/gpubot.json is
// valid PromQL to a real Prometheus scraping gpubot, and every gpubot
// metric it names has samples there.
func TestDashboardQueriesWork(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "gpubot.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var exprs []string
	names := map[string]bool{}
	metricName := regexp.MustCompile(`gpubot_[a-z_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, strings.ReplaceAll(tg.Expr, "$__rate_interval", "1m"))
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				names[n] = true
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("the dashboard names only %d gpubot metrics", len(names))
	}
	srv := metricsServer(t)
	prom := promenv.Start(t, promenv.Options{Targets: []string{strings.TrimPrefix(srv.URL, "http://")}})
	query := func(q string) (string, []json.RawMessage) {
		resp, err := http.Get(prom.URL + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Status, Error string
			Data          struct{ Result []json.RawMessage }
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r.Status + r.Error, r.Data.Result
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, res := query("up"); len(res) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Prometheus did not scrape gpubot in 30 s")
		}
		time.Sleep(200 * time.Millisecond) // Prometheus scrapes on its own wall clock
	}
	sorted := slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range sorted {
		series := strings.TrimSuffix(n, "_bucket")
		if status, res := query("count({__name__=~\"" + series + "(_bucket|_sum|_count)?\"})"); status != "success" || len(res) == 0 {
			t.Errorf("the dashboard queries %s, which gpubot does not serve (%s)", n, status)
		}
	}
	for _, e := range exprs {
		if status, _ := query(e); status != "success" {
			t.Errorf("dashboard query %q: %s", e, status)
		}
	}
}
