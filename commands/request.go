package commands

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// request handles /gpu request: validate, decide, persist, then act.
func (s *Service) request(c *call, spec RequestSpec) {
	r, problem := s.draft(c.who, spec, c.now)
	if problem != "" {
		s.audit(c, c.who.Name, "request", "", "invalid", problem)
		c.private(plain(problem, contextBlock("Example: "+s.requestExample(c.who))))
		return
	}
	// Deciding reads the cluster's time and quotas (never); only the
	// borrowing rule fits r on it (a copy of its own, then).
	snap, err := s.readSnapshot(c)
	if err != nil {
		s.failed(c, "reading the cluster", err)
		return
	}
	if why := s.elasticProblem(c, r); why != "" {
		s.audit(c, c.who.Name, "request", "", "invalid", why)
		c.private(plain(why))
		return
	}
	if why := s.never(c, snap, r, true); why != "" {
		s.audit(c, c.who.Name, "request", "", "invalid", why)
		c.private(plain(why))
		return
	}
	id, err := s.deps.IDs.NextRequestID(c.ctx)
	if err != nil {
		s.failed(c, "saving your request", err)
		return
	}
	r.ID = id
	r.Channel = s.channelOf(r.Team)
	if s.set.Approval.Borrowing {
		if snap, err = s.snapshot(c); err != nil {
			s.failed(c, "reading the cluster", err)
			return
		}
	}
	r.Approval = s.approvalNeeds(snap, r)
	detail := describe(r)
	if len(r.Approval) > 0 && !s.canApprove(c.who, r.Team) {
		r.State = records.StateAwaitingApproval
		if err := s.putRequest(c, r); err != nil {
			s.failed(c, "saving your request", err)
			return
		}
		s.audit(c, c.who.Name, "request", r.ID, "ok", detail+"; needs approval: "+strings.Join(r.Approval, ", "))
		c.emit(Output{To: Destination{Kind: ToChannel, Channel: r.Channel, Request: r.ID}, Reply: s.card(c, r, nil)})
		s.askApproval(c, r)
		c.private(plain(fmt.Sprintf("%s needs approval (%s); %s can approve it. I posted it in %s and will tell you when it is decided.",
			r.ID, strings.Join(r.Approval, "; "), orList(s.approvers(r.Team)), r.Channel)))
		return
	}
	if len(r.Approval) > 0 {
		r.ApprovedBy = c.who.Name
	}
	s.audit(c, c.who.Name, "request", r.ID, "ok", detail)
	if r.ApprovedBy != "" {
		s.audit(c, c.who.Name, "approve", r.ID, "ok", "self-approved: "+s.role(c.who, r.Team))
	}
	s.submit(c, r)
}

// submit persists r as queued, hands it to the cluster, and reports.
func (s *Service) submit(c *call, r records.Request) {
	mark := len(c.outs)
	r.State = records.StateQueued
	r.SubmittedAt = c.now
	r.QueuedAt = c.now
	if err := s.putRequest(c, r); err != nil {
		s.failed(c, "saving "+r.ID, err)
		return
	}
	events, err := s.apply(c, Op{Kind: OpSubmit, Workload: s.workload(r)})
	if err != nil {
		// The request is saved as queued; the next sync resubmits it.
		s.log.Error("submitting workload", "request", r.ID, "err", err)
		s.audit(c, "gpubot", "submit", r.ID, "error", err.Error())
		c.private(plain(fmt.Sprintf("%s is saved, but the cluster did not take it yet (%s). gpubot retries on its own; /gpu status %s shows where it stands.", r.ID, plainError(err), r.ID)))
		return
	}
	s.observe(c, events, r.ID)
	victims := victimsOf(events, r.ID)
	r, err = s.getRequest(c, r.ID)
	if err != nil {
		s.failed(c, "reading "+r.ID, err)
		return
	}
	snap, err := s.snapshot(c)
	if err != nil {
		s.failed(c, "reading the cluster", err)
		return
	}
	var est *allocator.Estimate
	word, never := s.neverStarts(c, r.ID)
	later := false // its estimate is left to the refresher
	if r.State == records.StateQueued {
		if never {
			r.KueueSaid = kueueKey(word, true)
		} else if _, ok := s.provisioningWait(c, r); ok {
			// It starts when its nodes are provisioned: no queue estimate.
		} else if ck, fromCk := s.fromCheckpoints(c, snap, r); fromCk && !s.offerDue(c, snap, r, toRecord(c.now, ck)) {
			// From the last computation, in milliseconds (ownestimate.go).
			s.estimates.stats.checkpoints.Add(1)
			est = &ck
			s.firstEstimate(c, &r, ck)
		} else if release, alone := s.ownEstimate(); !alone {
			// Under load: the refresher's next pass (this submission
			// marks the estimates stale) works it out, updates the card
			// and posts it in the thread (postEstimates).
			later = true
			s.kueueSays(c, &r)
		} else {
			// Its own estimate only (from the last computation when that
			// answered, with the spot offer's starts still to work out),
			// computed outside the write section; meanwhile others may
			// change it (admit it), so it is read again after. With a
			// refresher in the background it waits at most the
			// own-estimate wait (ownestimate.go): if the estimate is late,
			// the card and reply say it follows, and it completes the card
			// itself.
			var known *allocator.Estimate
			if fromCk {
				s.estimates.stats.checkpoints.Add(1)
				known = &ck
			}
			opts := s.viewOptions(c)
			var e allocator.Estimate
			ready := false
			s.outside(c, func() { e, ready = s.ownEstimateWithin(c, snap, r, opts, known, release) })
			later = !ready
			if r, err = s.getRequest(c, r.ID); err != nil {
				s.failed(c, "reading "+r.ID, err)
				return
			}
			if snap, err = s.snapshot(c); err != nil {
				s.failed(c, "reading the cluster", err)
				return
			}
			if later {
				s.kueueSays(c, &r)
			} else if r.State == records.StateQueued && r.Estimate == nil {
				est = &e
				s.firstEstimate(c, &r, e)
			}
		}
		if err := s.putRequest(c, r); err != nil {
			s.log.Error("saving estimate", "request", r.ID, "err", err)
		}
	}
	card := s.cardWith(c, r, snap, est)
	out := Output{To: Destination{Kind: ToChannel, Channel: r.Channel, Request: r.ID}, Reply: card}
	first := []Output{out}
	note := ""
	if len(victims) > 0 {
		note = fmt.Sprintf("Started at once by preempting %s: %s.", s.victimList(c, victims), s.preemptionWhy(c, r, victims))
		first = append(first, thread(r.ID, plain(note)))
		note = " " + note
	}
	// The card comes before updates about other requests that its
	// submission caused, unless those are committed (and sent) already:
	// what is committed stays a prefix of c.outs.
	at := max(mark, c.committed, c.sent)
	c.outs = append(c.outs[:at:at], append(first, c.outs[at:]...)...)
	if !c.in.in(r.Channel) && c.who.Name == r.Requester {
		if r.State == records.StateQueued && never {
			c.private(plain(fmt.Sprintf("%s: Kueue cannot admit it: %s. It stays in Kueue's queue; /gpu cancel %s withdraws it. Updates follow in its thread in %s.",
				card.Text, strings.TrimRight(word.Why, "."), r.ID, r.Channel), contextBlock("Kueue's message: "+word.Raw())))
			return
		}
		if line := s.offerLine(c, snap, r, r.Estimate, c.who); line != "" {
			note += " " + line
		}
		if later {
			note += " " + estimateFollows
		}
		c.private(plain(fmt.Sprintf("%s.%s Updates follow in its thread in %s.", card.Text, note, r.Channel)))
	}
}

// firstEstimate saves e as queued r's first estimate, with what Kueue
// says of r.
func (s *Service) firstEstimate(c *call, r *records.Request, e allocator.Estimate) {
	posted := toRecord(c.now, e)
	r.Estimate, r.FirstEstimate = posted, posted
	s.kueueSays(c, r)
}

// kueueSays keeps what Kueue says of queued r, if it says anything.
func (s *Service) kueueSays(c *call, r *records.Request) {
	if w, ok := s.kueueWord(c, r.ID); ok {
		r.KueueSaid = kueueKey(w, true)
	}
}

// estimateFollows says that a queued request's start estimate is left to
// the refresher: on its card, and to its requester.
const estimateFollows = "Its start estimate is being worked out; it will appear on its card and in its thread."

// ownEstimatesAtOnce is how many request commands may compute their own
// estimate at once while a refresher runs in the background (one
// estimate over 10 000 queued requests keeps both of a 2-core machine's
// cores busy for about 100 ms).
const ownEstimatesAtOnce = 1

// ownEstimate reports whether a request command computes its own
// estimate, and then returns the release of its turn. With no refresher
// in the background (the console, tests that Settle) it always does.
// With one, it leaves the estimate to the refresher's next pass when a
// refresh is under way or a change waits for one (that pass comes anyway,
// and the request's own submission is such a change), or when
// ownEstimatesAtOnce others are computing theirs: under load, requests do
// not each simulate the queue of thousands alone.
func (s *Service) ownEstimate() (release func(), ok bool) {
	if s.background.Load() == 0 {
		return func() {}, true
	}
	if s.refreshing.Load() > 0 || s.estimates.pending() {
		return nil, false
	}
	if s.ownEstimates.Add(1) > ownEstimatesAtOnce {
		s.ownEstimates.Add(-1)
		return nil, false
	}
	return func() { s.ownEstimates.Add(-1) }, true
}

// victimsOf lists the workloads preempted by id in events.
func victimsOf(events []allocator.Event, id string) []string {
	var out []string
	for _, ev := range events {
		if ev.Kind == allocator.EventPreempted && ev.By == id {
			out = append(out, ev.ID)
		}
	}
	return out
}

// preemptionWhy says which Kueue policy allowed an automatic preemption.
func (s *Service) preemptionWhy(c *call, r records.Request, victims []string) string {
	var same, other []string
	for _, id := range victims {
		v, err := s.getRequest(c, id)
		if err != nil || v.Team == r.Team {
			same = append(same, id)
		} else {
			other = append(other, v.Team)
		}
	}
	var why []string
	if len(same) > 0 {
		why = append(why, fmt.Sprintf("%s's policy lets higher-priority work preempt its own lower-priority work", r.Team))
	}
	if len(other) > 0 {
		why = append(why, fmt.Sprintf("%s reclaims its quota from %s, which was borrowing it", r.Team, strings.Join(uniq(other), " and ")))
	}
	return strings.Join(why, "; ")
}

// draft validates spec for who and fills in defaults. It returns the
// request or a sentence saying what is wrong.
func (s *Service) draft(who *Person, spec RequestSpec, now time.Time) (records.Request, string) {
	r := records.Request{
		Requester: who.Name,
		GPUs:      spec.GPUs,
		Flavor:    spec.Flavor,
		Duration:  spec.Duration,
		Team:      spec.Team,
		Priority:  spec.Priority,
		Topology:  spec.Topology,
		Template:  spec.Template,
		Reason:    spec.Reason,
		Origin:    "chat",
		CreatedAt: now,
	}
	if r.Team == "" {
		r.Team = s.defaultTeam(who)
		if r.Team == "" {
			return r, fmt.Sprintf("You are not in any team, so say which one: add team <name> (teams: %s).", strings.Join(teamNames(s.set.Teams), ", "))
		}
	}
	team, ok := s.teams[r.Team]
	if !ok {
		return r, fmt.Sprintf("There is no team %q.", r.Team)
	}
	if !who.Admin && !inTeam(who.Name, team) {
		return r, fmt.Sprintf("You are not a member of %s, so you cannot request GPUs on its quota. Your teams: %s.", team.Name, orNone(s.teamsOf(who)))
	}
	q, _ := s.queue(r.Team)
	if r.Flavor != "" && !slices.Contains(q.Flavors, r.Flavor) {
		return r, fmt.Sprintf("Team %s has no quota on %s; its flavors are %s.", r.Team, r.Flavor, strings.Join(q.Flavors, ", "))
	}
	if r.Priority == "" {
		r.Priority = s.set.DefaultPriority
	}
	if r.Template == "" && len(s.set.Templates) > 0 {
		r.Template = s.set.Templates[0]
	}
	if s.set.MaxDuration > 0 && r.Duration > s.set.MaxDuration {
		return r, fmt.Sprintf("%s is longer than the longest request allowed (%s); ask for less and extend later if needed.", fmtDuration(r.Duration), fmtDuration(s.set.MaxDuration))
	}
	if _, err := allocator.ParseLevel(r.Topology); err != nil {
		return r, err.Error()
	}
	// The size must split into equal pods on at least one usable flavor.
	var shapeErr error
	for _, f := range s.candidateFlavors(r) {
		fl, _ := s.flavor(f)
		if _, _, err := allocator.PodShape(r.GPUs, fl.GPUsPerNode); err != nil {
			shapeErr = err
			continue
		}
		shapeErr = nil
		break
	}
	if shapeErr != nil {
		return r, fmt.Sprintf("%d GPUs cannot be split into equal pods: %s.", r.GPUs, shapeErr)
	}
	return r, ""
}

// never says why r could not run even on an empty cluster, or "". For a
// request to submit (submitting) on a real cluster, only a quota no
// borrowing can reach counts, and only where the allocator models all
// that Kueue does for the team: nodes may be added (an autoscaled pool
// at zero), and Kueue decides; its word is shown.
func (s *Service) never(c *call, snap *allocator.Snapshot, r records.Request, submitting bool) string {
	empty, err := allocator.NewSnapshot(snap.Cluster(), snap.Now(), nil, nil)
	if err != nil {
		return ""
	}
	w := s.workload(r)
	w.ID = "draft"
	_, reason := empty.Fit(w)
	if reason == allocator.ReasonNone {
		return ""
	}
	if s.kueue != nil && submitting && (reason != allocator.ReasonQuota && reason != allocator.ReasonCohort || s.approximate(c, r.Team) != "") {
		return ""
	}
	q, _ := s.queue(r.Team)
	flavors := strings.Join(s.candidateFlavors(r), " or ")
	switch reason {
	case allocator.ReasonQuota, allocator.ReasonCohort:
		return fmt.Sprintf("%d× %s can never be admitted for %s: it is more than the team may use even with the whole shared pool (%s). Ask for fewer GPUs.", r.GPUs, flavors, r.Team, quotaSummary(q))
	case allocator.ReasonTopology:
		return fmt.Sprintf("%d GPUs never fit in one %s of %s. Ask for fewer GPUs or a wider topology (host < rack < block).", r.GPUs, r.Topology, flavors)
	default:
		return fmt.Sprintf("%d× %s can never be admitted: the cluster does not have that many GPUs of that kind.", r.GPUs, flavors)
	}
}

func quotaSummary(q allocator.Queue) string {
	var parts []string
	for _, f := range q.Flavors {
		qu := q.Quotas[f]
		p := fmt.Sprintf("%s: %d nominal", f, qu.Nominal)
		if qu.BorrowingLimit != nil {
			p += fmt.Sprintf(" + up to %d borrowed", *qu.BorrowingLimit)
		} else if q.Cohort != "" {
			p += " + what the pool lends"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// workload is the allocator's view of r.
func (s *Service) workload(r records.Request) allocator.Workload {
	lvl, _ := allocator.ParseLevel(r.Topology)
	created := r.SubmittedAt
	if created.IsZero() {
		created = r.CreatedAt
	}
	return allocator.Workload{
		ID:       r.ID,
		Queue:    r.Team,
		Priority: s.prio[r.Priority],
		GPUs:     r.GPUs,
		CPU:      int64(r.GPUs) * s.set.CPUPerGPU,
		Memory:   int64(r.GPUs) * s.set.MemoryPerGPU,
		Flavor:   r.Flavor,
		Topology: lvl,
		Created:  created,
		Duration: r.Duration,
	}
}

// candidateFlavors are the flavors r may run on, in the order tried.
func (s *Service) candidateFlavors(r records.Request) []string {
	if r.Flavor != "" {
		return []string{r.Flavor}
	}
	q, _ := s.queue(r.Team)
	return s.reservedFlavors(q)
}

// reservedFlavors are q's flavors that work asking for any flavor may
// use, in order: all but the elastic ones.
func (s *Service) reservedFlavors(q allocator.Queue) []string {
	var out []string
	for _, f := range q.Flavors {
		if fl, ok := s.flavor(f); !ok || !fl.Elastic {
			out = append(out, f)
		}
	}
	return out
}

// approvalNeeds lists why r needs approval under the rules. Only the
// borrowing rule reads snap, and fits r on it: a snapshot of the caller's
// own then, not a shared one.
func (s *Service) approvalNeeds(snap *allocator.Snapshot, r records.Request) []string {
	rules := s.set.Approval
	var why []string
	if rules.AboveGPUs > 0 && r.GPUs > rules.AboveGPUs {
		why = append(why, fmt.Sprintf("more than %d GPUs", rules.AboveGPUs))
	}
	if slices.Contains(rules.Priorities, r.Priority) {
		why = append(why, "priority "+r.Priority)
	}
	if rules.Borrowing {
		if f, over := s.wouldBorrow(snap, r); over > 0 {
			unit := "GPUs"
			if over == 1 {
				unit = "GPU"
			}
			why = append(why, fmt.Sprintf("borrows %d %s %s beyond %s's quota", over, f, unit, r.Team))
		}
	}
	return why
}

// wouldBorrow reports by how many GPUs r would take its team above the
// nominal quota of the flavor it would most likely get.
func (s *Service) wouldBorrow(snap *allocator.Snapshot, r records.Request) (string, int) {
	var standing allocator.QueueStanding
	for _, st := range snap.Standing() {
		if st.Queue == r.Team {
			standing = st
		}
	}
	w := s.workload(r)
	w.ID = "draft"
	flavor := ""
	if a, reason := snap.Fit(w); reason == allocator.ReasonNone {
		flavor = a.Flavor
	} else if fs := s.candidateFlavors(r); len(fs) > 0 {
		flavor = fs[0]
	}
	over := standing.Used[flavor] + r.GPUs - standing.Nominal[flavor]
	if over > r.GPUs {
		over = r.GPUs
	}
	return flavor, over
}

// requestExample is a request p could send as it is: one of p's teams
// (or, for someone in none, the first team: they are told to name one) and
// the first flavor; never an empty field.
func (s *Service) requestExample(p *Person) string {
	team := s.defaultTeam(p)
	if team == "" && len(s.set.Teams) > 0 {
		team = s.set.Teams[0].Name
	}
	ex := "/gpu request 8x" + exampleFlavor(s.vocab) + " for 4h"
	if team != "" {
		ex += " team " + team
	}
	return ex
}

func (s *Service) defaultTeam(p *Person) string {
	if ts := s.teamsOf(p); len(ts) > 0 {
		return ts[0]
	}
	return ""
}

func (s *Service) teamsOf(p *Person) []string {
	var out []string
	for _, t := range s.set.Teams {
		if inTeam(p.Name, &t) {
			out = append(out, t.Name)
		}
	}
	return out
}

func inTeam(name string, t *Team) bool {
	return slices.ContainsFunc(t.Members, func(m string) bool { return strings.EqualFold(m, name) }) ||
		slices.ContainsFunc(t.Leads, func(m string) bool { return strings.EqualFold(m, name) })
}

func (s *Service) channelOf(team string) string {
	if t, ok := s.teams[team]; ok && t.Channel != "" {
		return t.Channel
	}
	if s.set.DefaultChannel != "" {
		return s.set.DefaultChannel
	}
	return "#gpu"
}

// describe is a request's size in words, for logs and the audit.
func describe(r records.Request) string {
	f := r.Flavor
	if f == "" {
		f = "any"
	}
	d := fmt.Sprintf("%d× %s for %s, team %s, priority %s", r.GPUs, f, fmtDuration(r.Duration), r.Team, r.Priority)
	if r.Topology != "" {
		d += ", topology " + r.Topology
	}
	return d
}

func orList(xs []string) string {
	switch len(xs) {
	case 0:
		return "nobody"
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// askApproval tells the team's leads (the admins, for a team without
// leads) directly that r waits for them, with the buttons to decide.
func (s *Service) askApproval(c *call, r records.Request) {
	var deciders []string
	if t, ok := s.teams[r.Team]; ok {
		deciders = t.Leads
	}
	if len(deciders) == 0 {
		deciders = s.admins()
	}
	for _, name := range deciders {
		c.emit(s.dm(name, plain(fmt.Sprintf("%s's request %s (%s) needs your approval: %s. Its card is in %s.",
			r.Requester, r.ID, describe(r), strings.Join(r.Approval, "; "), r.Channel), actions(
			Button{Label: "Approve", Action: Action{Name: VerbApprove, Request: r.ID}, Style: "primary"},
			Button{Label: "Deny", Action: Action{Name: VerbDeny, Request: r.ID}, Style: "danger"},
		))))
	}
}

// in reports whether the input came from channel (an ID or a name, with
// or without "#").
func (in Input) in(channel string) bool {
	if in.Channel == channel {
		return true
	}
	name := strings.TrimPrefix(channel, "#")
	return name != "" && (strings.TrimPrefix(in.Channel, "#") == name || in.ChannelName == name)
}
