// Package gpumetrics reads how busy GPUs are from Prometheus: the NVIDIA
// DCGM exporter's DCGM_FI_DEV_GPU_UTIL gauge (percent, per GPU, labelled
// with the pod and namespace the GPU is given to), queried with PromQL
// over the Prometheus HTTP API. It implements commands.Utilization for
// the zombie sweep and is the only importer of
// github.com/prometheus/client_golang/api.
//
// # Basics
//
//	src, err := gpumetrics.New("http://prometheus.monitoring:9090", bridge)
//	used, err := src.GPUUtilization(ctx, []string{"r7"}, 30*time.Minute, now)
//	// used["r7"].Peak: the busiest GPU of r7's pods over the window
//
// A Locator (the Kubernetes bridge) says which Job runs each workload;
// its pods are those named after the Job as the Job controller names
// them: <job>-<5 characters>, or <job>-<index>-<5 characters> for an
// indexed Job. One range query a sweep asks for the busiest GPU of each
// such pod:
//
//	max by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{namespace=~"nlp|vision", pod=~"(gpubot-r7|train)-([0-9]+-)?[a-z0-9]{5}"})
//
// from now-window to now in steps of a twentieth of the window (at least
// a second), and the answer is split by workload in Go: Peak is the
// highest value of any of its pods, Coverage the share of the steps at
// which any of them reported.
//
// # Caveats
//
// Label names are the DCGM exporter's (pod, namespace) unless told
// otherwise (WithLabels): a Prometheus that scrapes the exporter without
// honor_labels renames them exported_pod and exported_namespace. A
// workload whose pods have no series is left out of the answer, so the
// sweep does not judge it; so is one whose Job the Locator does not know.
// Prometheus's own lookback (5 minutes by default) carries a sample
// forward over short gaps.
package gpumetrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/gpubot/gpubot/commands"
)

// Metric is the DCGM exporter's GPU utilization gauge.
const Metric = "DCGM_FI_DEV_GPU_UTIL"

// SourceName is what Utilized.Source says.
const SourceName = "DCGM via Prometheus"

// Locator says where a workload's pods run: the namespace and the name of
// the Job that makes them. The Kubernetes bridge implements it.
type Locator interface {
	Locate(id string) (namespace, job string, ok bool)
}

// Option configures a Source.
type Option func(*Source)

// WithLogger sets the operator's log. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(s *Source) { s.log = l } }

// WithLabels names the labels that hold a GPU's pod and namespace.
// Default "pod" and "namespace", the DCGM exporter's.
func WithLabels(pod, namespace string) Option {
	return func(s *Source) {
		s.podLabel, s.nsLabel = cmp.Or(pod, s.podLabel), cmp.Or(namespace, s.nsLabel)
	}
}

// WithTimeout bounds each query. Default 15 seconds.
func WithTimeout(d time.Duration) Option { return func(s *Source) { s.timeout = d } }

// Source answers GPU utilization questions from a Prometheus server.
type Source struct {
	url      string
	api      promv1.API
	loc      Locator
	podLabel string
	nsLabel  string
	timeout  time.Duration
	log      *slog.Logger
}

var _ commands.Utilization = (*Source)(nil)

// New returns a Source querying the Prometheus server at url.
func New(url string, loc Locator, opts ...Option) (*Source, error) {
	if loc == nil {
		return nil, errors.New("gpumetrics: New needs a Locator")
	}
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, fmt.Errorf("connecting to Prometheus at %s: %w", url, err)
	}
	s := &Source{url: url, api: promv1.NewAPI(c), loc: loc, podLabel: "pod", nsLabel: "namespace",
		timeout: 15 * time.Second, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// located is a workload whose Job is known.
type located struct {
	id, namespace, job string
	pod                *regexp.Regexp
}

// GPUUtilization implements commands.Utilization.
func (s *Source) GPUUtilization(ctx context.Context, ids []string, window time.Duration, now time.Time) (map[string]commands.Utilized, error) {
	if window <= 0 {
		return nil, fmt.Errorf("gpumetrics: window %s is not positive", window)
	}
	var ws []located
	for _, id := range ids {
		ns, job, ok := s.loc.Locate(id)
		if !ok || ns == "" || job == "" {
			continue
		}
		ws = append(ws, located{id: id, namespace: ns, job: job, pod: regexp.MustCompile("^" + podPattern(job) + "$")})
	}
	out := map[string]commands.Utilized{}
	if len(ws) == 0 {
		return out, nil
	}
	step := max(window/20, time.Second)
	q := s.query(ws)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	val, warnings, err := s.api.QueryRange(ctx, q, promv1.Range{Start: now.Add(-window), End: now, Step: step})
	if err != nil {
		return nil, fmt.Errorf("querying Prometheus at %s for GPU utilization: %w", s.url, err)
	}
	if len(warnings) > 0 {
		s.log.Warn("Prometheus warned about the GPU utilization query", "warnings", strings.Join(warnings, "; "), "query", q)
	}
	matrix, ok := val.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("querying Prometheus at %s for GPU utilization: got a %s, want a matrix", s.url, val.Type())
	}
	steps := int(window/step) + 1
	type acc struct {
		peak float64
		at   map[model.Time]bool
	}
	byID := map[string]*acc{}
	for _, ss := range matrix {
		ns, pod := string(ss.Metric[model.LabelName(s.nsLabel)]), string(ss.Metric[model.LabelName(s.podLabel)])
		for _, w := range ws {
			if w.namespace != ns || !w.pod.MatchString(pod) {
				continue
			}
			a := byID[w.id]
			if a == nil {
				a = &acc{peak: -1, at: map[model.Time]bool{}}
				byID[w.id] = a
			}
			for _, v := range ss.Values {
				a.peak = max(a.peak, float64(v.Value))
				a.at[v.Timestamp] = true
			}
		}
	}
	for id, a := range byID {
		if len(a.at) == 0 {
			continue
		}
		out[id] = commands.Utilized{Peak: a.peak, Coverage: min(1, float64(len(a.at))/float64(steps)), Source: SourceName}
	}
	return out, nil
}

// query is the PromQL for the pods of ws.
func (s *Source) query(ws []located) string {
	var nss, jobs []string
	for _, w := range ws {
		nss = append(nss, regexp.QuoteMeta(w.namespace))
		jobs = append(jobs, regexp.QuoteMeta(w.job))
	}
	slices.Sort(nss)
	slices.Sort(jobs)
	nss, jobs = slices.Compact(nss), slices.Compact(jobs)
	pods := "(" + strings.Join(jobs, "|") + ")" + podSuffix
	return fmt.Sprintf("max by (%s, %s) (%s{%s=~%q, %s=~%q})", s.nsLabel, s.podLabel, Metric, s.nsLabel, strings.Join(nss, "|"), s.podLabel, pods)
}

// podSuffix is what the Job controller appends to a Job's name to name
// its pods: an index for indexed Jobs, then 5 random characters.
const podSuffix = "-([0-9]+-)?[a-z0-9]{5}"

func podPattern(job string) string { return regexp.QuoteMeta(job) + podSuffix }
