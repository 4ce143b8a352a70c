package commands

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// The elastic offer: when a queued request would wait on reserved
// capacity for longer than ElasticSettings.OfferAfter, or could start
// only by preempting others, its card and the reply to its requester list
// the team's spot and provisioned flavors side by side, each with its own
// start estimate and cost. An option the request may take has a Switch
// button; one it may not (over the team's weekly budget, longer than the
// flavor's maximum run time, no quota left) is shown as text with the
// reason and no button, in Slack and in the console alike: Slack cannot
// grey a button out, and a button that only says "no" invites pressing.

// option is one elastic flavor offered to a request.
type option struct {
	terms FlavorTerms
	// start says when it would start: "now", "in about 20m (…)".
	start string
	// startAt is the middle of the start estimate (zero when unknown).
	startAt time.Time
	// gpuHours and money are what running it for its duration costs.
	gpuHours, money float64
	// blocked says why it cannot be taken, or "".
	blocked string
	// approval: taking it needs a lead's approval (for who asked).
	approval bool
}

// offerDue reports whether r, queued with the posted estimate, should be
// offered elastic capacity: it asks for reserved capacity, its team has
// an elastic flavor, and it waits long (the middle of its estimate is
// later than OfferAfter, or there is no estimate within the horizon) or
// can start only by preempting others.
func (s *Service) offerDue(c *call, snap *allocator.Snapshot, r records.Request, posted *records.Estimate) bool {
	if r.State != records.StateQueued || s.set.Elastic.terms(r.Flavor).Elastic() || len(s.elasticFlavors(r.Team)) == 0 {
		return false
	}
	if posted == nil || !posted.Known {
		return posted != nil
	}
	after := s.set.Elastic.OfferAfter
	if after <= 0 {
		after = DefaultOfferAfter
	}
	if mid := posted.Earliest.Add(posted.Latest.Sub(posted.Earliest) / 2); mid.Sub(c.now) > after {
		return true
	}
	if snap == nil {
		return false
	}
	w, ok := snap.Workload(r.ID)
	if !ok || w.Admission != nil {
		return false
	}
	if _, why := snap.Fit(w); why == allocator.ReasonNone {
		return false
	}
	victims, _, ok := snap.ProposeVictims(w)
	return ok && len(victims) > 0
}

// elasticFlavors are the spot and provisioned flavors team has quota on,
// in the team's order.
func (s *Service) elasticFlavors(team string) []FlavorTerms {
	q, _ := s.queue(team)
	var out []FlavorTerms
	for _, f := range q.Flavors {
		if t := s.set.Elastic.terms(f); t.Elastic() {
			out = append(out, t)
		}
	}
	return out
}

// options works out each elastic flavor's start and cost for r, and what
// stands in its way, for who.
func (s *Service) options(c *call, snap *allocator.Snapshot, r records.Request, who *Person) []option {
	var out []option
	spend := s.weekSpend(c, r.Team, r.ID)
	for _, t := range s.elasticFlavors(r.Team) {
		o := option{terms: t, gpuHours: float64(r.GPUs) * r.Duration.Hours()}
		o.money = o.gpuHours * t.PricePerGPUHour
		s.optionStart(c, snap, r, &o)
		switch {
		case t.MaxRunTime > 0 && r.Duration > t.MaxRunTime:
			o.blocked = fmt.Sprintf("runs at most %s and this asks for %s", fmtDuration(t.MaxRunTime), fmtDuration(r.Duration))
		case o.blocked != "":
		default:
			o.blocked = s.overBudget(r.Team, spend, o)
		}
		rule := s.set.Elastic.ApprovalAboveGPUs
		o.approval = rule > 0 && r.GPUs > rule && (who == nil || !s.canApprove(who, r.Team))
		out = append(out, o)
	}
	return out
}

// optionStart estimates when r would start on o's flavor: spot by the
// allocator (the pool's nodes exist), provisioned by how long the cluster
// took to provision lately, once quota allows.
func (s *Service) optionStart(c *call, snap *allocator.Snapshot, r records.Request, o *option) {
	if snap == nil {
		o.start = "start unknown"
		return
	}
	w := s.workload(r)
	w.ID, w.Flavor, w.Created = r.ID+"~"+o.terms.Flavor, o.terms.Flavor, c.now
	empty, err := c.bare.of(s, snap)
	if err != nil || !takes(empty, w) {
		o.blocked = fmt.Sprintf("%s's queue in the cluster has no %s", r.Team, o.terms.Flavor)
		return
	}
	switch _, never := empty.Fit(w); {
	case never == allocator.ReasonQuota || never == allocator.ReasonCohort:
		o.blocked = fmt.Sprintf("more than %s may use of %s even with borrowing", r.Team, o.terms.Flavor)
		return
	case never == allocator.ReasonTopology && o.terms.Capacity == CapacitySpot:
		o.blocked = fmt.Sprintf("no one %s of %s nodes holds %d GPUs", r.Topology, o.terms.Flavor, r.GPUs)
		return
	case never != allocator.ReasonNone && o.terms.Capacity == CapacitySpot:
		o.blocked = fmt.Sprintf("the %s nodes have fewer than %d GPUs in all", o.terms.Flavor, r.GPUs)
		return
	}
	if o.terms.Capacity == CapacityProvisioned {
		// Fit leaves snap as it is and needs no copy with w in it (a copy
		// of 13 000 workloads per request command and flavor otherwise).
		_, why := snap.Fit(w)
		if why == allocator.ReasonQuota || why == allocator.ReasonCohort {
			o.blocked = fmt.Sprintf("%s's %s quota is in use", r.Team, o.terms.Flavor)
			return
		}
		typical, text := s.provisioningTime(c, o.terms)
		o.start, o.startAt = text, c.now.Add(typical)
		return
	}
	if got, ok := c.spot[w.ID]; ok {
		o.start, o.startAt, o.blocked = got.start, got.startAt, got.blocked
		return
	}
	s.spotStart(c, snap, w, o)
	if c.spot == nil {
		c.spot = map[string]option{}
	}
	c.spot[w.ID] = *o
}

// spotStart is when w, r on a spot flavor, would start: a scheduling
// cycle and an estimate on a copy of snap with w in it. The copy is the
// call's, kept from one simulation to the next while each admits only its
// own w, which ScheduleWith's undo then takes out again: a refresh's
// offers on many cards make one copy of the cluster, not one each.
func (s *Service) spotStart(c *call, snap *allocator.Snapshot, w allocator.Workload, o *option) {
	s.spotSims.Add(1)
	sim := c.whatIf.of(s, snap)
	events, undo, err := sim.ScheduleWith(w)
	if err != nil {
		o.blocked = fmt.Sprintf("%s's queue in the cluster has no %s", w.Queue, w.Flavor)
		return
	}
	if undo != nil {
		defer undo()
	} else {
		c.whatIf = whatIfCopy{} // it admitted or preempted others: not reusable
	}
	for _, ev := range events {
		if ev.Kind == allocator.EventAdmitted && ev.ID == w.ID {
			o.start, o.startAt = "now", c.now
			return
		}
	}
	e := allocator.EstimateFor(sim, w.ID, s.viewOptions(c))
	if !e.Known {
		o.start = fmt.Sprintf("no start within %s", fmtDuration(s.horizon))
		return
	}
	o.start = s.window(e.Earliest, e.Latest)
	o.startAt = e.Earliest.Add(e.Latest.Sub(e.Earliest) / 2)
}

// bareCluster is an empty snapshot of one cluster at one time, made once
// a call: whether a flavor takes a request (Add, undone at once) and
// whether the request could ever fit there (Fit on the empty cluster)
// read nothing else, and a refresh asks both for every card it posts,
// each of which would otherwise copy and index the whole cluster twice.
type bareCluster struct {
	c    *allocator.Cluster
	at   time.Time
	snap *allocator.Snapshot
}

// of is the empty snapshot of snap's cluster at snap's time.
func (b *bareCluster) of(s *Service, snap *allocator.Snapshot) (*allocator.Snapshot, error) {
	if b.snap == nil || b.c != snap.Cluster() || !b.at.Equal(snap.Now()) {
		s.bares.Add(1)
		empty, err := allocator.NewSnapshot(snap.Cluster(), snap.Now(), nil, nil)
		if err != nil {
			return nil, err
		}
		b.c, b.at, b.snap = snap.Cluster(), snap.Now(), empty
	}
	return b.snap, nil
}

// takes reports whether snap takes w (its queue and flavor exist and
// the request has a shape there), leaving snap as it was.
func takes(snap *allocator.Snapshot, w allocator.Workload) bool {
	undo, err := snap.Add(w)
	if err != nil {
		return false
	}
	undo()
	return true
}

// whatIfCopy is a call's copy of one snapshot for what-ifs, kept as long
// as each what-if puts it back as it was (ScheduleWith's undo). The
// snapshot it copies is one the service never changes (a view's, a
// write's or a refresh's: only copies of them are changed), so the copy
// stays a copy of it.
type whatIfCopy struct {
	base, sim *allocator.Snapshot
}

// of is the copy of snap, made if the one kept is not of snap.
func (w *whatIfCopy) of(s *Service, snap *allocator.Snapshot) *allocator.Snapshot {
	if w.base != snap || w.sim == nil {
		w.base, w.sim = snap, s.clone(snap)
	}
	return w.sim
}

// prepareOffer works out r's starts on its team's spot flavors ahead, for
// the card and the reply built later in the call: the caller runs it
// outside the write section (the simulations copy the whole cluster).
func (s *Service) prepareOffer(c *call, snap *allocator.Snapshot, r records.Request) {
	if snap == nil || s.set.Elastic.terms(r.Flavor).Elastic() {
		return
	}
	for _, t := range s.elasticFlavors(r.Team) {
		if t.Capacity == CapacitySpot {
			o := option{terms: t}
			s.optionStart(c, snap, r, &o)
		}
	}
}

// provisioningLearned is how many recent provisionings the estimate of a
// provisioned flavor's start looks at.
const provisioningLearned = 20

// provisioningTime is how long provisioning terms' flavor typically takes:
// the median of the last provisionings the cluster did (asked → ready),
// or the configured prior before there are any; and the words for it.
func (s *Service) provisioningTime(c *call, t FlavorTerms) (time.Duration, string) {
	done, err := s.listElastic(c, func(r records.Request) bool {
		_, ok := r.Elastic.ProvisioningTime()
		return ok && (r.Flavor == t.Flavor || r.AdmittedFlavor == t.Flavor)
	})
	if err != nil {
		s.log.Error("listing provisioned requests", "err", err)
	}
	slices.SortFunc(done, func(a, b records.Request) int { return b.Elastic.Provisioned.Compare(a.Elastic.Provisioned) })
	if len(done) > provisioningLearned {
		done = done[:provisioningLearned]
	}
	prior := t.ProvisioningPrior
	if prior <= 0 {
		prior = DefaultProvisioningPrior
	}
	if len(done) == 0 {
		return prior, fmt.Sprintf("in about %s (assumed: no provisioning seen yet)", fmtDuration(roundMinute(prior)))
	}
	ds := make([]time.Duration, len(done))
	for i, r := range done {
		ds[i], _ = r.Elastic.ProvisioningTime()
	}
	slices.Sort(ds)
	mid := ds[len(ds)/2]
	what := "the last provisioning"
	if len(ds) > 1 {
		what = fmt.Sprintf("%d recent provisionings, %s–%s", len(ds), fmtDuration(roundMinute(ds[0])), fmtDuration(roundMinute(ds[len(ds)-1])))
	}
	return mid, fmt.Sprintf("in about %s (from %s)", fmtDuration(roundMinute(mid)), what)
}

func roundMinute(d time.Duration) time.Duration {
	return max(time.Minute, d.Round(time.Minute))
}

// spend is a team's elastic use in the current budget week.
type spend struct {
	gpuHours, money float64
	// committed is what admitted and queued elastic work of the team will
	// still use if it runs its requested time.
	committedHours, committedMoney float64
}

// weekSpend adds up team's elastic GPU-hours and money this budget week:
// finished use from the usage log, plus running and queued elastic work
// for its requested time (so that two switches cannot both spend the
// same budget). skip is left out (the request being offered).
func (s *Service) weekSpend(c *call, team, skip string) spend {
	var sp spend
	from := s.weekStart(c.now)
	used, err := s.deps.Usage.Usage(c.ctx, from, c.now)
	if err != nil {
		s.log.Error("reading usage for the elastic budget", "team", team, "err", err)
	}
	for _, u := range used {
		t := s.set.Elastic.terms(u.Flavor)
		if u.Team != team || !t.Elastic() {
			continue
		}
		h := u.GPUHours(from, c.now)
		sp.gpuHours += h
		sp.money += h * t.PricePerGPUHour
	}
	open, err := s.listElastic(c, func(r records.Request) bool {
		return r.Team == team && r.ID != skip && (r.State == records.StateRunning || r.State == records.StateQueued) && s.set.Elastic.terms(r.Flavor).Elastic()
	})
	if err != nil {
		s.log.Error("listing elastic requests for the budget", "team", team, "err", err)
	}
	for _, r := range open {
		t := s.set.Elastic.terms(r.Flavor)
		left := r.Duration
		if r.State == records.StateRunning {
			start := r.AdmittedAt
			if start.Before(from) {
				start = from
			}
			ran := c.now.Sub(start)
			sp.gpuHours += float64(r.GPUs) * ran.Hours()
			sp.money += float64(r.GPUs) * ran.Hours() * t.PricePerGPUHour
			left = r.AdmittedAt.Add(r.Duration).Sub(c.now)
		}
		h := float64(r.GPUs) * max(0, left.Hours())
		sp.committedHours += h
		sp.committedMoney += h * t.PricePerGPUHour
	}
	return sp
}

// weekStart is the start of the budget week that now is in.
func (s *Service) weekStart(now time.Time) time.Time {
	t := now.In(s.set.Location)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, s.set.Location)
	back := (int(day.Weekday()) - int(s.set.Elastic.WeekStart) + 7) % 7
	return day.AddDate(0, 0, -back)
}

// overBudget says why o would take team over its weekly budget, or "".
func (s *Service) overBudget(team string, sp spend, o option) string {
	b, ok := s.set.Elastic.Budgets[team]
	if !ok {
		return ""
	}
	switch {
	case b.Money > 0:
		if sp.money+sp.committedMoney+o.money > b.Money {
			return fmt.Sprintf("over %s's elastic budget: %s of %s a week used or committed, this needs %s",
				team, s.money(sp.money+sp.committedMoney), s.money(b.Money), s.money(o.money))
		}
	case b.GPUHours > 0:
		if sp.gpuHours+sp.committedHours+o.gpuHours > b.GPUHours {
			return fmt.Sprintf("over %s's elastic budget: %.0f of %.0f GPU-hours a week used or committed, this needs %.0f",
				team, sp.gpuHours+sp.committedHours, b.GPUHours, o.gpuHours)
		}
	}
	return ""
}

// money writes an amount with the configured currency: "$1,234".
func (s *Service) money(v float64) string {
	cur := s.set.Elastic.Currency
	if cur == "" {
		cur = "$"
	}
	n := int64(math.Round(v))
	digits := fmt.Sprint(n)
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 && digits[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if len(cur) > 1 {
		return b.String() + " " + cur
	}
	return cur + b.String()
}

// cost is an option's cost in words: "≈ $1,229 (384 GPU-hours)".
func (s *Service) cost(o option) string {
	if o.terms.PricePerGPUHour > 0 {
		return fmt.Sprintf("≈ %s (%.0f GPU-hours)", s.money(o.money), o.gpuHours)
	}
	return fmt.Sprintf("%.0f GPU-hours (no price set)", o.gpuHours)
}

// capacityWords names a capacity kind for people.
func capacityWords(t FlavorTerms) string {
	if t.Capacity == CapacitySpot {
		return "spot"
	}
	return "provisioned"
}

// optionText is one option as the offer lists it: "h100-spot (spot):
// now, may be reclaimed, ≈ $410 (128 GPU-hours)".
func (s *Service) optionText(o option) string {
	var parts []string
	if o.start != "" { // an option blocked before its start was worked out has none
		parts = append(parts, o.start)
	}
	if o.terms.Capacity == CapacitySpot {
		parts = append(parts, "may be reclaimed")
	}
	parts = append(parts, s.cost(o))
	if o.terms.MaxRunTime > 0 {
		parts = append(parts, "runs at most "+fmtDuration(o.terms.MaxRunTime))
	}
	text := fmt.Sprintf("%s (%s): %s", o.terms.Flavor, capacityWords(o.terms), strings.Join(parts, ", "))
	if o.blocked != "" {
		text += " — not available: " + o.blocked
	} else if o.approval {
		text += fmt.Sprintf(" — more than %d GPUs: a lead approves the switch", s.set.Elastic.ApprovalAboveGPUs)
	}
	return text
}

// offerBlocks are the offer's blocks on r's card: the options side by
// side with the reserved estimate, and a Switch button for each option
// that may be taken.
func (s *Service) offerBlocks(c *call, snap *allocator.Snapshot, r records.Request, posted *records.Estimate) []Block {
	if !s.offerDue(c, snap, r, posted) {
		return nil
	}
	opts := s.options(c, snap, r, nil)
	lines := []string{"reserved: " + s.reservedWords(posted)}
	var buttons []Button
	for _, o := range opts {
		lines = append(lines, s.optionText(o))
		if o.blocked == "" {
			buttons = append(buttons, Button{Label: "Switch to " + o.terms.Flavor, Action: Action{Name: VerbSwitch, Request: r.ID, Arg: o.terms.Flavor}})
		}
	}
	out := []Block{section("Sooner on elastic capacity:\n" + strings.Join(lines, "\n"))}
	if len(buttons) > 0 {
		out = append(out, actions(buttons...))
	}
	return out
}

// offerLine is the offer in one sentence, as who would be told it
// (whether a switch would need someone else's approval).
func (s *Service) offerLine(c *call, snap *allocator.Snapshot, r records.Request, posted *records.Estimate, who *Person) string {
	if !s.offerDue(c, snap, r, posted) {
		return ""
	}
	parts := []string{"reserved: " + s.reservedWords(posted)}
	var take []string
	for _, o := range s.options(c, snap, r, who) {
		parts = append(parts, s.optionText(o))
		if o.blocked == "" {
			take = append(take, fmt.Sprintf("/gpu switch %s %s", r.ID, o.terms.Flavor))
		}
	}
	line := "Sooner on elastic capacity: " + strings.Join(parts, " · ") + "."
	if len(take) > 0 {
		line += " Switch with the card's buttons or " + orList(take) + "."
	}
	return line
}

// reservedWords is the reserved estimate for the offer: "starts in 3h–5h (…)".
func (s *Service) reservedWords(e *records.Estimate) string {
	if e == nil {
		return "no estimate yet"
	}
	return s.estimateText(e)
}
