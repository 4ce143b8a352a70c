package digest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// The weekly success report: the four numbers the teams that replaced
// Slack negotiation with a queue judged it by, this week against last
// week and against gpubot's first week.

// Thresholds of the manual interventions.
const (
	// slowApproval: an approval given later than this after the request
	// is one the policy should have made unnecessary.
	slowApproval = time.Hour
	// longCancel: a request cancelled after waiting longer than this was
	// given up on.
	longCancel = 24 * time.Hour
)

// week is one week's numbers.
type week struct {
	p period
	// Manual interventions.
	adminPreemptions, manualReleases, slowApprovals, longCancels int
	// What gpubot did automatically instead.
	autoPreemptions, autoReleases, buttonApprovals int
	high                                           waitStats
	frag                                           fragStats
	zombieHours                                    float64
	zombieLog                                      bool
	elastic                                        elasticUse
}

func (w week) interventions() int {
	return w.adminPreemptions + w.manualReleases + w.slowApprovals + w.longCancels
}

type weekly struct {
	loc               *time.Location // of its days
	this, last, first week
	firstIsThis       bool // gpubot's first week is this week (or later)
	verdict           string
}

// weekly gathers the report for the 7 days in loc before due's day, as
// of now.
func (e *Engine) weekly(ctx context.Context, loc *time.Location, due, now time.Time) (*weekly, error) {
	this := days(due, loc, 7)
	w := &weekly{loc: loc}
	firstAt := this.from
	switch fa, err := e.src.Audit.FirstAudit(ctx); {
	case err == nil:
		firstAt = fa.At
	default:
		// An empty audit log: gpubot has done nothing yet.
		e.log.Debug("no first audit entry; the first week is this week", "err", err)
	}
	first := period{from: midnight(firstAt, loc), to: midnight(firstAt, loc).AddDate(0, 0, 7)}
	w.firstIsThis = !first.from.Before(this.from.AddDate(0, 0, -7))
	reqs, err := e.src.Requests.ListRequests(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing requests: %w", err)
	}
	var errs []error
	get := func(p period) week {
		wk, err := e.week(ctx, p, reqs, now)
		errs = append(errs, err)
		return wk
	}
	w.this = get(this)
	w.last = get(this.before(7, loc))
	if !w.firstIsThis {
		w.first = get(first)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	samples, err := e.src.Samples.Samples(ctx, this.from, this.to)
	if err != nil {
		return nil, fmt.Errorf("reading samples: %w", err)
	}
	w.verdict = e.verdict(ctx, now, samples, "", "this week")
	return w, nil
}

// week computes one week's numbers.
func (e *Engine) week(ctx context.Context, p period, reqs []records.Request, now time.Time) (week, error) {
	w := week{p: p, zombieLog: e.src.Zombies != nil}
	audit, err := e.src.Audit.AuditRange(ctx, p.from, p.to)
	if err != nil {
		return w, fmt.Errorf("reading the audit log of the week of %s: %w", date(p.from, time.UTC), err)
	}
	byID := map[string]*records.Request{}
	for i := range reqs {
		byID[reqs[i].ID] = &reqs[i]
	}
	for _, a := range audit {
		if a.Outcome != "ok" {
			continue
		}
		switch a.Action {
		case "preempt":
			w.adminPreemptions++
		case "preempted":
			if a.Actor == "gpubot" {
				w.autoPreemptions++
			}
		case "approve":
			if r, ok := byID[a.Target]; ok && a.At.Sub(r.CreatedAt) > slowApproval {
				w.slowApprovals++
			}
			if a.Via == "button" {
				w.buttonApprovals++
			}
		}
	}
	for i := range reqs {
		r := &reqs[i]
		if r.State == records.StateCancelled && p.has(r.EndedAt) && r.EndedAt.Sub(r.CreatedAt) > longCancel {
			w.longCancels++
		}
	}
	high := highPriorities(e.set)
	var hw []waitSample
	for _, ws := range waitsIn(reqs, p) {
		if high[ws.req.Priority] {
			hw = append(hw, ws)
		}
	}
	w.high = summarise(hw)
	samples, err := e.src.Samples.Samples(ctx, p.from, p.to)
	if err != nil {
		return w, fmt.Errorf("reading samples of the week of %s: %w", date(p.from, time.UTC), err)
	}
	w.frag = fragmentation(samples)
	if len(e.elasticTerms()) > 0 {
		use, err := e.src.Usage.Usage(ctx, p.from, now)
		if err != nil {
			return w, fmt.Errorf("reading usage of the week of %s: %w", date(p.from, time.UTC), err)
		}
		w.elastic = e.elastic(use, reqs, now, p, func(string) bool { return true })
	}
	if w.zombieLog {
		zs, err := e.src.Zombies.Zombies(ctx, p.from, p.to)
		if err != nil {
			return w, fmt.Errorf("reading zombies of the week of %s: %w", date(p.from, time.UTC), err)
		}
		for _, z := range zs {
			w.zombieHours += z.GPUHours(p.from, p.to)
			if p.has(z.ResolvedAt) {
				switch z.Outcome {
				case records.ZombieReleasedManually:
					w.manualReleases++
				case records.ZombieAutoReleased:
					w.autoReleases++
				}
			}
		}
	}
	return w, nil
}

func (w *weekly) reply(e *Engine) commands.Reply {
	span := func(p period) string { return date(p.from, w.loc) + "–" + date(p.to.Add(-time.Nanosecond), w.loc) }
	head := fmt.Sprintf("Weekly report, %s: %d manual interventions (last week %d", span(w.this.p), w.this.interventions(), w.last.interventions())
	if !w.firstIsThis {
		head += fmt.Sprintf(", first week %d", w.first.interventions())
	}
	head += ")"
	if w.this.high.n == 0 {
		head += ", no high-priority waits."
	} else {
		head += ", high-priority p95 wait " + waitCell(w.this.high) + "."
	}
	cols := []string{"", "This week", "Last week"}
	weeks := []week{w.this, w.last}
	if !w.firstIsThis {
		cols = append(cols, "First week ("+date(w.first.p.from, w.loc)+")")
		weeks = append(weeks, w.first)
	}
	row := func(name string, cell func(week) string) []string {
		out := []string{name}
		for _, wk := range weeks {
			out = append(out, cell(wk))
		}
		return out
	}
	n := func(f func(week) int) func(week) string { return func(wk week) string { return fmt.Sprint(f(wk)) } }
	zombie := func(f func(week) string) func(week) string {
		return func(wk week) string {
			if !wk.zombieLog {
				return "not swept"
			}
			return f(wk)
		}
	}
	rows := [][]string{
		row("Manual interventions", n(week.interventions)),
		row("  admin preemptions", n(func(wk week) int { return wk.adminPreemptions })),
		row("  zombies released by a lead or admin", zombie(n(func(wk week) int { return wk.manualReleases }))),
		row(fmt.Sprintf("  approvals after more than %s", fmtDur(slowApproval)), n(func(wk week) int { return wk.slowApprovals })),
		row(fmt.Sprintf("  cancelled after waiting over %s", fmtDur(longCancel)), n(func(wk week) int { return wk.longCancels })),
		row("High-priority p95 wait", func(wk week) string { return waitCell(wk.high) }),
		row("Fragmentation, % of all GPUs", func(wk week) string {
			if wk.frag.samples == 0 {
				return "not sampled"
			}
			return fmt.Sprintf("%.1f%%", wk.frag.pctAll)
		}),
		row("Zombie GPU-hours", zombie(func(wk week) string { return fmt.Sprintf("%.0f", wk.zombieHours) })),
	}
	auto := fmt.Sprintf("Done automatically instead, this week: %s (Kueue's policy, with the victims requeued and told), %s, %s.",
		plural(w.this.autoPreemptions, "automatic preemption", "automatic preemptions"),
		plural(w.this.autoReleases, "zombie released by gpubot", "zombies released by gpubot"),
		plural(w.this.buttonApprovals, "approval by button", "approvals by button"))
	blocks := []commands.Block{
		{Kind: commands.BlockTable, Table: &commands.Table{Columns: cols, Rows: rows}},
		{Kind: commands.BlockSection, Text: auto},
	}
	if b, ok := e.elasticBlock(w.this.elastic, e.teamNames(""), "this week"); ok {
		blocks = append(blocks, b)
	}
	blocks = append(blocks, []commands.Block{
		{Kind: commands.BlockSection, Text: "Capacity: " + w.verdict},
		{Kind: commands.BlockContext, Text: fmt.Sprintf("Manual interventions are human actions the policy should have made unnecessary: admin preemptions (/gpu preempt), zombies released by a lead or admin, approvals given more than %s after the request, and requests cancelled after waiting more than %s. High priority: %s. Waits run from request (or requeue) to admission, each wait counted. Fragmentation: free GPUs a typical request cannot use (measure (a)), averaged over the week's samples. Weeks are the 7 calendar days before the report's day.",
			fmtDur(slowApproval), fmtDur(longCancel), e.highWords())},
	}...)
	if w.firstIsThis {
		blocks = append(blocks, commands.Block{Kind: commands.BlockContext, Text: "gpubot's first week is this week or last week, so there is no first week to compare with yet."})
	}
	return commands.Reply{Text: head, Blocks: blocks}
}

// waitCell shows a week's wait statistic.
func waitCell(st waitStats) string {
	if st.n == 0 {
		return "none waited"
	}
	s := fmtDur(st.p95) + " (" + plural(st.n, "wait", "waits")
	if st.censored > 0 {
		s += fmt.Sprintf(", %d still waiting", st.censored)
	}
	return s + ")"
}

// highWords names the high priorities: "high and urgent".
func (e *Engine) highWords() string {
	high := highPriorities(e.set)
	var names []string
	for _, p := range e.set.Priorities {
		if high[p.Name] {
			names = append(names, p.Name)
		}
	}
	switch len(names) {
	case 0:
		return "none"
	case 1:
		return names[0]
	}
	s := names[0]
	for _, n := range names[1 : len(names)-1] {
		s += ", " + n
	}
	return s + " and " + names[len(names)-1]
}
