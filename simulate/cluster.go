package simulate

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// Policy is one admission policy the replay compares.
type Policy struct {
	Name string // "fcfs", "kueue", "gpubot" or one's own
	Mode allocator.Mode
	// HalfLife and EntryPenalty of Admission Fair Sharing (FairSharing
	// mode only).
	HalfLife, EntryPenalty time.Duration
	// Preemption is every team's automatic preemption policy, and
	// FlavorFungibility every team's flavor search.
	Preemption        allocator.Preemption
	FlavorFungibility allocator.FlavorFungibility
	// FairSharing is Kueue's Fair Sharing (nil: off), with the teams'
	// weights all 1.
	FairSharing *allocator.KueueFairSharing
}

// GpubotDefaults are the fair-sharing and preemption settings of gpubot's
// bundled example configuration, used when no configuration is given.
var GpubotDefaults = Policy{
	Name: "gpubot", Mode: allocator.FairSharing,
	HalfLife: 7 * 24 * time.Hour, EntryPenalty: time.Hour,
	Preemption: allocator.Preemption{WithinClusterQueue: allocator.PreemptLowerPriority, ReclaimWithinCohort: allocator.PreemptAny},
}

// StandardPolicies returns the three policies the replay compares by
// default: first come first served (what negotiating by hand
// approximates), Kueue's defaults (BestEffortFIFO: priority then arrival,
// no preemption) and gpubot's (priority, Admission Fair Sharing and
// preemption as configured: gpubot).
func StandardPolicies(gpubot Policy) []Policy {
	gpubot.Name = "gpubot"
	return []Policy{
		{Name: "fcfs", Mode: allocator.FirstComeFirstServed},
		{Name: "kueue", Mode: allocator.BestEffortFIFO},
		gpubot,
	}
}

// Cohort is the cohort every team's queue belongs to.
const Cohort = "cluster"

// buildCluster returns the allocator cluster for nodes, teams and a
// policy: one flavor per GPU model (GPUsPerNode = its largest node), one
// queue per team in one cohort, with the flavors in the order of their
// total GPUs (largest first, then by name) and each flavor's GPUs split
// evenly as nominal quotas (the remainder to the first teams), no
// borrowing or lending limits. With cpu (mem), nodes have their CPU
// (memory) and every queue a CPU (memory) quota on each flavor, split
// the same way from the flavor's nodes' totals. The flavor named elastic
// (if any) is an elastic pool (see elastic.go).
func buildCluster(nodes []Node, teams []string, pol Policy, placement allocator.Placement, seed uint64, cpu, mem bool, elastic string) (*allocator.Cluster, error) {
	type flav struct {
		name       string
		gpn, total int
		cpu, mem   int64
	}
	byName := map[string]*flav{}
	var flavs []*flav
	c := &allocator.Cluster{}
	for _, n := range nodes {
		f := Flavor(n.Model)
		fl, ok := byName[f]
		if !ok {
			fl = &flav{name: f}
			byName[f] = fl
			flavs = append(flavs, fl)
		}
		fl.gpn = max(fl.gpn, n.GPUs)
		fl.total += n.GPUs
		node := allocator.Node{Name: n.Name, Flavor: f, GPUs: n.GPUs, Block: n.Block, Rack: n.Rack}
		if cpu {
			node.CPU = n.CPU
			fl.cpu += node.CPU
		}
		if mem {
			node.Memory = n.Memory << 20
			fl.mem += node.Memory
		}
		c.Nodes = append(c.Nodes, node)
	}
	slices.SortFunc(flavs, func(a, b *flav) int {
		if a.total != b.total {
			return cmp.Compare(b.total, a.total)
		}
		return strings.Compare(a.name, b.name)
	})
	for _, f := range flavs {
		c.Flavors = append(c.Flavors, allocator.Flavor{Name: f.name, GPUsPerNode: f.gpn, Elastic: f.name == elastic})
	}
	for i, t := range teams {
		q := allocator.Queue{Name: t, Cohort: Cohort, Weight: 1, Quotas: map[string]allocator.Quota{}, Preemption: pol.Preemption,
			FlavorFungibility: pol.FlavorFungibility}
		for _, f := range flavs {
			share := f.total / len(teams)
			if i < f.total%len(teams) {
				share++
			}
			q.Flavors = append(q.Flavors, f.name)
			quota := allocator.Quota{Nominal: share}
			split := func(total int64) *allocator.ResourceQuota {
				n := int64(len(teams))
				v := total / n
				if int64(i) < total%n {
					v++
				}
				return &allocator.ResourceQuota{Nominal: v}
			}
			if cpu {
				quota.CPU = split(f.cpu)
			}
			if mem {
				quota.Memory = split(f.mem)
			}
			q.Quotas[f.name] = quota
		}
		c.Queues = append(c.Queues, q)
	}
	c.Policy = allocator.Policy{Mode: pol.Mode, Placement: placement, Seed: seed, FairSharing: pol.FairSharing}
	if pol.Mode == allocator.FairSharing {
		c.Policy.HalfLife, c.Policy.EntryPenalty = pol.HalfLife, pol.EntryPenalty
	}
	if _, err := allocator.NewSnapshot(c, time.Time{}, nil, nil); err != nil {
		return nil, fmt.Errorf("building the cluster: %w", err)
	}
	return c, nil
}

// Change is a what-if change of capacity: GPUs more (or, negative, fewer)
// GPUs of a flavor.
type Change struct {
	Flavor string
	GPUs   int
	// Capacity is "" for reserved GPUs, or CapacitySpot or
	// CapacityProvisioned for an elastic pool (see elastic.go).
	Capacity string
}

func (c Change) String() string {
	if c.Capacity != "" {
		return fmt.Sprintf("%+dx%s:%s", c.GPUs, c.Flavor, c.Capacity)
	}
	return fmt.Sprintf("%+dx%s", c.GPUs, c.Flavor)
}

// ParseChange reads "16xg2" or "+16xg2" (add 16 GPUs of flavor g2) or
// "-16xg2" (remove them), the syntax of the chat's /gpu whatif, and
// "16xg2:spot" or "16xg2:provisioned" (add an elastic pool of 16 GPUs).
func ParseChange(s string) (Change, error) {
	s, kind, elastic := strings.Cut(strings.TrimSpace(s), ":")
	if elastic && kind != CapacitySpot && kind != CapacityProvisioned {
		return Change{}, fmt.Errorf("%q: %q is not spot or provisioned", s+":"+kind, kind)
	}
	n, f, ok := strings.Cut(strings.TrimSpace(s), "x")
	if !ok || f == "" {
		return Change{}, fmt.Errorf("%q: want <N>x<flavor>, like 16xg2 or -8xt4", s)
	}
	g, err := strconv.Atoi(n)
	if err != nil || g == 0 {
		return Change{}, fmt.Errorf("%q: %q is not a number of GPUs other than 0", s, n)
	}
	if elastic && g < 0 {
		return Change{}, fmt.Errorf("%q: an elastic pool is added, not removed", s+":"+kind)
	}
	return Change{Flavor: Flavor(f), GPUs: g, Capacity: kind}, nil
}

// ApplyChanges returns nodes with the changes made: added GPUs become
// new nodes of the flavor's most common size (and CPU and memory),
// named <flavor>-added-<n>, the last one smaller if needed; removed GPUs
// take whole nodes away, last by name first, until at least that many
// are gone. It also returns a sentence saying what was done.
func ApplyChanges(nodes []Node, changes []Change) ([]Node, string, error) {
	out := slices.Clone(nodes)
	var notes []string
	for _, ch := range changes {
		var same []int
		for i, n := range out {
			if Flavor(n.Model) == ch.Flavor {
				same = append(same, i)
			}
		}
		if len(same) == 0 {
			return nil, "", fmt.Errorf("%s: there is no flavor %q in the node list", ch, ch.Flavor)
		}
		if ch.GPUs > 0 {
			proto := commonNode(out, same)
			left, k := ch.GPUs, 0
			name, block := ch.Flavor+"-added", ch.Flavor+"-added"
			if ch.Capacity != "" {
				proto.Model = elasticName(ch)
				name, block = elasticName(ch), elasticName(ch)
			}
			for left > 0 {
				k++
				n := proto
				n.Name = fmt.Sprintf("%s-%03d", name, k)
				n.GPUs = min(proto.GPUs, left)
				n.Block, n.Rack = block, ""
				left -= n.GPUs
				out = append(out, n)
			}
			if ch.Capacity != "" {
				notes = append(notes, fmt.Sprintf("added a %s pool %s of %d %s GPUs (%s) that only jobs switched to it after waiting use", ch.Capacity, elasticName(ch), ch.GPUs, ch.Flavor, plural(k, "node")))
				continue
			}
			notes = append(notes, fmt.Sprintf("added %d %s GPUs as %s", ch.GPUs, ch.Flavor, plural(k, "node")))
			continue
		}
		slices.SortFunc(same, func(a, b int) int { return strings.Compare(out[b].Name, out[a].Name) })
		left, removed := -ch.GPUs, map[int]bool{}
		for _, i := range same {
			if left <= 0 {
				break
			}
			removed[i] = true
			left -= out[i].GPUs
		}
		if left > 0 {
			return nil, "", fmt.Errorf("%s: there are not that many %s GPUs", ch, ch.Flavor)
		}
		kept := out[:0]
		for i, n := range out {
			if !removed[i] {
				kept = append(kept, n)
			}
		}
		out = kept
		notes = append(notes, fmt.Sprintf("removed %s of %s (%d GPUs, last by name)", plural(len(removed), "node"), ch.Flavor, -ch.GPUs-left))
	}
	return out, strings.Join(notes, "; "), nil
}

// commonNode returns the most common node shape among idx (ties: the
// larger node).
func commonNode(nodes []Node, idx []int) Node {
	type shape struct {
		gpus     int
		cpu, mem int64
		model    string
	}
	count := map[shape]int{}
	var best shape
	for _, i := range idx {
		n := nodes[i]
		s := shape{n.GPUs, n.CPU, n.Memory, n.Model}
		count[s]++
		if c, b := count[s], count[best]; c > b || (c == b && (s.gpus > best.gpus || (s.gpus == best.gpus && (s.cpu > best.cpu || (s.cpu == best.cpu && s.mem > best.mem))))) {
			best = s
		}
	}
	return Node{Model: best.model, GPUs: best.gpus, CPU: best.cpu, Memory: best.mem}
}

// plural writes "1 node", "2 nodes".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
