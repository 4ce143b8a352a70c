// Package promenv gives tests a real Prometheus: the prometheus and
// promtool binaries of Debian's package, fetched and cached once by
// hack/prometheus.sh, and a server started on a loopback port that scrapes
// the targets a test names. gpubot itself does not import it.
//
// # Basics
//
//	bin := promenv.Bin(t)                       // skips when GPUBOT_SKIP_PROMETHEUS=1 or -short
//	srv := promenv.Start(t, promenv.Options{Targets: []string{exporter.Listener.Addr().String()}, ScrapeInterval: time.Second})
//	// query srv.URL with github.com/prometheus/client_golang/api
//
// # Caveats
//
// The server keeps its data in a temporary directory and is killed in
// t.Cleanup. Scrapes happen on Prometheus's own wall clock, so a test waits
// for samples to arrive (poll the query API with a deadline) instead of
// stepping a fake clock; samples can carry explicit timestamps in the
// exposition format to place them in the past.
package promenv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// SkipEnv is the environment variable that, set to 1, skips the tests
// that need Prometheus.
const SkipEnv = "GPUBOT_SKIP_PROMETHEUS"

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// Bin returns the directory holding prometheus and promtool, fetching them
// on first use. It skips the test with GPUBOT_SKIP_PROMETHEUS=1 or -short,
// and fails it if the binaries cannot be had.
func Bin(t testing.TB) string {
	t.Helper()
	if os.Getenv(SkipEnv) == "1" || testing.Short() {
		t.Skipf("needs Prometheus (skipped: %s=1 or -short)", SkipEnv)
	}
	binOnce.Do(func() { binDir, binErr = fetch() })
	if binErr != nil {
		t.Fatalf("getting the Prometheus binaries: %v", binErr)
	}
	return binDir
}

// Promtool returns the path of promtool (see Bin).
func Promtool(t testing.TB) string {
	t.Helper()
	return filepath.Join(Bin(t), "promtool")
}

func fetch() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "prometheus.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/prometheus.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "prometheus.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find hack/prometheus.sh above the working directory")
		}
		dir = parent
	}
}

// Options say what the server scrapes.
type Options struct {
	// Targets are host:port addresses scraped at /metrics.
	Targets []string
	// ScrapeInterval defaults to 1 s.
	ScrapeInterval time.Duration
	// ExtraArgs are appended to prometheus's command line.
	ExtraArgs []string
}

// Server is a running Prometheus.
type Server struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:40123.
	URL string
	// Dir holds the configuration, the data and prometheus.log.
	Dir string
}

// Start starts Prometheus scraping o.Targets and waits until it is ready.
// It is stopped when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Bin(t)
	if o.ScrapeInterval <= 0 {
		o.ScrapeInterval = time.Second
	}
	dir := t.TempDir()
	var targets []string
	for _, tg := range o.Targets {
		targets = append(targets, fmt.Sprintf("%q", tg))
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: %s\n  evaluation_interval: %s\nscrape_configs:\n  - job_name: test\n    static_configs:\n      - targets: [%s]\n",
		o.ScrapeInterval, o.ScrapeInterval, strings.Join(targets, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--web.console.templates=" + filepath.Join(dir, "none"),
		"--web.console.libraries=" + filepath.Join(dir, "none"),
	}, o.ExtraArgs...)
	cmd := exec.Command(filepath.Join(bin, "prometheus"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		logf.Close()
	})
	s := &Server{URL: "http://" + addr, Dir: dir}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Fatalf("prometheus exited before it was ready:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30 s (log in %s)", dir)
		}
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
