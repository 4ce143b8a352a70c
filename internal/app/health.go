package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// telemetry is gpubot's /healthz, /readyz and Prometheus /metrics. It is
// the only importer of the Prometheus client.
type telemetry struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	api       *prometheus.HistogramVec
	// Slack is for the Slack adapter's API calls (method → seconds).
	slack *prometheus.HistogramVec
	// wait is request → admission, observed by watchRequests.
	wait *prometheus.HistogramVec

	mu     sync.Mutex
	checks []func() error
	// details add lines to /readyz's answer, ready or not: what an
	// operator should know (see detail).
	details []func(context.Context) []string
}

func newTelemetry(requests commands.RequestStore) *telemetry {
	t := &telemetry{
		reg: prometheus.NewRegistry(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpubot_decisions_total",
			Help: "Decisions and actions written to the audit log, by action and outcome."}, []string{"action", "outcome"}),
		api: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gpubot_kubernetes_api_request_duration_seconds",
			Help: "Latency of Kubernetes API calls, by method and status code.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"method", "code"}),
		slack: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gpubot_slack_api_request_duration_seconds",
			Help: "Latency of Slack API calls, by method.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}, []string{"method"}),
	}
	t.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gpubot_request_wait_seconds",
		Help:    "Time from a request to its admission (approval and requeues included), observed at each admission, by team and priority.",
		Buckets: []float64{60, 300, 900, 1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 16 * 3600, 24 * 3600, 2 * 86400, 4 * 86400, 7 * 86400}},
		[]string{"team", "priority"})
	t.reg.MustRegister(t.decisions, t.api, t.slack, t.wait, &requestCollector{requests: requests},
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return t
}

func (t *telemetry) observeAPI(method string, code int, d time.Duration) {
	t.api.WithLabelValues(method, strconv.Itoa(code)).Observe(d.Seconds())
}

// detail adds lines to /readyz's answer (GPU nodes no flavor selects,
// Kueue features gpubot does not model); they do not make it fail.
func (t *telemetry) detail(d func(context.Context) []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.details = append(t.details, d)
}

// ready adds a readiness check (cluster caches synced, Slack connected…).
func (t *telemetry) ready(check func() error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.checks = append(t.checks, check)
}

func (t *telemetry) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		t.mu.Lock()
		checks := slices.Clone(t.checks)
		details := slices.Clone(t.details)
		t.mu.Unlock()
		var errs []error
		for _, c := range checks {
			if err := c(); err != nil {
				errs = append(errs, err)
			}
		}
		var lines []string
		for _, d := range details {
			lines = append(lines, d(r.Context())...)
		}
		body := "ok"
		if err := errors.Join(errs...); err != nil {
			body = err.Error()
		}
		for _, l := range lines {
			body += "\n" + l
		}
		if len(errs) > 0 {
			http.Error(w, body, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, body)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{}))
	return mux
}

// serve listens on addr; stop shuts the server down.
func (t *telemetry) serve(addr string, log *slog.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for health and metrics on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: t.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health and metrics server", "err", err)
		}
	}()
	log.Info("serving /healthz, /readyz and /metrics", "addr", l.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// audit counts decisions on their way to the audit log.
func (t *telemetry) audit(a commands.AuditLog) commands.AuditLog {
	return countingAudit{a, t.decisions}
}

type countingAudit struct {
	commands.AuditLog
	c *prometheus.CounterVec
}

func (a countingAudit) AppendAudit(ctx context.Context, e records.AuditEntry) (uint64, error) {
	a.c.WithLabelValues(e.Action, e.Outcome).Inc()
	return a.AuditLog.AppendAudit(ctx, e)
}
