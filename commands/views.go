package commands

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// maxRows bounds tables in chat; the rest is summarised.
const maxRows = 25

// status shows the sender's requests, or one request.
func (s *Service) status(c *call, id string) {
	if id != "" {
		r, err := s.getRequest(c, id)
		switch {
		case errors.Is(err, ErrNotFound):
			c.private(plain(fmt.Sprintf("There is no request %s. /gpu status lists yours.", id)))
			return
		case err != nil:
			s.failed(c, "reading "+id, err)
			return
		}
		reply := s.card(c, r, nil)
		for _, z := range s.openZombiesOf(c, r.ID) {
			reply.Blocks = append(reply.Blocks, section(fmt.Sprintf("Zombie check %s (open since %s): %s. Still using it?", z.ID, s.clock(z.FoundAt), z.Detail)),
				s.zombieButtons(z, subject{key: r.ID, req: &r}, false))
		}
		c.private(reply)
		return
	}
	since := c.now.Add(-24 * time.Hour)
	// Read, not changed: this person's requests only, as the cache holds
	// them.
	mine := s.readRefsOf(c, c.who.Name, func(r *records.Request) bool {
		return !r.State.Final() || r.EndedAt.After(since)
	})
	if len(mine) == 0 {
		c.private(plain("You have no open requests and none ended in the last 24h. Try /gpu request 8xh100 for 4h."))
		return
	}
	// At most maxRows rows: open requests first (they can still be acted
	// on), each group in ID order; the rest are counted by state. Sorted
	// through pointers: a person may have thousands, and records are large.
	shown := mine
	slices.SortFunc(shown, func(a, b *records.Request) int {
		if d := cmpBool(a.State.Final(), b.State.Final()); d != 0 {
			return d
		}
		return compareIDs(a.ID, b.ID)
	})
	var rest map[records.State]int
	if len(shown) > maxRows {
		rest = map[records.State]int{}
		for _, r := range shown[maxRows:] {
			rest[r.State]++
		}
		shown = shown[:maxRows]
	}
	rows := make([][]string, 0, len(shown))
	for _, r := range shown {
		rows = append(rows, []string{r.ID, size(*r, s.candidateFlavors(*r)), fmtDuration(r.Duration), r.Team, r.Priority, string(r.State), s.statusWhen(*r)})
	}
	blocks := []Block{table([]string{"ID", "Size", "For", "Team", "Priority", "State", "When"}, rows)}
	if rest != nil {
		var parts []string
		for _, st := range slices.Sorted(maps.Keys(rest)) {
			parts = append(parts, fmt.Sprintf("%d %s", rest[st], st))
		}
		blocks = append(blocks, contextBlock(fmt.Sprintf("…and %d more (%s).", len(mine)-len(shown), strings.Join(parts, ", "))))
	}
	blocks = append(blocks, contextBlock("/gpu status <id> shows one request with its buttons."))
	c.private(plain(fmt.Sprintf("%s, you have %s open or ended in the last 24h.", c.who.Name, counted(len(mine), "request")), blocks...))
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func (s *Service) statusWhen(r records.Request) string {
	switch r.State {
	case records.StateQueued:
		if why, ok := strings.CutPrefix(r.KueueSaid, "never: "); ok {
			return "will not start as it is: " + why
		}
		if r.Estimate != nil {
			return s.estimateText(r.Estimate)
		}
		return "estimating"
	case records.StateRunning:
		return "since " + s.clock(r.AdmittedAt) + ", ends " + s.clock(r.AdmittedAt.Add(r.Duration))
	case records.StateAwaitingApproval:
		return "asked " + s.clock(r.CreatedAt)
	}
	return s.clock(r.EndedAt) + suffix(": ", r.EndReason)
}

// queueView lists pending work in admission order.
func (s *Service) queueView(c *call, team, flavor string) {
	snap, err := s.snapshot(c)
	if err != nil {
		s.failed(c, "reading the cluster", err)
		return
	}
	ests := s.view().ests // the latest; a request they do not know yet shows its posted one
	var rows [][]string
	counts := map[allocator.Reason]int{}
	n := 0
	approxNote := ""
	shares := map[string]string{} // team → dominant share, with Kueue's Fair Sharing
	for _, st := range snap.Standing() {
		if st.Dominant != nil {
			shares[st.Queue] = dominantShare(st.Dominant)
		}
	}
	for _, id := range snap.Order() {
		w, _ := snap.Workload(id)
		r, err := s.getRequest(c, id)
		if err != nil {
			r = records.Request{ID: id, Team: w.Queue, GPUs: w.GPUs, Flavor: w.Flavor, Requester: "?"}
		}
		if team != "" && r.Team != team {
			continue
		}
		if flavor != "" && !slices.Contains(s.candidateFlavors(r), flavor) {
			continue
		}
		n++
		e, estimated := ests[id]
		posted := toRecord(c.now, e)
		reason, res := snap.DiagnoseResource(id)
		if !estimated {
			posted = r.Estimate
			e.Reason = reason
		}
		why, starts, says := string(e.Reason), s.estimateWindow(posted), ""
		if e.Reason != allocator.ReasonPriority {
			why = withResource(e.Reason, res)
		}
		if word, ok := s.kueueWord(c, id); ok {
			says = clip(strings.TrimPrefix(word.Plain, "Kueue "), 90)
			if word.Never {
				why, starts = "will not start", "will not start as it is"
				says = clip(word.Why, 90)
				counts[notStartable]++
			} else {
				counts[e.Reason]++
			}
		} else {
			counts[e.Reason]++
		}
		if approx := s.approximate(c, r.Team); approx != "" && !strings.HasPrefix(starts, "will not") && starts != "no estimate" {
			starts += " (approx.)"
			approxNote = approx
		}
		if len(rows) < maxRows {
			row := []string{fmt.Sprint(n), id, r.Requester, r.Team, size(r, s.candidateFlavors(r)), r.Priority, why, starts}
			if len(shares) > 0 {
				row = append(row, shares[r.Team])
			}
			if s.kueue != nil {
				row = append(row, says)
			}
			rows = append(rows, row)
		}
	}
	held, _ := s.listRequests(c, func(r records.Request) bool {
		return r.State == records.StateAwaitingApproval && (team == "" || r.Team == team) && (flavor == "" || slices.Contains(s.candidateFlavors(r), flavor))
	})
	scope := "the cluster"
	if team != "" {
		scope = team
	} else if flavor != "" {
		scope = flavor
	}
	if n == 0 && len(held) == 0 {
		c.private(plain(fmt.Sprintf("Nothing is waiting in %s: requests that fit start at once.", scope)))
		return
	}
	var blocks []Block
	if n > 0 {
		cols := []string{"#", "ID", "Who", "Team", "Size", "Priority", "Waits for", "Starts"}
		if len(shares) > 0 {
			cols = append(cols, "Team's share")
		}
		if s.kueue != nil {
			cols = append(cols, "Kueue says")
		}
		blocks = append(blocks, table(cols, rows))
		if n > len(rows) {
			blocks = append(blocks, contextBlock(fmt.Sprintf("…and %d more.", n-len(rows))))
		}
		blocks = append(blocks, section(boundSummary(counts, n)))
	}
	for _, r := range held {
		blocks = append(blocks, section(fmt.Sprintf("%s (%s, %s) awaits approval by %s; it holds no quota.", r.ID, r.Requester, size(r, s.candidateFlavors(r)), orList(s.approvers(r.Team)))))
	}
	if approxNote != "" {
		blocks = append(blocks, contextBlock("Estimates marked approx. are "+approxNote+"."))
	}
	blocks = append(blocks, contextBlock(fmt.Sprintf("Admission order: %s.", policyWords(snap.Cluster().Policy))))
	c.private(plain(fmt.Sprintf("%s waiting in %s, in admission order.", counted(n, "request"), scope), blocks...))
}

// notStartable counts, in the queue's summary, the requests Kueue cannot
// admit as they are.
const notStartable allocator.Reason = "will not start as it is"

// boundSummary says what the queue is bound by.
func boundSummary(counts map[allocator.Reason]int, n int) string {
	type kv struct {
		r allocator.Reason
		n int
	}
	var xs []kv
	for r, k := range counts {
		xs = append(xs, kv{r, k})
	}
	sort.Slice(xs, func(i, j int) bool {
		if xs[i].n != xs[j].n {
			return xs[i].n > xs[j].n
		}
		return xs[i].r < xs[j].r
	})
	parts := make([]string, len(xs))
	for i, x := range xs {
		name := string(x.r)
		if name == "" {
			name = "next cycle"
		}
		parts[i] = fmt.Sprintf("%d %s", x.n, name)
	}
	bound := "The queue is mixed."
	switch {
	case len(xs) > 0 && 2*xs[0].n > n && xs[0].r == notStartable:
		bound = "Most of it will not start as it is: Kueue cannot admit it."
	case len(xs) > 0 && 2*xs[0].n > n && xs[0].r != "":
		bound = "The queue is " + string(xs[0].r) + "-bound."
	}
	return fmt.Sprintf("Waiting for: %s. %s", strings.Join(parts, ", "), bound)
}

func policyWords(p allocator.Policy) string {
	if p.FairSharing != nil {
		return "Kueue's Fair Sharing: in each cohort the team whose dominant resource share (what it borrows, over what its cohort could lend it, divided by its weight) would be lowest goes first, within quota first; then priority, then arrival"
	}
	if p.Mode == allocator.FairSharing {
		return fmt.Sprintf("priority, then fair share (usage with a %s half-life, divided by team weight), then arrival", fmtDuration(p.HalfLife))
	}
	return "priority, then arrival (best-effort FIFO)"
}

// capacity shows per-flavor capacity and fragmentation.
func (s *Service) capacity(c *call) {
	cl, withMix, bare, err := s.capacityFacts(c)
	if err != nil {
		s.failed(c, "reading the cluster", err)
		return
	}
	var rows [][]string
	nodesOf := map[string]FlavorNodes{}
	for _, f := range s.kueueReport(c).Flavors {
		nodesOf[f.Flavor] = f
	}
	var beyond []string
	for _, f := range withMix {
		l := f.Largest
		if fn, ok := nodesOf[f.Flavor]; ok && fn.GPUs < f.Total {
			// Kueue admitted work on a flavor without a Topology beyond
			// what its nodes hold; the model keeps it on stand-in nodes.
			beyond = append(beyond, fmt.Sprintf("%s: Kueue admitted %d GPUs of work more than its nodes have (no Kueue Topology: admission by quota alone); those pods wait for nodes.", f.Flavor, f.Total-fn.GPUs))
			f.Nodes, f.Total = fn.Nodes, fn.GPUs
			f.Free = max(0, f.Total-f.Used)
		}
		rows = append(rows, []string{
			f.Flavor, fmt.Sprint(f.Nodes), fmt.Sprint(f.Total), fmt.Sprint(f.Used), fmt.Sprint(f.Free),
			fmt.Sprintf("%d / %d / %d / %d", l[allocator.LevelNone], l[allocator.LevelHost], l[allocator.LevelRack], l[allocator.LevelBlock]),
			fmt.Sprintf("%.0f GPUs (%.1f%% of all, %.1f%% of free)", f.Fragmented, f.FragPctAll, f.FragPctFree),
		})
	}
	blocks := []Block{table([]string{"Flavor", "Nodes", "GPUs", "Used", "Free", "Largest fit: any/host/rack/block", "Fragmented"}, rows)}
	blocks = append(blocks, s.capacityNotes(c, cl, bare)...)
	for _, b := range beyond {
		blocks = append(blocks, section(b))
	}
	blocks = append(blocks, contextBlock("Fragmented: free GPUs expected to be unusable by a typical request (sizes weighted by the last 14 days of requests)."))
	c.private(plain("Capacity now, per flavor.", blocks...))
}

// capacityNotes says what the table cannot: flavors that have quota but
// no nodes, GPU nodes that no flavor selects, and (on a real cluster)
// what admission there does not look at; bare is cl's capacity with no
// request mix.
func (s *Service) capacityNotes(c *call, cl *allocator.Cluster, bare []allocator.FlavorCapacity) []Block {
	var out []Block
	quota := map[string]int{}
	by := map[string][]string{}
	for _, q := range cl.Queues {
		for _, f := range q.Flavors {
			if n := q.Quotas[f].Nominal; n > 0 {
				quota[f] += n
				by[f] = append(by[f], fmt.Sprintf("%s %d", q.Name, n))
			}
		}
	}
	rep := s.kueueReport(c)
	topo := map[string]string{}
	for _, f := range rep.Flavors {
		topo[f.Flavor] = f.Topology
	}
	var elastic []string
	for _, t := range s.set.Elastic.Flavors {
		switch t.Capacity {
		case CapacitySpot:
			elastic = append(elastic, t.Flavor+" is spot capacity (its nodes may be reclaimed)")
		case CapacityProvisioned:
			elastic = append(elastic, fmt.Sprintf("%s is provisioned on demand through admission check %s (its nodes exist only while provisioned work runs)", t.Flavor, t.AdmissionCheck))
		}
	}
	if len(elastic) > 0 {
		out = append(out, section("Elastic flavors: "+strings.Join(elastic, "; ")+". Only requests switched to them (or asking for them by name) run there; /gpu help switch says how."))
	}
	for _, f := range bare {
		if f.Nodes > 0 || quota[f.Flavor] == 0 || s.set.Elastic.terms(f.Flavor).Capacity == CapacityProvisioned {
			continue
		}
		text := fmt.Sprintf("%s has no nodes, and its teams have %d GPUs of nominal quota on it (%s). Quota without nodes is a real state, an autoscaled node pool at zero for example",
			f.Flavor, quota[f.Flavor], strings.Join(by[f.Flavor], ", "))
		switch t, known := topo[f.Flavor]; {
		case !known:
			text += "; nothing starts there until nodes exist."
		case t != "":
			text += fmt.Sprintf("; Kueue's topology-aware scheduling (Topology %s) admits only onto nodes that exist, so nothing starts there until nodes are added.", t)
		default:
			text += "; the flavor has no Kueue Topology, so Kueue admits there by quota alone, and the pods wait for nodes (a cluster autoscaler adds them)."
		}
		out = append(out, section(text))
	}
	for _, u := range rep.Unmatched {
		out = append(out, section(capitalize(u)+". gpubot does not count them, and Kueue admits nothing onto them."))
	}
	return out
}

// mix is the share of recent requests by pod size.
// Reads use the mix the refresher last computed with the estimates.
func (s *Service) mix(c *call) allocator.Mix {
	if v := s.view(); !c.writing && !v.estAt.IsZero() {
		return v.mix
	}
	return s.requestMix(c)
}

// requestMix computes the share of recent requests by pod size.
func (s *Service) requestMix(c *call) allocator.Mix {
	since := c.now.Add(-MixWindow)
	return requestMixOf(s.cluster, s.readRefs(c, func(r *records.Request) bool { return r.CreatedAt.After(since) }, false))
}

// RequestMix is the share of requests by pod size (the p_k of
// fragmentation measure (a)) among recent, on cl's flavors: what /gpu
// capacity weighs fragmentation by, from the last 14 days' requests. It
// is nil for no requests.
func RequestMix(cl *allocator.Cluster, recent []records.Request) allocator.Mix {
	return requestMixOf(cl, refsTo(recent))
}

// requestMixOf is RequestMix of the requests recent points at.
func requestMixOf(cl *allocator.Cluster, recent []*records.Request) allocator.Mix {
	if len(recent) == 0 {
		return nil
	}
	gpn := map[string]int{}
	for _, f := range cl.Flavors {
		gpn[f.Name] = f.GPUsPerNode
	}
	queues := map[string][]string{}
	for _, q := range cl.Queues {
		queues[q.Name] = q.Flavors
	}
	m := allocator.Mix{}
	for _, r := range recent {
		flavors := queues[r.Team]
		if r.Flavor != "" {
			flavors = []string{r.Flavor}
		}
		per := 0
		for _, f := range flavors {
			if _, p, err := allocator.PodShape(r.GPUs, gpn[f]); err == nil {
				per = p
				break
			}
		}
		if per > 0 {
			m[per]++
		}
	}
	return m
}

// MixWindow is how far back RequestMix's requests go.
const MixWindow = 14 * 24 * time.Hour

// usage shows GPU-hours per team, fair-share standing and how good the
// estimates were.
func (s *Service) usage(c *call, team string, days int) {
	if days <= 0 {
		days = 7
	}
	from := c.now.Add(-time.Duration(days) * 24 * time.Hour)
	recs, err := s.deps.Usage.Usage(c.ctx, from, c.now)
	if err != nil {
		s.failed(c, "reading usage", err)
		return
	}
	running := s.requestsIn(c, func(rc *requestCache) map[string]bool { return rc.running }, isRunning)
	for _, r := range running {
		recs = append(recs, records.UsageRecord{Request: r.ID, Team: r.Team, Requester: r.Requester, Flavor: r.AdmittedFlavor, GPUs: r.GPUs, Start: r.AdmittedAt, End: c.now})
	}
	hours := map[string]float64{}
	people := map[string]float64{}
	total, all := 0.0, 0.0 // in scope, and across all teams
	for _, u := range recs {
		h := u.GPUHours(from, c.now)
		hours[u.Team] += h
		all += h
		if team == "" || u.Team == team {
			people[u.Requester] += h
			total += h
		}
	}
	standing, err := s.standing(c)
	if err != nil {
		s.failed(c, "reading the cluster", err)
		return
	}
	var rows [][]string
	drs := false
	for _, st := range standing {
		if team != "" && st.Queue != team {
			continue
		}
		drs = drs || st.Dominant != nil
		used, nominal, borrowed := 0, 0, 0
		for f := range st.Used {
			if fl, _ := s.flavor(f); fl.Elastic {
				continue // elastic capacity is not the team's standing
			}
			used += st.Used[f]
			borrowed += st.Borrowing[f]
		}
		for f := range st.Nominal {
			if fl, _ := s.flavor(f); !fl.Elastic {
				nominal += st.Nominal[f]
			}
		}
		share := 0.0
		if all > 0 {
			share = 100 * hours[st.Queue] / all
		}
		row := []string{st.Queue, fmt.Sprintf("%.0f", hours[st.Queue]), fmt.Sprintf("%.0f%%", share),
			fmt.Sprintf("%d / %d", used, nominal), fmt.Sprint(borrowed), fmt.Sprint(st.Pending), fmt.Sprintf("%.1f", st.Share)}
		if st.Dominant != nil {
			row = append(row, dominantShare(st.Dominant))
		}
		rows = append(rows, row)
	}
	cols := []string{"Team", "GPU-hours", "Share", "GPUs now / nominal", "Borrowed", "Pending", "Fair-share usage"}
	if drs {
		cols = append(cols, "Dominant share")
	}
	blocks := []Block{table(cols, rows)}
	if team != "" && len(people) > 0 {
		var prow [][]string
		names := make([]string, 0, len(people))
		for n := range people {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool {
			return people[names[i]] > people[names[j]] || people[names[i]] == people[names[j]] && names[i] < names[j]
		})
		for _, n := range names {
			prow = append(prow, []string{n, fmt.Sprintf("%.0f", people[n])})
		}
		blocks = append(blocks, table([]string{"Person", "GPU-hours"}, prow))
	}
	blocks = append(blocks, section(s.calibration(c, from, team)))
	blocks = append(blocks, contextBlock("Fair-share usage: GPU-hours decayed with the configured half-life, divided by the team's weight; lower goes first among equal priorities when fair sharing is on."))
	if drs {
		blocks = append(blocks, contextBlock("Dominant share (Kueue's Fair Sharing): what the team borrows beyond its nominal quota, over what its cohort could lend it, per mille of the resource where that is largest, divided by its weight; Kueue admits the team with the lowest first and preempts to even the shares."))
	}
	scope := "all teams"
	if team != "" {
		scope = team
	}
	c.private(plain(fmt.Sprintf("GPU usage over the last %d days, %s: %.0f GPU-hours.", days, scope, total), blocks...))
}

// calibration scores first estimates against actual starts since from.
func (s *Service) calibration(c *call, from time.Time, team string) string {
	var started []records.Request
	for _, r := range s.requestsIn(c, func(rc *requestCache) map[string]bool { return rc.scorable }, scorable) {
		if r.AdmittedAt.After(from) && (team == "" || r.Team == team) {
			started = append(started, r)
		}
	}
	if len(started) == 0 {
		return "Estimate accuracy: no queued request has started in this period yet."
	}
	outcomes := make([]allocator.EstimateOutcome, 0, len(started))
	for _, r := range started {
		outcomes = append(outcomes, allocator.EstimateOutcome{Earliest: r.FirstEstimate.Earliest, Latest: r.FirstEstimate.Latest, Start: r.AdmittedAt})
	}
	sc := allocator.ScoreEstimates(outcomes, time.Minute)
	return fmt.Sprintf("Estimate accuracy: %d of %d queued requests started inside their first posted range, give or take a minute (%.0f%%, aiming at %.0f%%; %.0f%% exactly); "+
		"median range %s, median error %s (90%% within %s); interval score %s (the range's width plus %.0f× how far outside it the start fell; lower is better).",
		sc.Inside, sc.N, 100*sc.Coverage, 100*(1-allocator.IntervalAlpha), 100*sc.CoverageExactly, fmtDuration(sc.MedianWidth), fmtDuration(sc.MedianAbsError),
		fmtDuration(sc.P90AbsError), fmtDuration(sc.IntervalScore), 2/allocator.IntervalAlpha)
}
