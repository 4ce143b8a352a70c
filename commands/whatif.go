package commands

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// whatIf answers what would happen to a request without submitting it.
// It is a read; the simulation is shared with identical what-ifs against
// the same estimates (hypothetical.go), what it says to the asker is not.
func (s *Service) whatIf(c *call, spec RequestSpec) {
	r, problem := s.draft(c.who, spec, c.now)
	if problem != "" {
		c.private(plain(problem))
		return
	}
	out, err := s.hypothetical(c, r)
	switch {
	case err != nil:
		s.failed(c, "reading the cluster", err)
		return
	case out.never != "":
		c.private(plain(out.never))
		return
	case out.err != nil:
		s.failed(c, "simulating the request", out.err)
		return
	}
	what := fmt.Sprintf("%d× %s for %s in %s at %s priority", r.GPUs, strings.Join(s.candidateFlavors(r), "|"), fmtDuration(r.Duration), r.Team, r.Priority)
	var lines []string
	var head string
	if out.admitted {
		r.AdmittedFlavor, r.Nodes = out.flavor, out.nodes
		by := ""
		if len(out.victims) > 0 {
			by = " by preempting " + s.victimList(c, out.victims)
		}
		head = fmt.Sprintf("If requested now, %s would start at once on %s%s.", what, placement(r), by)
	} else {
		head = fmt.Sprintf("If requested now, %s would be queued: %s.", what, s.estimateText(toRecord(c.now, out.est)))
		if approx := s.approximate(c, r.Team); approx != "" {
			lines = append(lines, "The estimate is "+approx+".")
		}
		switch why := out.why; {
		case why == fitsNow:
			lines = append(lines, "It would fit and start at the next admission cycle.")
		case why != "":
			lines = append(lines, fmt.Sprintf("It would wait for %s: %s.", out.est.Reason, why))
		}
		if len(out.proposed) > 0 {
			lines = append(lines, fmt.Sprintf("An admin could start it now by preempting %s.", s.victimList(c, out.proposed)))
		}
	}
	if needs := out.needs; len(needs) > 0 {
		if s.canApprove(c.who, r.Team) {
			lines = append(lines, fmt.Sprintf("It needs approval (%s), which you can give yourself.", strings.Join(needs, "; ")))
		} else {
			lines = append(lines, fmt.Sprintf("It needs approval first (%s) from %s; until then it holds no quota.", strings.Join(needs, "; "), orList(s.approvers(r.Team))))
		}
	}
	blocks := []Block{}
	if len(lines) > 0 {
		blocks = append(blocks, section(strings.Join(lines, " ")))
	}
	blocks = append(blocks, contextBlock("Nothing was submitted. /gpu request with the same words submits it."))
	c.private(plain(head, blocks...))
}

// whatIfCapacity answers how waits would change with more or fewer GPUs.
func (s *Service) whatIfCapacity(c *call, d CapacityDelta) {
	if !c.who.Admin {
		s.audit(c, c.who.Name, "whatif", fmt.Sprintf("%+d %s", d.GPUs, d.Flavor), "refused", "not an admin")
		c.private(plain(fmt.Sprintf("Only admins (%s) can ask what-ifs about capacity. Nothing was changed.", strings.Join(s.admins(), ", "))))
		return
	}
	snap, err := s.snapshot(c)
	if err != nil {
		s.failed(c, "reading the cluster", err)
		return
	}
	fl, ok := s.flavor(d.Flavor)
	if !ok {
		c.private(plain(fmt.Sprintf("There is no flavor %s.", d.Flavor)))
		return
	}
	changed, note, err := WithCapacity(snap, fl, d.GPUs)
	if err != nil {
		c.private(plain(err.Error()))
		return
	}
	opts := s.viewOptions(c)
	before := allocator.Estimates(snap, opts)
	changed.Schedule()
	after := allocator.Estimates(changed, opts)
	ids := make([]string, 0, len(before))
	for id := range before {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return compareIDs(a, b) })
	var rows [][]string
	var sumBefore, sumAfter time.Duration
	earlier, later, counted := 0, 0, 0
	for _, id := range ids {
		b := before[id]
		a, stillPending := after[id]
		wb := mid(b, c.now, s.horizon)
		wa := time.Duration(0)
		if stillPending {
			wa = mid(a, c.now, s.horizon)
		}
		sumBefore += wb
		sumAfter += wa
		counted++
		switch {
		case wa < wb-time.Minute:
			earlier++
		case wa > wb+time.Minute:
			later++
		}
		if len(rows) < maxRows {
			now := "starts at once"
			if stillPending {
				now = s.estimateWindow(toRecord(c.now, a))
			}
			rows = append(rows, []string{id, s.estimateWindow(toRecord(c.now, b)), now})
		}
	}
	verb := "adding"
	if d.GPUs < 0 {
		verb = "removing"
	}
	head := fmt.Sprintf("What if %s %d %s GPUs: nothing is waiting, so waits do not change.", verb, abs(d.GPUs), d.Flavor)
	var blocks []Block
	if counted > 0 {
		head = fmt.Sprintf("What if %s %d %s GPUs: mean wait of the %d waiting requests %s → %s; %d start earlier, %d later.",
			verb, abs(d.GPUs), d.Flavor, counted, fmtDuration(sumBefore/time.Duration(counted)), fmtDuration(sumAfter/time.Duration(counted)), earlier, later)
		blocks = append(blocks, table([]string{"Request", "Now", fmt.Sprintf("With %+d %s", d.GPUs, d.Flavor)}, rows))
		if earlier == 0 && d.GPUs > 0 {
			blocks = append(blocks, section("More GPUs do not help these requests: they wait for quota or for their turn, not for hardware. Raising quotas (or lending limits) would."))
		}
	}
	blocks = append(blocks, contextBlock(note+" Quotas are unchanged. Nothing was changed in the cluster."))
	s.audit(c, c.who.Name, "whatif", fmt.Sprintf("%+d %s", d.GPUs, d.Flavor), "ok", head)
	c.private(plain(head, blocks...))
}

// WithCapacity returns a copy of snap with gpus more (or fewer) GPUs of
// flavor, and a sentence saying what was simulated: new nodes in a new
// block, or the last nodes removed with their work requeued. It is the
// what-if engine of /gpu whatif +N and of the digest's capacity sentence.
func WithCapacity(snap *allocator.Snapshot, fl allocator.Flavor, gpus int) (*allocator.Snapshot, string, error) {
	cl := *snap.Cluster()
	cl.Nodes = slices.Clone(cl.Nodes)
	ws := snap.Workloads()
	if gpus > 0 {
		n := (gpus + fl.GPUsPerNode - 1) / fl.GPUsPerNode
		for i := 1; i <= n; i++ {
			cl.Nodes = append(cl.Nodes, allocator.Node{
				Name: fmt.Sprintf("%s-whatif-n%d", fl.Name, i), Flavor: fl.Name, GPUs: fl.GPUsPerNode,
				Block: fl.Name + "-whatif", Rack: fl.Name + "-whatif-r1",
			})
		}
		sn, err := allocator.NewSnapshot(&cl, snap.Now(), ws, snap.Usage())
		return sn, fmt.Sprintf("Simulated %d new %d-GPU nodes in one new block.", n, fl.GPUsPerNode), err
	}
	removed := map[string]bool{}
	left := -gpus
	for i := len(cl.Nodes) - 1; i >= 0 && left > 0; i-- {
		if cl.Nodes[i].Flavor != fl.Name {
			continue
		}
		removed[cl.Nodes[i].Name] = true
		left -= cl.Nodes[i].GPUs
		cl.Nodes = slices.Delete(cl.Nodes, i, i+1)
	}
	if left > 0 {
		return nil, "", fmt.Errorf("there are not that many %s GPUs to remove", fl.Name)
	}
	requeued := 0
	for i := range ws {
		if a := ws[i].Admission; a != nil && slices.ContainsFunc(a.Nodes, func(n string) bool { return removed[n] }) {
			ws[i].Admission = nil
			requeued++
		}
	}
	sn, err := allocator.NewSnapshot(&cl, snap.Now(), ws, snap.Usage())
	return sn, fmt.Sprintf("Simulated removing %s (the last by name); %s on them requeued.", counted(len(removed), fl.Name+" node"), counted(requeued, "running workload")), err
}

// WithBorrowingLimit returns a copy of snap in which queue may borrow
// extra more GPUs of flavor from its cohort, and a sentence saying so. It
// fails for a queue without a cohort or without a borrowing limit on the
// flavor (it may borrow without limit already).
func WithBorrowingLimit(snap *allocator.Snapshot, queue, flavor string, extra int) (*allocator.Snapshot, string, error) {
	cl := *snap.Cluster()
	cl.Queues = slices.Clone(cl.Queues)
	i := slices.IndexFunc(cl.Queues, func(q allocator.Queue) bool { return q.Name == queue })
	if i < 0 {
		return nil, "", fmt.Errorf("there is no team %s", queue)
	}
	q := &cl.Queues[i]
	quota, ok := q.Quotas[flavor]
	switch {
	case q.Cohort == "":
		return nil, "", fmt.Errorf("%s is in no cohort, so it borrows nothing", queue)
	case !ok:
		return nil, "", fmt.Errorf("%s has no %s quota", queue, flavor)
	case quota.BorrowingLimit == nil:
		return nil, "", fmt.Errorf("%s may already borrow %s without limit", queue, flavor)
	}
	limit := *quota.BorrowingLimit + extra
	quota.BorrowingLimit = &limit
	q.Quotas = maps.Clone(q.Quotas)
	q.Quotas[flavor] = quota
	sn, err := allocator.NewSnapshot(&cl, snap.Now(), snap.Workloads(), snap.Usage())
	return sn, fmt.Sprintf("Simulated %s borrowing up to %d %s GPUs (%+d).", queue, limit, flavor, extra), err
}

// mid is the middle of an estimate as a wait from now; unknown counts as
// the horizon.
func mid(e allocator.Estimate, now time.Time, horizon time.Duration) time.Duration {
	if !e.Known {
		return horizon
	}
	return e.Earliest.Add(e.Latest.Sub(e.Earliest) / 2).Sub(now)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// compareIDs orders r2 before r10.
func compareIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// counted says "1 node", "2 nodes".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
