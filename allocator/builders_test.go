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

// CohortTree adds a Cohort object: name, parent ("" for a root).
func (c *clusterWrapper) CohortTree(name, parent string) *clusterWrapper {
	c.Cohorts = append(c.Cohorts, Cohort{Name: name, Parent: parent, Quotas: map[string]Quota{}})
	return c
}

// CohortQuota gives the last cohort a GPU quota on flavor.
func (c *clusterWrapper) CohortQuota(flavor string, nominal int) *clusterWrapper {
	co := &c.Cohorts[len(c.Cohorts)-1]
	co.Quotas[flavor] = Quota{Nominal: nominal}
	return c
}

// CohortWeight sets the last cohort's fair-sharing weight.
func (c *clusterWrapper) CohortWeight(w float64) *clusterWrapper {
	c.Cohorts[len(c.Cohorts)-1].Weight = w
	return c
}

// KueueFairSharing turns on Kueue's Fair Sharing with the strategies.
func (c *clusterWrapper) KueueFairSharing(strategies ...string) *clusterWrapper {
	c.Policy.FairSharing = &KueueFairSharing{PreemptionStrategies: strategies}
	return c
}

// NodeRes adds one node with CPU (cores) and memory (GiB).
func (c *clusterWrapper) NodeRes(name, flavor string, gpus int, cores, gib int64) *clusterWrapper {
	c.Cluster.Nodes = append(c.Cluster.Nodes, Node{Name: name, Flavor: flavor, GPUs: gpus, CPU: cores * 1000, Memory: gib << 30})
	return c
}

// CPU gives the queue a CPU quota (cores) on flavor, which must already
// have a GPU quota.
func (q *queueWrapper) CPU(flavor string, cores int64) *queueWrapper {
	qt := q.Quotas[flavor]
	qt.CPU = &ResourceQuota{Nominal: cores * 1000}
	q.Quotas[flavor] = qt
	return q
}

// Memory gives the queue a memory quota (GiB) on flavor.
func (q *queueWrapper) Memory(flavor string, gib int64) *queueWrapper {
	qt := q.Quotas[flavor]
	qt.Memory = &ResourceQuota{Nominal: gib << 30}
	q.Quotas[flavor] = qt
	return q
}

// BorrowWithin sets borrowWithinCohort LowerPriority, with a threshold
// when max is given.
func (q *queueWrapper) BorrowWithin(max ...int32) *queueWrapper {
	q.Preemption.BorrowWithinCohort = PreemptLowerPriority
	if len(max) > 0 {
		q.Preemption.BorrowWithinCohortMaxPriority = &max[0]
	}
	return q
}

// Fungibility sets the queue's flavorFungibility.
func (q *queueWrapper) Fungibility(whenCanBorrow, whenCanPreempt, preference string) *queueWrapper {
	q.FlavorFungibility = FlavorFungibility{WhenCanBorrow: whenCanBorrow, WhenCanPreempt: whenCanPreempt, Preference: preference}
	return q
}

// CPU and Memory set the workload's CPU (cores) and memory (GiB).
func (w *workloadWrapper) CPU(cores int64) *workloadWrapper {
	w.Workload.CPU = cores * 1000
	return w
}

func (w *workloadWrapper) Memory(gib int64) *workloadWrapper {
	w.Workload.Memory = gib << 30
	return w
}
