package digest

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// Elastic capacity in the digest and the weekly report: GPU-hours and
// cost on spot and provisioned flavors by team, each team's weekly budget
// and what is left of it, and how much waiting the switches to elastic
// capacity saved.
//
// Waiting saved by a switch is the middle of the start estimate on
// reserved capacity when the request was switched, minus when it was
// admitted on the elastic flavor (never less than zero): what gpubot
// predicted it would have waited, not a measured counterfactual.

// elasticUse is the elastic part of a period, by team.
type elasticUse struct {
	hours, money map[string]float64
	saved        time.Duration // waiting saved by switches admitted in the period
	switches     int
	// weekHours and weekMoney are the budget week's so far, for what is
	// left; weekFrom is when that week began.
	weekHours, weekMoney map[string]float64
	weekFrom             time.Time
}

// elasticTerms are the priced terms of the elastic flavors, by name.
func (e *Engine) elasticTerms() map[string]commands.FlavorTerms {
	out := map[string]commands.FlavorTerms{}
	for _, t := range e.set.Elastic.Flavors {
		if t.Elastic() {
			out[t.Flavor] = t
		}
	}
	return out
}

// elastic adds up the elastic use in p of the teams keep accepts.
func (e *Engine) elastic(use []records.UsageRecord, reqs []records.Request, now time.Time, p period, keep func(team string) bool) elasticUse {
	terms := e.elasticTerms()
	u := elasticUse{hours: map[string]float64{}, money: map[string]float64{}, weekHours: map[string]float64{}, weekMoney: map[string]float64{}}
	if len(terms) == 0 {
		return u
	}
	u.weekFrom = weekStart(now, e.set.Location, e.set.Elastic.WeekStart)
	add := func(team, flavor string, gpus int, start, end time.Time) {
		t, ok := terms[flavor]
		if !ok || !keep(team) {
			return
		}
		r := records.UsageRecord{GPUs: gpus, Start: start, End: end}
		h := r.GPUHours(p.from, p.to)
		u.hours[team] += h
		u.money[team] += h * t.PricePerGPUHour
		w := r.GPUHours(u.weekFrom, now)
		u.weekHours[team] += w
		u.weekMoney[team] += w * t.PricePerGPUHour
	}
	for _, x := range use {
		add(x.Team, x.Flavor, x.GPUs, x.Start, x.End)
	}
	for _, r := range reqs {
		if r.State == records.StateRunning && !r.AdmittedAt.IsZero() {
			add(r.Team, r.AdmittedFlavor, r.GPUs, r.AdmittedAt, now)
		}
		if r.Elastic == nil || r.Elastic.Reserved == nil || !r.Elastic.Reserved.Known || !keep(r.Team) {
			continue
		}
		for _, w := range r.Waits {
			if w.To.Before(r.Elastic.At) || !p.has(w.To) {
				continue
			}
			est := r.Elastic.Reserved
			mid := est.Earliest.Add(est.Latest.Sub(est.Earliest) / 2)
			u.saved += max(0, mid.Sub(w.To))
			u.switches++
			break
		}
	}
	return u
}

// weekStart is the start of the budget week that now is in.
func weekStart(now time.Time, loc *time.Location, first time.Weekday) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	t := now.In(loc)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	return day.AddDate(0, 0, -((int(day.Weekday()) - int(first) + 7) % 7))
}

// elasticBlock is the digest's or report's section on elastic capacity,
// or false when no flavor is elastic or nothing was used or saved.
func (e *Engine) elasticBlock(u elasticUse, teams []string, what string) (commands.Block, bool) {
	if len(e.elasticTerms()) == 0 {
		return commands.Block{}, false
	}
	var parts []string
	for _, t := range teams {
		b, budgeted := e.set.Elastic.Budgets[t]
		if u.hours[t] == 0 && !budgeted {
			continue
		}
		part := fmt.Sprintf("%s %.0f GPU-hours", t, u.hours[t])
		if u.money[t] > 0 {
			part += " ≈ " + e.money(u.money[t])
		}
		switch {
		case budgeted && b.Money > 0:
			part += fmt.Sprintf(" (budget %s left of %s this week)", e.money(math.Max(0, b.Money-u.weekMoney[t])), e.money(b.Money))
		case budgeted && b.GPUHours > 0:
			part += fmt.Sprintf(" (budget %.0f of %.0f GPU-hours left this week)", math.Max(0, b.GPUHours-u.weekHours[t]), b.GPUHours)
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 && u.switches == 0 {
		return commands.Block{}, false
	}
	text := "Elastic capacity " + what + ": " + strings.Join(parts, "; ")
	if len(parts) == 0 {
		text = "Elastic capacity " + what + ": none used"
	}
	if u.switches > 0 {
		text += fmt.Sprintf(". Waiting saved ≈ %s by %s to spot or provisioned capacity (against their reserved estimates)", fmtDur(u.saved), plural(u.switches, "switch", "switches"))
	}
	return commands.Block{Kind: commands.BlockSection, Text: text + "."}, true
}

// money writes an amount with the configured currency.
func (e *Engine) money(v float64) string {
	cur := e.set.Elastic.Currency
	if cur == "" {
		cur = "$"
	}
	n := fmt.Sprint(int64(math.Round(v)))
	var b strings.Builder
	for i, d := range n {
		if i > 0 && (len(n)-i)%3 == 0 && n[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if len(cur) > 1 {
		return b.String() + " " + cur
	}
	return cur + b.String()
}

// teamNames are the settings' teams, or just team.
func (e *Engine) teamNames(team string) []string {
	if team != "" {
		return []string{team}
	}
	var out []string
	for _, t := range e.set.Teams {
		out = append(out, t.Name)
	}
	return slices.Clip(out)
}
