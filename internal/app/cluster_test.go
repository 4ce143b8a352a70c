package app

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/deploy"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

func TestRunSaysWhenTheClusterIsUnreachable(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	// A port nothing listens on: connection refused at once.
	err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = Run(ctx, Options{DataDir: dir, Stdin: strings.NewReader(""), Stdout: io.Discard, LogFile: "-", Stderr: io.Discard,
		Cluster: ClusterOptions{Kubeconfig: kc}})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Kubernetes API server") {
		t.Fatalf("Run = %v, want an error saying the API server cannot be reached", err)
	}
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.PutRequest(ctx, records.Request{ID: "r1", State: records.StateQueued}); err != nil {
		t.Fatal(err)
	}
	tel := newTelemetry(db)
	ready := false
	tel.ready(func() error {
		if !ready {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
	if _, err := tel.audit(db).AppendAudit(ctx, records.AuditEntry{Action: "approve", Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	tel.observeAPI("GET", 200, 20*time.Millisecond)
	srv := httptest.NewServer(tel.handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz %d before ready, want 503", code)
	}
	ready = true
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz %d when ready", code)
	}
	_, body := get("/metrics")
	for _, want := range []string{`gpubot_requests{state="queued"} 1`, `gpubot_decisions_total{action="approve",outcome="ok"} 1`,
		`gpubot_kubernetes_api_request_duration_seconds_count{code="200",method="GET"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestBridgeConfigPodsReadyTimeout: kubernetes.podsReadyTimeout reaches
// the bridge; unset, the bridge's default applies.
func TestBridgeConfigPodsReadyTimeout(t *testing.T) {
	for extra, want := range map[string]time.Duration{
		"":                                       0,
		"kubernetes:\n  podsReadyTimeout: 25m\n": 25 * time.Minute,
	} {
		cfg, err := config.Parse("gpubot.yaml", append(append([]byte{}, deploy.ExampleConfig...), "\n"+extra...))
		if err != nil {
			t.Fatal(err)
		}
		if got := bridgeConfig(cfg).PodsReadyTimeout; got != want {
			t.Errorf("with %q: PodsReadyTimeout %s, want %s", extra, got, want)
		}
	}
}
