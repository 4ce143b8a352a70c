package gpumetrics_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/gpumetrics"
	"github.com/gpubot/gpubot/internal/promenv"
)

// dcgm is a small exporter that serves GPU utilization in the DCGM
// exporter's format: one DCGM_FI_DEV_GPU_UTIL sample per GPU, labelled
// as dcgm-exporter labels them on Kubernetes (gpu, UUID, device,
// modelName, Hostname, container, namespace, pod).
type dcgm struct {
	mu   sync.Mutex
	gpus []gpu
}

type gpu struct {
	namespace, pod string
	util           float64
	off            bool // not served (yet)
}

func (d *dcgm) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintln(w, "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).")
	fmt.Fprintln(w, "# TYPE DCGM_FI_DEV_GPU_UTIL gauge")
	for i, g := range d.gpus {
		if g.off {
			continue
		}
		fmt.Fprintf(w, "DCGM_FI_DEV_GPU_UTIL{gpu=\"%d\",UUID=\"GPU-%08x-1c2d-3e4f-5a6b-7c8d9e0f1a2b\",device=\"nvidia%d\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"h100-b1-r1-n%d\",container=\"main\",namespace=%q,pod=%q} %g\n",
			i%8, i, i%8, 1+i/8, g.namespace, g.pod, g.util)
	}
}

func (d *dcgm) set(i int, g gpu) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gpus[i] = g
}

// jobs locates workloads by a fixed table.
type jobs map[string][2]string

func (j jobs) Locate(id string) (string, string, bool) {
	x, ok := j[id]
	return x[0], x[1], ok
}

// TestGPUUtilizationFromPrometheus: a real Prometheus scrapes DCGM
// metrics; the Source attributes each GPU to its workload by namespace
// and Job (r1 is not r12, nlp's gpubot-r1 is not vision's), takes the
// busiest GPU over the window, says how much of the window had samples,
// and leaves out workloads without series.
func TestGPUUtilizationFromPrometheus(t *testing.T) {
	exp := &dcgm{gpus: []gpu{
		{namespace: "nlp", pod: "gpubot-r1-x7k2p", util: 0},            // r1: idle, two GPUs
		{namespace: "nlp", pod: "gpubot-r1-x7k2p", util: 2},            //
		{namespace: "nlp", pod: "gpubot-r2-0-b4c5d", util: 0},          // r2: indexed Job, one busy pod
		{namespace: "nlp", pod: "gpubot-r2-1-f6g7h", util: 81},         //
		{namespace: "nlp", pod: "gpubot-r12-m8n9p", util: 60},          // r12: busy
		{namespace: "vision", pod: "gpubot-r1-q2r3s", util: 95},        // another team's r1 Job: not nlp's
		{namespace: "nlp", pod: "eval-llama-t4v5w", util: 1},           // tracked Job "eval-llama"
		{namespace: "nlp", pod: "gpubot-r3-z2x3c", util: 0, off: true}, // r3: starts reporting late
		{namespace: "", pod: "", util: 99},                             // a GPU given to no pod
	}}
	ts := httptest.NewServer(exp)
	defer ts.Close()
	srv := promenv.Start(t, promenv.Options{Targets: []string{strings.TrimPrefix(ts.URL, "http://")}, ScrapeInterval: 250 * time.Millisecond})
	loc := jobs{"r1": {"nlp", "gpubot-r1"}, "r2": {"nlp", "gpubot-r2"}, "r12": {"nlp", "gpubot-r12"}, "r3": {"nlp", "gpubot-r3"},
		"r9": {"nlp", "gpubot-r9"}, "k8s/nlp/job-eval-llama-1a2b3": {"nlp", "eval-llama"}}
	src, err := gpumetrics.New(srv.URL, loc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const window = 5 * time.Second
	ids := []string{"r1", "r2", "r12", "r3", "r9", "k8s/nlp/job-eval-llama-1a2b3", "unknown"}
	// Prometheus scrapes on its own wall clock: wait until it has a
	// window of samples.
	var got map[string]commands.Utilized
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err = src.GPUUtilization(ctx, ids, window, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got["r1"].Coverage >= 0.95 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no full window of samples after 30 s: %+v", got)
		}
		time.Sleep(250 * time.Millisecond) // waiting on Prometheus's scrapes
	}
	exp.set(7, gpu{namespace: "nlp", pod: "gpubot-r3-z2x3c", util: 0})
	time.Sleep(1500 * time.Millisecond) // a few scrapes of r3
	got, err = src.GPUUtilization(ctx, ids, window, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]float64{"r1": 2, "r2": 81, "r12": 60, "k8s/nlp/job-eval-llama-1a2b3": 1, "r3": 0} {
		u, ok := got[id]
		switch {
		case !ok:
			t.Errorf("%s: no answer", id)
		case u.Peak != want:
			t.Errorf("%s: peak %v%%, want %v%%", id, u.Peak, want)
		case u.Source != gpumetrics.SourceName:
			t.Errorf("%s: source %q", id, u.Source)
		case id != "r3" && u.Coverage < 0.9:
			t.Errorf("%s: coverage %.2f of a window it reported all along", id, u.Coverage)
		}
	}
	if c := got["r3"].Coverage; c <= 0 || c > 0.7 {
		t.Errorf("r3 reported for the last 1.5 s of a 5 s window; coverage %.2f", c)
	}
	for _, id := range []string{"r9", "unknown"} {
		if u, ok := got[id]; ok {
			t.Errorf("%s has no series, but got %+v", id, u)
		}
	}
}

// TestPrometheusUnreachable: a server that does not answer is an error
// naming it, not an empty answer.
func TestPrometheusUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	src, err := gpumetrics.New("http://"+addr, jobs{"r1": {"nlp", "gpubot-r1"}}, gpumetrics.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.GPUUtilization(context.Background(), []string{"r1"}, time.Minute, time.Now())
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("error %v, want one naming %s", err, addr)
	}
	// Nothing to ask about: no query, no error.
	if got, err := src.GPUUtilization(context.Background(), []string{"r7"}, time.Minute, time.Now()); err != nil || len(got) != 0 {
		t.Errorf("unlocated workloads: %v, %v", got, err)
	}
}
