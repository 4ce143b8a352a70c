package k8sbridge

import (
	"cmp"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// told is what the sink has been told: each request's phase, its
// workload as it then was and the readiness of its pods; and what is left
// to do once it has been told: marks to record on Jobs, and when to look
// again if nothing happens before.
type told struct {
	phases map[string]phase
	known  map[string]allocator.Workload
	pods   map[string]podsMark
	writes []markWrite
	wake   time.Time
}

// diff compares the caches with what the sink was told and returns the
// events in between, in time order, and what the sink will have been told
// once it has them.
func (b *Bridge) diff() ([]allocator.Event, told) {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := told{phases: map[string]phase{}, known: map[string]allocator.Workload{}, pods: map[string]podsMark{}}
	v, err := b.view()
	if err != nil {
		b.log.Error("reading the cluster for events", "err", err)
		return nil, told{phases: b.reported, known: b.known, pods: b.podsTold}
	}
	b.logFindings(commands.KueueReport{Unmatched: v.unmatched, Approximate: b.unmodelled(v, b.mgr)})
	placed := map[string]allocator.Workload{}
	for _, w := range v.workloads {
		placed[w.ID] = w
	}
	now := b.clock.Now()
	var events []allocator.Event
	for id, o := range v.owned {
		prev, seen := b.reported[id]
		cur := o.phase
		w, ok := placed[id]
		if !ok {
			w = o.w
		}
		next.phases[id] = cur
		if cur == phasePending || cur == phaseAdmitted {
			k := w
			k.Admission = cloneAdmission(w.Admission)
			if k.Admission != nil {
				k.Admission.Nodes = nil // placed afresh if it is kept
			}
			next.known[id] = k
		}
		switch {
		case cur == phaseAdmitted && prev != phaseAdmitted:
			a := cloneAdmission(w.Admission)
			if a == nil {
				a = &allocator.Admission{}
			}
			a.At = o.at
			events = append(events, allocator.Event{Kind: allocator.EventAdmitted, ID: id, At: o.at, Admission: a})
		case cur == phasePending && prev == phaseAdmitted:
			by := b.evictedFor[id]
			delete(b.evictedFor, id)
			if by == "" && o.preemptedBy != "" {
				by = v.byUID[o.preemptedBy]
			}
			ev := allocator.Event{Kind: allocator.EventPreempted, ID: id, At: now, By: by}
			if by == "" {
				ev.Detail = o.evicted
			}
			events = append(events, ev)
		case cur == phaseFinished && prev != phaseFinished:
			if !seen || prev == phasePending {
				// Finished before gpubot saw it run: report the run first,
				// so that a queued request can end.
				a := cloneAdmission(o.w.Admission)
				if a == nil {
					a = &allocator.Admission{}
				}
				if a.At.IsZero() || a.At.After(o.at) {
					a.At = o.at
				}
				events = append(events, allocator.Event{Kind: allocator.EventAdmitted, ID: id, At: a.At, Admission: a})
			}
			events = append(events, allocator.Event{Kind: allocator.EventFinished, ID: id, At: o.at, Detail: o.ended})
		}
		if cur == phaseAdmitted {
			ev, m, wake := b.podsEvent(o, now)
			next.pods[id] = m
			if ev != nil {
				events = append(events, *ev)
				next.writes = append(next.writes, markWrite{namespace: o.job.Namespace, job: o.job.Name, value: m.annotation()})
			}
			if !wake.IsZero() && (next.wake.IsZero() || wake.Before(next.wake)) {
				next.wake = wake
			}
		}
	}
	slices.SortStableFunc(events, func(x, y allocator.Event) int {
		return cmp.Or(x.At.Compare(y.At), cmp.Compare(kindOrder(x.Kind), kindOrder(y.Kind)), strings.Compare(x.ID, y.ID))
	})
	for _, w := range v.warnings {
		b.log.Warn(w)
	}
	return events, next
}

// kindOrder keeps one workload's events at the same instant in the order
// they happened: evicted, admitted (again), pods ready or not, finished.
func kindOrder(k allocator.EventKind) int {
	switch k {
	case allocator.EventPreempted:
		return 0
	case allocator.EventAdmitted:
		return 1
	case allocator.EventPodsReady, allocator.EventPodsNotReady:
		return 2
	}
	return 3
}

// commit records what the sink has now been told.
func (b *Bridge) commit(t told) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reported, b.known, b.podsTold = t.phases, t.known, t.pods
}

func cloneAdmission(a *allocator.Admission) *allocator.Admission {
	if a == nil {
		return nil
	}
	c := *a
	c.Nodes = slices.Clone(a.Nodes)
	return &c
}

// jobFinished reports whether a Job has completed or failed.
func jobFinished(j *batchv1.Job) bool {
	if j == nil {
		return false
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
