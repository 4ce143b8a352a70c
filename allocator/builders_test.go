package allocator

import (
	"fmt"
	"testing"
	"time"
)

// Fluent builders for tests, in the style of Kueue's
// pkg/util/testing wrappers.

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

type clusterWrapper struct{ Cluster }

func MakeCluster() *clusterWrapper { return &clusterWrapper{} }

func (c *clusterWrapper) Flavor(name string, gpusPerNode int) *clusterWrapper {
	c.Flavors = append(c.Flavors, Flavor{Name: name, GPUsPerNode: gpusPerNode})
	return c
}

// Node adds one node.
func (c *clusterWrapper) Node(name, flavor string, gpus int, block, rack string) *clusterWrapper {
	c.Cluster.Nodes = append(c.Cluster.Nodes, Node{Name: name, Flavor: flavor, GPUs: gpus, Block: block, Rack: rack})
	return c
}

// Nodes adds n nodes of flavor named <flavor>-NN, perRack to a rack and
// racksPerBlock racks to a block (0: no racks/blocks).
func (c *clusterWrapper) Nodes(flavor string, n, gpus, perRack, racksPerBlock int) *clusterWrapper {
	for i := range n {
		var rack, block string
		if perRack > 0 {
			r := i / perRack
			rack = fmt.Sprintf("r%d", r)
			if racksPerBlock > 0 {
				block = fmt.Sprintf("b%d", r/racksPerBlock)
			}
		}
		c.Node(fmt.Sprintf("%s-%02d", flavor, i), flavor, gpus, block, rack)
	}
	return c
}

func (c *clusterWrapper) Queue(q *queueWrapper) *clusterWrapper {
	c.Queues = append(c.Queues, q.Queue)
	return c
}

func (c *clusterWrapper) Fair(halfLife, penalty time.Duration) *clusterWrapper {
	c.Policy = Policy{Mode: FairSharing, HalfLife: halfLife, EntryPenalty: penalty}
	return c
}

func (c *clusterWrapper) Obj() *Cluster { cc := c.Cluster; return &cc }

type queueWrapper struct{ Queue }

func MakeQueue(name string) *queueWrapper {
	return &queueWrapper{Queue{Name: name, Quotas: map[string]Quota{}}}
}

func (q *queueWrapper) Cohort(c string) *queueWrapper { q.Queue.Cohort = c; return q }
func (q *queueWrapper) Weight(w float64) *queueWrapper {
	q.Queue.Weight = w
	return q
}

// Quota lists flavor (in call order) with a nominal quota.
func (q *queueWrapper) Quota(flavor string, nominal int) *queueWrapper {
	q.Flavors = append(q.Flavors, flavor)
	q.Quotas[flavor] = Quota{Nominal: nominal}
	return q
}

func (q *queueWrapper) BorrowingLimit(flavor string, b int) *queueWrapper {
	qt := q.Quotas[flavor]
	qt.BorrowingLimit = &b
	q.Quotas[flavor] = qt
	return q
}

func (q *queueWrapper) LendingLimit(flavor string, l int) *queueWrapper {
	qt := q.Quotas[flavor]
	qt.LendingLimit = &l
	q.Quotas[flavor] = qt
	return q
}

func (q *queueWrapper) Preempt(within, reclaim string) *queueWrapper {
	q.Preemption = Preemption{WithinClusterQueue: within, ReclaimWithinCohort: reclaim}
	return q
}

type workloadWrapper struct{ Workload }

func MakeWorkload(id string) *workloadWrapper {
	return &workloadWrapper{Workload{ID: id, GPUs: 1, Created: t0}}
}

func (w *workloadWrapper) Queue(q string) *workloadWrapper { w.Workload.Queue = q; return w }
func (w *workloadWrapper) GPUs(n int) *workloadWrapper     { w.Workload.GPUs = n; return w }
func (w *workloadWrapper) Priority(p int32) *workloadWrapper {
	w.Workload.Priority = p
	return w
}
func (w *workloadWrapper) Flavor(f string) *workloadWrapper { w.Workload.Flavor = f; return w }
func (w *workloadWrapper) Topology(l Level) *workloadWrapper {
	w.Workload.Topology = l
	return w
}

// Created sets Created to t0 + d.
func (w *workloadWrapper) Created(d time.Duration) *workloadWrapper {
	w.Workload.Created = t0.Add(d)
	return w
}
func (w *workloadWrapper) Duration(d time.Duration) *workloadWrapper {
	w.Workload.Duration = d
	return w
}

// Admitted marks the workload admitted on flavor at t0+at, one node per pod.
func (w *workloadWrapper) Admitted(flavor string, at time.Duration, nodes ...string) *workloadWrapper {
	w.Admission = &Admission{Flavor: flavor, At: t0.Add(at), Nodes: nodes}
	return w
}

func (w *workloadWrapper) Obj() Workload { return w.Workload }

// newSnapshot builds a snapshot at t0 and checks its invariants when the
// test ends, like bbolt's btesting.MustCreateDB.
func newSnapshot(t testing.TB, c *Cluster, ws ...Workload) *Snapshot {
	t.Helper()
	s, err := NewSnapshot(c, t0, ws, nil)
	if err != nil {
		t.Fatalf("NewSnapshot: %v", err)
	}
	t.Cleanup(func() { checkInvariants(t, s) })
	return s
}

// ids lists the IDs of events as "kind:id" (and "<by" for preemptions).
func evs(events []Event) []string {
	var out []string
	for _, e := range events {
		s := string(e.Kind) + ":" + e.ID
		if e.By != "" {
			s += "<" + e.By
		}
		out = append(out, s)
	}
	return out
}

// admittedIDs lists admitted workload IDs with their flavor, sorted.
func admittedOn(s *Snapshot) map[string]string {
	out := map[string]string{}
	for _, w := range s.Workloads() {
		if w.Admission != nil {
			out[w.ID] = w.Admission.Flavor
		}
	}
	return out
}
