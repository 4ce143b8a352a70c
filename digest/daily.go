package digest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// daily is one day's digest: of a team, or of the cluster (team "").
type daily struct {
	team      string
	loc       *time.Location // of its days
	day, prev period         // the day, and the 7 days before it
	now       time.Time

	hours, prevHours  map[string]float64 // by team (cluster) or person (team)
	teamHours         map[string]float64 // the day's, by team, for shares
	fairShare         map[string]float64 // team → weight share
	nominal           map[string]int     // team → nominal GPUs
	dayWaits          []waitSample
	waits, prevWaits  map[string]waitStats
	counts, prevCount counts
	approvals         []records.Request // pending longer than approvalAge
	capacity          []allocator.FlavorCapacity
	frag, prevFrag    fragStats
	zombies           []records.Zombie // overlapping the day
	zombieLog         bool             // zombie sweeps run
	calib             calibration
	elastic           elasticUse
	verdict           string
	chart             *commands.Image
}

// daily gathers the digest of team for the day in loc before due's day,
// as of now.
func (e *Engine) daily(ctx context.Context, team string, loc *time.Location, due, now time.Time) (*daily, error) {
	if team != "" {
		if _, ok := e.team(team); !ok {
			return nil, fmt.Errorf("there is no team %s", team)
		}
	}
	d := &daily{team: team, loc: loc, day: days(due, loc, 1), now: now, zombieLog: e.src.Zombies != nil}
	d.prev = d.day.before(7, loc)
	from := d.prev.from
	reqs, err := e.src.Requests.ListRequests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing requests: %w", err)
	}
	use, err := e.src.Usage.Usage(ctx, from, now)
	if err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	audit, err := e.src.Audit.AuditRange(ctx, from, now.Add(time.Nanosecond))
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	samples, err := e.src.Samples.Samples(ctx, from, d.day.to)
	if err != nil {
		return nil, fmt.Errorf("reading samples: %w", err)
	}
	snap, err := e.src.Cluster.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	if d.zombieLog {
		if d.zombies, err = e.src.Zombies.Zombies(ctx, d.day.from, d.day.to); err != nil {
			return nil, fmt.Errorf("reading zombies: %w", err)
		}
		d.zombies = slices.DeleteFunc(d.zombies, func(z records.Zombie) bool { return team != "" && z.Team != team })
	}

	mine := func(r *records.Request) bool { return team == "" || r.Team == team }
	var scoped []records.Request
	for i := range reqs {
		if mine(&reqs[i]) {
			scoped = append(scoped, reqs[i])
		}
	}
	key := func(t, person string) string {
		if team == "" {
			return t
		}
		if t != team {
			return ""
		}
		return person
	}
	byTeam := func(t, _ string) string { return t }
	d.hours = gpuHours(use, reqs, now, d.day, key)
	d.prevHours = gpuHours(use, reqs, now, d.prev, key)
	delete(d.hours, "")
	delete(d.prevHours, "")
	d.teamHours = gpuHours(use, reqs, now, d.day, byTeam)
	d.fairShare, d.nominal = shares(snap.Cluster())

	d.dayWaits = waitsIn(scoped, d.day)
	d.waits = byPriority(d.dayWaits)
	d.prevWaits = byPriority(waitsIn(scoped, d.prev))
	d.counts = countIn(reqs, audit, d.day, mine)
	d.prevCount = countIn(reqs, audit, d.prev, mine)
	for _, r := range scoped {
		if r.State == records.StateAwaitingApproval && now.Sub(r.CreatedAt) >= e.approvalAge {
			d.approvals = append(d.approvals, r)
		}
	}
	slices.SortFunc(d.approvals, func(a, b records.Request) int { return a.CreatedAt.Compare(b.CreatedAt) })

	var mixed []records.Request
	for _, r := range reqs {
		if r.CreatedAt.After(now.Add(-commands.MixWindow)) {
			mixed = append(mixed, r)
		}
	}
	d.capacity = slices.DeleteFunc(snap.Capacity(commands.RequestMix(snap.Cluster(), mixed)), func(f allocator.FlavorCapacity) bool {
		_, elastic := e.elasticTerms()[f.Flavor]
		return elastic // bought on demand: not the cluster's fragmentation
	})
	var daySamples, prevSamples []records.Sample
	for _, s := range samples {
		if d.day.has(s.At) {
			daySamples = append(daySamples, s)
		} else {
			prevSamples = append(prevSamples, s)
		}
	}
	d.frag, d.prevFrag = fragmentation(daySamples), fragmentation(prevSamples)
	d.calib = calibrate(reqs, d.day, mine)
	d.elastic = e.elastic(use, reqs, now, d.day, func(t string) bool { return team == "" || t == team })
	if !d.empty() {
		d.verdict = e.verdict(ctx, now, daySamples, team, "yesterday")
		if d.chart, err = e.dailyChart(d, use, reqs, scoped); err != nil {
			e.log.Warn("drawing the digest's chart; posting without it", "err", err)
		}
	}
	return d, nil
}

// shares returns each queue's fair share (its weight over all weights)
// and nominal GPUs over all flavors.
func shares(cl *allocator.Cluster) (map[string]float64, map[string]int) {
	fair, nominal := map[string]float64{}, map[string]int{}
	total := 0.0
	for _, q := range cl.Queues {
		w := q.Weight
		if w <= 0 {
			w = 1
		}
		fair[q.Name] = w
		total += w
		for f, quota := range q.Quotas {
			if !slices.ContainsFunc(cl.Flavors, func(x allocator.Flavor) bool { return x.Name == f && x.Elastic }) {
				nominal[q.Name] += quota.Nominal // elastic capacity is not quota held
			}
		}
	}
	for q := range fair {
		fair[q] /= total
	}
	return fair, nominal
}

func byPriority(ws []waitSample) map[string]waitStats {
	groups := map[string][]waitSample{}
	for _, w := range ws {
		groups[w.req.Priority] = append(groups[w.req.Priority], w)
	}
	out := map[string]waitStats{}
	for p, g := range groups {
		out[p] = summarise(g)
	}
	return out
}

// empty reports whether nothing at all happened in the digest's scope.
func (d *daily) empty() bool {
	return sum(d.hours) == 0 && d.counts.zero() && len(d.waits) == 0 && len(d.approvals) == 0 && len(d.zombies) == 0
}

func (d *daily) scope() string {
	if d.team == "" {
		return "the cluster"
	}
	return d.team
}

// reply renders the digest; posted says it goes into a channel on its
// schedule (rather than to someone who asked).
func (d *daily) reply(e *Engine, posted bool) commands.Reply {
	date := date(d.day.from, d.loc)
	if d.empty() {
		return commands.Reply{Text: fmt.Sprintf("Daily digest for %s, %s: nothing happened — no GPUs used, no requests, nothing waiting.", d.scope(), date)}
	}
	total := sum(d.hours)
	head := fmt.Sprintf("Daily digest for %s, %s: %.0f GPU-hours, %s started", d.scope(), date, total, plural(d.counts.started, "request", "requests"))
	if st, ok := d.highWaits(e); ok {
		head += ", high-priority p95 wait " + fmtDur(st.p95)
	}
	blocks := d.usageBlocks(e)
	blocks = append(blocks, d.waitBlock(e), d.countBlock(e))
	if len(d.approvals) > 0 {
		blocks = append(blocks, d.approvalBlock(e))
	}
	blocks = append(blocks, d.fragBlock(), d.zombieBlock(), d.calibBlock())
	if b, ok := e.elasticBlock(d.elastic, e.teamNames(d.team), "yesterday"); ok {
		blocks = append(blocks, b)
	}
	blocks = append(blocks, commands.Block{Kind: commands.BlockSection, Text: "Capacity: " + d.verdict})
	blocks = append(blocks, commands.Block{Kind: commands.BlockContext, Text: "Yesterday is the calendar day in " + d.loc.String() +
		"; trends compare it with the 7 days before. Waits run from a request (or its requeue after a preemption) to its admission; each wait counts, and one still going at the end of the day counts with its length so far."})
	r := commands.Reply{Text: head + ".", Blocks: blocks, Image: d.chart}
	if !posted {
		r.Blocks = append(r.Blocks, commands.Block{Kind: commands.BlockContext, Text: "Only you see this. Digests are posted on the schedules in the config's digests."})
	}
	return r
}

// highWaits are the day's waits of high priorities together.
func (d *daily) highWaits(e *Engine) (waitStats, bool) {
	st := summarise(highOnly(e, d.dayWaits))
	return st, st.n > 0
}

// highOnly keeps the waits of high-priority requests.
func highOnly(e *Engine, ws []waitSample) []waitSample {
	high := highPriorities(e.set)
	return slices.DeleteFunc(slices.Clone(ws), func(w waitSample) bool { return !high[w.req.Priority] })
}

func (d *daily) usageBlocks(e *Engine) []commands.Block {
	keys := make([]string, 0, len(d.hours)+len(d.prevHours))
	for k := range d.hours {
		keys = append(keys, k)
	}
	for k := range d.prevHours {
		if _, ok := d.hours[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if d.hours[keys[i]] != d.hours[keys[j]] {
			return d.hours[keys[i]] > d.hours[keys[j]]
		}
		return keys[i] < keys[j]
	})
	all := sum(d.teamHours)
	hoursOfDay := d.day.hours()
	if d.team == "" {
		var rows [][]string
		for _, t := range e.set.Teams {
			if !slices.Contains(keys, t.Name) {
				keys = append(keys, t.Name)
			}
		}
		for _, k := range keys {
			share := "–"
			if all > 0 {
				share = pct(d.hours[k] / all)
			}
			ofNominal := "–"
			if n := d.nominal[k]; n > 0 {
				ofNominal = pct(d.hours[k] / (float64(n) * hoursOfDay))
			}
			rows = append(rows, []string{k, fmt.Sprintf("%.0f", d.hours[k]), fmt.Sprintf("%.0f", d.prevHours[k]/7), share, pct(d.fairShare[k]), ofNominal})
		}
		return []commands.Block{{Kind: commands.BlockTable, Table: &commands.Table{
			Columns: []string{"Team", "GPU-hours", "7 days before, a day", "Share", "Fair share", "Of nominal quota"}, Rows: rows}}}
	}
	teamTotal := d.teamHours[d.team]
	line := fmt.Sprintf("%s used %.0f GPU-hours (7 days before: %.0f a day)", d.team, teamTotal, sum(d.prevHours)/7)
	if all > 0 {
		line += fmt.Sprintf(", %s of the cluster's (fair share %s)", pct(teamTotal/all), pct(d.fairShare[d.team]))
	}
	if n := d.nominal[d.team]; n > 0 {
		line += fmt.Sprintf(", %s of its nominal quota of %d GPUs", pct(teamTotal/(float64(n)*hoursOfDay)), n)
	}
	blocks := []commands.Block{{Kind: commands.BlockSection, Text: line + "."}}
	var rows [][]string
	for _, k := range keys {
		rows = append(rows, []string{k, fmt.Sprintf("%.0f", d.hours[k]), fmt.Sprintf("%.0f", d.prevHours[k]/7)})
	}
	if len(rows) > 0 {
		blocks = append(blocks, commands.Block{Kind: commands.BlockTable, Table: &commands.Table{
			Columns: []string{"Person", "GPU-hours", "7 days before, a day"}, Rows: rows}})
	}
	return blocks
}

func (d *daily) waitBlock(e *Engine) commands.Block {
	var rows [][]string
	for i := len(e.set.Priorities) - 1; i >= 0; i-- {
		p := e.set.Priorities[i].Name
		st, ok := d.waits[p]
		prev, had := d.prevWaits[p]
		if !ok && !had {
			continue
		}
		row := []string{p, "0", "–", "–", "–", "–"}
		if ok {
			n := fmt.Sprint(st.n)
			if st.censored > 0 {
				n += fmt.Sprintf(" (%d still waiting)", st.censored)
			}
			row = []string{p, n, fmtDur(st.p50), fmtDur(st.p95), fmtDur(st.max), "–"}
		}
		if had {
			row[5] = fmtDur(prev.p95)
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return commands.Block{Kind: commands.BlockSection, Text: "Waits: no request waited for GPUs, yesterday or in the 7 days before."}
	}
	return commands.Block{Kind: commands.BlockTable, Table: &commands.Table{
		Columns: []string{"Priority", "Waits", "p50", "p95", "Max", "p95, 7 days before"}, Rows: rows}}
}

func (d *daily) countBlock(e *Engine) commands.Block {
	c, p := d.counts, d.prevCount
	per := func(n int) string { return fmt.Sprintf("%.1f", float64(n)/7) }
	text := fmt.Sprintf("Requests: %d new, %d started, %d finished, %d ran out of their requested time, %d preempted, %d denied, %d cancelled (a day in the 7 days before: %s new, %s started, %s preempted).",
		c.requested, c.started, c.finished, c.expired, c.preempted, c.denied, c.cancelled, per(p.requested), per(p.started), per(p.preempted))
	return commands.Block{Kind: commands.BlockSection, Text: text}
}

func (d *daily) approvalBlock(e *Engine) commands.Block {
	lines := []string{fmt.Sprintf("Waiting for approval for more than %s:", fmtDur(e.approvalAge))}
	for i, r := range d.approvals {
		if i == 10 {
			lines = append(lines, fmt.Sprintf("…and %d more (/gpu queue lists them).", len(d.approvals)-i))
			break
		}
		lines = append(lines, fmt.Sprintf("• %s: %s, %d GPUs for %s, asked %s (%s ago); %s can decide.",
			r.ID, r.Requester, r.GPUs, fmtDur(r.Duration), when(r.CreatedAt, d.loc), fmtDur(d.now.Sub(r.CreatedAt)), e.approvers(r.Team)))
	}
	return commands.Block{Kind: commands.BlockSection, Text: strings.Join(lines, "\n")}
}

func (d *daily) fragBlock() commands.Block {
	var now []string
	for _, f := range d.capacity {
		now = append(now, fmt.Sprintf("%s %.0f of %d free GPUs unusable by a typical request (%.1f%% of all), largest that fits %d",
			f.Flavor, f.Fragmented, f.Free, f.FragPctAll, f.Largest[allocator.LevelNone]))
	}
	text := "Fragmentation now: " + strings.Join(now, "; ") + "."
	if d.frag.samples == 0 {
		text += " The day was not sampled, so there is no average."
	} else {
		text += fmt.Sprintf(" Over the day (%d samples): %.1f%% of all GPUs on average", d.frag.samples, d.frag.pctAll)
		if d.prevFrag.samples > 0 {
			text += fmt.Sprintf(" (7 days before: %.1f%%)", d.prevFrag.pctAll)
		}
		var fits []string
		for _, f := range d.capacity {
			if r, ok := d.frag.flavors[f.Flavor]; ok {
				fits = append(fits, fmt.Sprintf("%s median %d, smallest %d", f.Flavor, r.median, r.min))
			}
		}
		if len(fits) > 0 {
			text += "; largest request that fit: " + strings.Join(fits, ", ")
		}
		text += "."
	}
	return commands.Block{Kind: commands.BlockSection, Text: text}
}

func (d *daily) zombieBlock() commands.Block {
	if !d.zombieLog {
		return commands.Block{Kind: commands.BlockSection, Text: "Zombies: zombie sweeps are not running, so idle or stuck work is not counted."}
	}
	found := 0
	outcomes := map[records.ZombieOutcome]int{}
	hours := 0.0
	for _, z := range d.zombies {
		hours += z.GPUHours(d.day.from, d.day.to)
		if d.day.has(z.FoundAt) {
			found++
			outcomes[z.Outcome]++
		}
	}
	if len(d.zombies) == 0 {
		return commands.Block{Kind: commands.BlockSection, Text: "Zombies: none found; no GPUs were held idle, stuck or past their time."}
	}
	var what []string
	for _, o := range []records.ZombieOutcome{records.ZombieOpen, records.ZombieKept, records.ZombieRecovered, records.ZombieReleasedByOwner,
		records.ZombieReleasedManually, records.ZombieAutoReleased, records.ZombieEvicted, records.ZombieFinished} {
		if n := outcomes[o]; n > 0 {
			what = append(what, fmt.Sprintf("%d %s", n, zombieWords[o]))
		}
	}
	text := fmt.Sprintf("Zombies: %d found", found)
	if len(what) > 0 {
		text += " (" + strings.Join(what, ", ") + ")"
	}
	return commands.Block{Kind: commands.BlockSection, Text: text + fmt.Sprintf("; %.0f GPU-hours held without being used.", hours)}
}

// zombieWords say what became of a zombie.
var zombieWords = map[records.ZombieOutcome]string{
	records.ZombieOpen:             "still open",
	records.ZombieKept:             "kept by their owner",
	records.ZombieRecovered:        "recovered on their own",
	records.ZombieReleasedByOwner:  "released by their owner",
	records.ZombieReleasedManually: "released by a lead or admin",
	records.ZombieAutoReleased:     "released by gpubot",
	records.ZombieEvicted:          "ended by Kueue",
	records.ZombieFinished:         "finished",
}

func (d *daily) calibBlock() commands.Block {
	c := d.calib
	if c.n == 0 {
		return commands.Block{Kind: commands.BlockSection, Text: "Estimates: no request that got a start estimate started yesterday."}
	}
	return commands.Block{Kind: commands.BlockSection, Text: fmt.Sprintf(
		"Estimates: %d of %d starts fell inside the first posted range, give or take a minute (%s; %s exactly); median error %s, median range width %s.",
		c.inside, c.n, pct(float64(c.inside)/float64(c.n)), pct(float64(c.exactly)/float64(c.n)), fmtDur(c.medianError), fmtDur(c.medianWidth))}
}
