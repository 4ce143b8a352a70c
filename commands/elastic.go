package commands

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// Elastic capacity in a request's life: the switch (a button on the
// offer, or /gpu switch), a lead's approval of a large switch, the
// provisioning admission check followed in the thread, and spot nodes
// reclaimed from under running work.

// Provisioning reports the state of the provisioning admission checks of
// requests on provisioned flavors: Kueue's ProvisioningRequest admission
// check on a real cluster, the simulated provisioning on the simulated
// one. It is optional (WithProvisioning); without it nothing is told
// about provisioning.
type Provisioning interface {
	// ProvisioningChecks returns, by request ID, the state of the
	// provisioning check of each request that has one.
	ProvisioningChecks(ctx context.Context) (map[string]CheckState, error)
}

// CheckState is one request's provisioning admission check.
type CheckState struct {
	// Check names the AdmissionCheck.
	Check string
	// State is Kueue's: Pending, Ready, Retry or Rejected.
	State string
	// Message is what the check says, verbatim ("" for none).
	Message string
	// Attempt counts provisioning attempts, from 1.
	Attempt int
	// Since is when the check entered State.
	Since time.Time
	// Nodes is how many nodes are being provisioned, when known (0: not).
	Nodes int
	// Failed lists the attempts that failed, oldest first, as far as the
	// cluster still tells (the ProvisioningRequests Kueue keeps).
	Failed []CheckFailure
}

// CheckFailure is one failed provisioning attempt.
type CheckFailure struct {
	Attempt int
	Message string
}

// Admission check states, as Kueue names them.
const (
	CheckPending  = "Pending"
	CheckReady    = "Ready"
	CheckRetry    = "Retry"
	CheckRejected = "Rejected"
)

// OpSwitch moves Workload (its request's, with the new flavor) to that
// flavor: the cluster withdraws the old workload and submits the new one.
const OpSwitch OpKind = "switch"

// WithProvisioning lets the service follow provisioning admission checks.
// Default: none.
func WithProvisioning(p Provisioning) Option { return func(s *Service) { s.provisioning = p } }

// switchTo handles the Switch button and /gpu switch <id> <flavor>.
func (s *Service) switchTo(c *call, r records.Request, flavor string) {
	verb := string(VerbSwitch)
	refuse := func(why string) {
		s.audit(c, c.who.Name, verb, r.ID, "refused", flavor+": "+why)
		c.private(plain(fmt.Sprintf("%s cannot switch to %s: %s. Nothing was changed.", r.ID, flavor, why)))
	}
	t := s.set.Elastic.terms(flavor)
	q, _ := s.queue(r.Team)
	switch {
	case !t.Elastic() && s.set.Elastic.terms(r.Flavor).Elastic() && slices.Contains(q.Flavors, flavor) && r.State == records.StateQueued:
		s.switchBack(c, r, flavor)
		return
	case !t.Elastic():
		refuse(fmt.Sprintf("%s is not a spot or provisioned flavor", flavor))
		return
	case !slices.Contains(q.Flavors, flavor):
		refuse(fmt.Sprintf("%s has no quota on it", r.Team))
		return
	case r.State != records.StateQueued:
		refuse(fmt.Sprintf("only a queued request can switch, and it is %s", r.State))
		return
	case r.Flavor == flavor:
		refuse("it is on " + flavor + " already")
		return
	}
	snap, err := s.snapshot(c)
	if err != nil {
		s.failed(c, "reading the cluster", err)
		return
	}
	var o option
	for _, x := range s.options(c, snap, r, c.who) {
		if x.terms.Flavor == flavor {
			o = x
		}
	}
	if o.blocked != "" {
		refuse(o.blocked)
		return
	}
	if o.approval {
		s.askSwitch(c, r, o)
		return
	}
	s.doSwitch(c, r, o, "")
}

// askSwitch holds a large switch for a lead: the request stays queued on
// reserved capacity until one approves (the switch happens) or denies.
func (s *Service) askSwitch(c *call, r records.Request, o option) {
	e := elasticOf(r)
	e.PendingSwitch = o.terms.Flavor
	r.Elastic = e
	if err := s.putRequest(c, r); err != nil {
		s.failed(c, "saving "+r.ID, err)
		return
	}
	why := fmt.Sprintf("switch of %d GPUs to %s (%s), more than %d", r.GPUs, o.terms.Flavor, s.cost(o), s.set.Elastic.ApprovalAboveGPUs)
	s.audit(c, c.who.Name, string(VerbSwitch), r.ID, "ok", "needs approval: "+why)
	c.emit(thread(r.ID, plain(fmt.Sprintf("%s asked to switch to %s: %s. It needs a lead's approval (%s); it stays queued on reserved capacity meanwhile.",
		c.who.Name, o.terms.Flavor, s.optionText(o), orList(s.approvers(r.Team))))))
	deciders := s.teams[r.Team].Leads
	if len(deciders) == 0 {
		deciders = s.admins()
	}
	for _, name := range deciders {
		c.emit(s.dm(name, plain(fmt.Sprintf("%s asks to switch %s (%s) to %s: %s. Approve or deny the switch:", c.who.Name, r.ID, describe(r), o.terms.Flavor, s.optionText(o)), actions(
			Button{Label: "Approve switch", Action: Action{Name: VerbApprove, Request: r.ID}, Style: "primary"},
			Button{Label: "Deny", Action: Action{Name: VerbDeny, Request: r.ID}, Style: "danger"},
		))))
	}
	c.private(plain(fmt.Sprintf("The switch of %s to %s needs approval (%s); %s can approve it. It stays queued on reserved capacity meanwhile.",
		r.ID, o.terms.Flavor, why, orList(s.approvers(r.Team)))))
}

// decideSwitch is approve or deny on a request whose switch waits for a
// lead. It reports whether r had such a switch.
func (s *Service) decideSwitch(c *call, r records.Request, approve bool, reason string) bool {
	if r.Elastic == nil || r.Elastic.PendingSwitch == "" || r.State != records.StateQueued {
		return false
	}
	flavor := r.Elastic.PendingSwitch
	r.Elastic.PendingSwitch = ""
	if !approve {
		if err := s.putRequest(c, r); err != nil {
			s.failed(c, "saving "+r.ID, err)
			return true
		}
		s.audit(c, c.who.Name, "deny", r.ID, "ok", "switch to "+flavor+suffix(": ", reason))
		msg := fmt.Sprintf("%s denied the switch to %s%s; it stays queued on reserved capacity.", c.who.Name, flavor, suffix(": ", reason))
		c.emit(thread(r.ID, plain(msg)), s.dm(r.Requester, plain(fmt.Sprintf("The switch of your request %s to %s was denied by %s%s.", r.ID, flavor, c.who.Name, suffix(": ", reason)))))
		c.private(plain(fmt.Sprintf("Denied the switch of %s.", r.ID)))
		return true
	}
	snap, err := s.snapshot(c)
	if err != nil {
		s.failed(c, "reading the cluster", err)
		return true
	}
	for _, o := range s.options(c, snap, r, c.who) {
		if o.terms.Flavor != flavor {
			continue
		}
		if o.blocked != "" {
			_ = s.putRequest(c, r)
			s.audit(c, c.who.Name, "approve", r.ID, "refused", "switch to "+flavor+": "+o.blocked)
			c.private(plain(fmt.Sprintf("%s cannot switch to %s any more: %s. It stays queued on reserved capacity.", r.ID, flavor, o.blocked)))
			return true
		}
		s.audit(c, c.who.Name, "approve", r.ID, "ok", "switch to "+flavor+"; "+s.role(c.who, r.Team))
		s.doSwitch(c, r, o, c.who.Name)
		return true
	}
	_ = s.putRequest(c, r)
	c.private(plain(fmt.Sprintf("%s's team no longer has %s; nothing was changed.", r.ID, flavor)))
	return true
}

// doSwitch persists the switch, then moves the workload in the cluster.
func (s *Service) doSwitch(c *call, r records.Request, o option, approvedBy string) {
	before := r
	e := elasticOf(r)
	e.From, e.At, e.By, e.Reserved, e.PendingSwitch = r.Flavor, c.now, c.who.Name, r.Estimate, ""
	e.Check, e.CheckMessage, e.Attempt, e.FailedTold, e.CheckSince, e.Asked = "", "", 0, 0, time.Time{}, time.Time{}
	r.Elastic = e
	r.Flavor = o.terms.Flavor
	r.Estimate, r.KueueSaid = nil, ""
	if err := s.putRequest(c, r); err != nil {
		s.failed(c, "saving "+r.ID, err)
		return
	}
	// The thread says so before the cluster acts: on a real cluster the
	// call leaves the write section for the API call, and Kueue may admit
	// the moved workload (and the watch tell the thread) before it is back.
	msg := fmt.Sprintf("Switched to %s (%s) by %s: %s.", o.terms.Flavor, capacityWords(o.terms), c.who.Name, s.optionText(o))
	if o.terms.Capacity == CapacitySpot {
		msg += " If its spot nodes are reclaimed it is requeued on " + o.terms.Flavor + " and told here."
	}
	c.emit(thread(r.ID, plain(msg)))
	events, err := s.apply(c, Op{Kind: OpSwitch, ID: r.ID, Workload: s.workload(r)})
	if err != nil {
		if perr := s.putRequest(c, before); perr != nil {
			s.log.Error("restoring a request after a failed switch", "request", r.ID, "err", perr)
		}
		c.emit(thread(r.ID, plain(fmt.Sprintf("The switch to %s failed on gpubot's side (%s); %s stays as it was.", o.terms.Flavor, plainError(err), r.ID))))
		s.audit(c, c.who.Name, string(VerbSwitch), r.ID, "error", err.Error())
		s.failed(c, "switching "+r.ID+" to "+o.terms.Flavor, err)
		return
	}
	detail := fmt.Sprintf("from %s to %s: %s", cmp.Or(before.Flavor, "any reserved flavor"), o.terms.Flavor, s.optionText(o))
	if approvedBy != "" {
		detail += "; approved by " + approvedBy
	}
	s.audit(c, c.who.Name, string(VerbSwitch), r.ID, "ok", detail)
	s.observe(c, events, "")
	mark := len(c.outs)
	s.refreshChecks(c)
	if cur, err := s.getRequest(c, r.ID); err == nil {
		r = cur
	}
	if !slices.ContainsFunc(c.outs[mark:], func(o Output) bool { return o.To.Kind == UpdateCard && o.To.Request == r.ID }) {
		c.emit(s.updateCard(c, r))
	}
	if c.who.Name != r.Requester {
		c.emit(s.dm(r.Requester, plain(fmt.Sprintf("Your request %s was switched to %s by %s: %s.", r.ID, o.terms.Flavor, c.who.Name, s.optionText(o)))))
	}
	c.private(plain(fmt.Sprintf("Switched %s to %s. Updates follow in its thread in %s.", r.ID, o.terms.Flavor, r.Channel)))
}

// switchBack moves queued r, on an elastic flavor, back to its team's
// reserved flavor: after its provisioning was given up, or because its
// owner would rather wait. Nothing is spent on it any more, and the
// waiting it saved no longer counts.
func (s *Service) switchBack(c *call, r records.Request, flavor string) {
	before := r
	e := elasticOf(r)
	from := r.Flavor
	e.From, e.At, e.By, e.Reserved, e.PendingSwitch = "", time.Time{}, "", nil, ""
	e.Check, e.CheckMessage, e.Attempt, e.FailedTold, e.CheckSince, e.Asked = "", "", 0, 0, time.Time{}, time.Time{}
	r.Elastic, r.Flavor = e, flavor
	r.Estimate, r.KueueSaid = nil, ""
	if err := s.putRequest(c, r); err != nil {
		s.failed(c, "saving "+r.ID, err)
		return
	}
	// Told before the cluster acts, as doSwitch does.
	c.emit(thread(r.ID, plain(fmt.Sprintf("Switched back to %s (reserved capacity) by %s; it is queued there, and nothing more is spent on %s. A new estimate follows.", flavor, c.who.Name, from))))
	events, err := s.apply(c, Op{Kind: OpSwitch, ID: r.ID, Workload: s.workload(r)})
	if err != nil {
		if perr := s.putRequest(c, before); perr != nil {
			s.log.Error("restoring a request after a failed switch", "request", r.ID, "err", perr)
		}
		c.emit(thread(r.ID, plain(fmt.Sprintf("The switch back to %s failed on gpubot's side (%s); %s stays as it was.", flavor, plainError(err), r.ID))))
		s.audit(c, c.who.Name, string(VerbSwitch), r.ID, "error", err.Error())
		s.failed(c, "switching "+r.ID+" back to "+flavor, err)
		return
	}
	s.audit(c, c.who.Name, string(VerbSwitch), r.ID, "ok", fmt.Sprintf("from %s back to %s (reserved capacity)", from, flavor))
	s.observe(c, events, "")
	if cur, err := s.getRequest(c, r.ID); err == nil {
		r = cur
	}
	c.emit(s.updateCard(c, r))
	if c.who.Name != r.Requester {
		c.emit(s.dm(r.Requester, plain(fmt.Sprintf("Your request %s was switched back to %s (reserved capacity) by %s.", r.ID, flavor, c.who.Name))))
	}
	c.private(plain(fmt.Sprintf("Switched %s back to %s. Updates follow in its thread in %s.", r.ID, flavor, r.Channel)))
}

func elasticOf(r records.Request) *records.Elastic {
	if r.Elastic == nil {
		return &records.Elastic{}
	}
	e := *r.Elastic
	return &e
}

// refreshChecks tells in their threads how the provisioning of requests
// on provisioned flavors goes, once per change of the check's state or
// attempt, in plain words; failures and rejections also go to the owner.
// A failure the cluster retried before gpubot looked (Kueue's back-off can
// be seconds) is told from the failed attempt's record.
func (s *Service) refreshChecks(c *call) {
	if s.provisioning == nil {
		return
	}
	open, err := s.listRequests(c, func(r records.Request) bool {
		return (r.State == records.StateQueued || r.State == records.StateRunning) && s.set.Elastic.terms(r.Flavor).Capacity == CapacityProvisioned
	})
	if err != nil || len(open) == 0 {
		return
	}
	checks, err := s.provisioning.ProvisioningChecks(c.ctx)
	if err != nil {
		s.log.Error("reading provisioning checks", "err", err)
		return
	}
	for _, r := range open {
		st, ok := checks[r.ID]
		if !ok {
			continue
		}
		st.Attempt = max(st.Attempt, 1)
		e := elasticOf(r)
		var msgs []string
		var dms []string
		// Failures not told yet, oldest first.
		for _, f := range st.Failed {
			if f.Attempt > e.FailedTold && !(st.State == CheckRetry && f.Attempt == st.Attempt) {
				m, d := s.failureWords(r, f.Attempt, f.Message)
				msgs, dms = append(msgs, m), append(dms, d)
				e.FailedTold = f.Attempt
			}
		}
		changed := st.State != e.Check || st.Attempt != e.Attempt
		if r.State == records.StateRunning && st.State == CheckReady && e.Check == CheckReady {
			changed = false
		}
		if r.State == records.StateRunning && st.State == CheckPending {
			// Kueue resets the checks of work it evicts after its
			// admission: the eviction is told, not a new provisioning.
			changed = false
		}
		if !changed && len(msgs) == 0 {
			continue
		}
		prev := e.Check
		if changed {
			e.Check, e.CheckMessage, e.Attempt, e.CheckSince = st.State, st.Message, st.Attempt, cmp.Or(st.Since, c.now)
			t := s.set.Elastic.terms(r.Flavor)
			switch st.State {
			case CheckPending:
				e.Asked = e.CheckSince
				nodes := "nodes"
				switch {
				case st.Nodes == 1:
					nodes = "1 node"
				case st.Nodes > 1:
					nodes = fmt.Sprintf("%d nodes", st.Nodes)
				}
				_, typical := s.provisioningTime(c, t)
				if e.Attempt > 1 {
					msgs = append(msgs, fmt.Sprintf("Provisioning again, attempt %d: Kueue asked the cluster autoscaler for %s of %s once more.", e.Attempt, nodes, r.Flavor))
				} else {
					msgs = append(msgs, fmt.Sprintf("Kueue asked the cluster autoscaler for %s of %s (admission check %s). Provisioning starts it %s.", nodes, r.Flavor, cmp.Or(st.Check, t.AdmissionCheck), typical))
				}
			case CheckReady:
				e.Provisioned = e.CheckSince
				took := ""
				if d, ok := e.ProvisioningTime(); ok {
					took = " after " + fmtDuration(roundMinute(d))
				}
				msgs = append(msgs, fmt.Sprintf("Provisioned%s: the %s nodes are there, and Kueue admits it onto them.", took, r.Flavor))
			case CheckRetry:
				if e.Attempt > e.FailedTold {
					m, d := s.failureWords(r, e.Attempt, st.Message)
					msgs, dms = append(msgs, m), append(dms, d)
					e.FailedTold = e.Attempt
				}
			case CheckRejected:
				back := e.From
				if back == "" {
					if fs := s.reservedFlavors(s.mustQueue(r.Team)); len(fs) > 0 {
						back = fs[0]
					}
				}
				if r.State == records.StateRunning || prev == CheckReady {
					// After the admission: the autoscaler took the nodes
					// back (CapacityRevoked), and Kueue stops the work.
					why := cmp.Or(strings.TrimRight(st.Message, "."), "no reason given")
					msgs = append(msgs, fmt.Sprintf("The cluster autoscaler took its %s nodes back after it started (capacity revoked: %s): Kueue stops it and keeps it out of the queue. /gpu switch %s %s queues it on reserved capacity, or cancel it.", r.Flavor, why, r.ID, back))
					dms = append(dms, fmt.Sprintf("Your request %s lost its %s nodes: the cluster autoscaler took them back (%s), and Kueue stops it.", r.ID, r.Flavor, why))
					break
				}
				why := cmp.Or(strings.TrimRight(st.Message, "."), "the admission check rejected it")
				msgs = append(msgs, fmt.Sprintf("Provisioning was given up: %s. It will not start on %s; /gpu switch %s %s puts it back on reserved capacity, or cancel it.", why, r.Flavor, r.ID, back))
				dms = append(dms, fmt.Sprintf("Your request %s will not start on %s: provisioning was given up (%s).", r.ID, r.Flavor, why))
			default:
				msgs = append(msgs, fmt.Sprintf("Provisioning check %s is %s%s.", st.Check, st.State, suffix(": ", st.Message)))
			}
		}
		r.Elastic = e
		if err := s.putRequest(c, r); err != nil {
			s.log.Error("saving the provisioning check", "request", r.ID, "err", err)
			continue
		}
		s.audit(c, "gpubot", "provisioning", r.ID, "ok", fmt.Sprintf("%s → %s (attempt %d)%s", cmp.Or(prev, "none"), st.State, e.Attempt, suffix(": ", st.Message)))
		for _, m := range msgs {
			c.emit(thread(r.ID, plain(m)))
		}
		c.emit(s.updateCard(c, r))
		for _, d := range dms {
			c.emit(s.dm(r.Requester, plain(d)))
		}
	}
}

// BookingExpired starts a CheckFailure's message when the attempt's
// nodes were provisioned but their booking expired before Kueue admitted
// the workload (the ProvisioningRequest's BookingExpired condition).
const BookingExpired = "booking expired: "

// failureWords tell a failed provisioning attempt, in the thread and to
// the owner.
func (s *Service) failureWords(r records.Request, attempt int, message string) (string, string) {
	message = strings.TrimPrefix(message, "Retrying after failure: ")
	if rest, ok := strings.CutPrefix(message, "Retrying after booking expired: "); ok {
		message = BookingExpired + rest
	}
	if rest, ok := strings.CutPrefix(message, BookingExpired); ok {
		why := cmp.Or(strings.TrimRight(rest, "."), "no reason given")
		return fmt.Sprintf("Provisioning failed (attempt %d): its nodes were provisioned, but their booking expired before Kueue admitted it (%s). Kueue gives the quota back and tries again after a back-off; this thread says when.", attempt, why),
			fmt.Sprintf("Provisioning of your request %s on %s failed (attempt %d): the nodes' booking expired before it was admitted (%s). Kueue retries on its own.", r.ID, r.Flavor, attempt, why)
	}
	why := cmp.Or(strings.TrimRight(message, "."), "no reason given")
	return fmt.Sprintf("Provisioning failed (attempt %d): %s. Kueue gives the quota back and tries again after a back-off; this thread says when.", attempt, why),
		fmt.Sprintf("Provisioning of your request %s on %s failed (attempt %d): %s. Kueue retries on its own.", r.ID, r.Flavor, attempt, why)
}

// provisioningWait is the card's status for queued r on a provisioned
// flavor whose nodes are not provisioned yet: the check's state and the
// typical provisioning time. ok is false for any other request.
func (s *Service) provisioningWait(c *call, r records.Request) (string, bool) {
	t := s.set.Elastic.terms(r.Flavor)
	if r.State != records.StateQueued || t.Capacity != CapacityProvisioned {
		return "", false
	}
	e := elasticOf(r)
	if e.Check == CheckReady {
		return "", false
	}
	_, typical := s.provisioningTime(c, t)
	switch e.Check {
	case CheckPending:
		return fmt.Sprintf("Provisioning %s nodes (attempt %d, asked %s); it starts when they are there, typically %s.", r.Flavor, e.Attempt, s.clock(e.Asked), typical), true
	case CheckRetry:
		return fmt.Sprintf("Provisioning failed (attempt %d: %s); Kueue retries after a back-off. It starts when its %s nodes are there, typically %s after Kueue asks.", e.Attempt, cmp.Or(strings.TrimRight(e.CheckMessage, "."), "no reason given"), r.Flavor, typical), true
	case CheckRejected:
		return fmt.Sprintf("Provisioning was given up: %s. Switch it back to reserved capacity or cancel it.", cmp.Or(strings.TrimRight(e.CheckMessage, "."), "rejected")), true
	}
	return fmt.Sprintf("Waiting for Kueue to reserve %s quota and ask for %s nodes; it then starts %s.", r.Team, r.Flavor, typical), true
}

func (s *Service) mustQueue(team string) allocator.Queue {
	q, _ := s.queue(team)
	return q
}

// evicted words a running request's requeueing that no other workload
// caused: its spot nodes were reclaimed (detail says what the cluster
// reported). It returns the thread message and the owner's message.
func (s *Service) evicted(r *records.Request, detail string, ran time.Duration) (string, string) {
	t := s.set.Elastic.terms(r.AdmittedFlavor)
	if t.Capacity == CapacitySpot {
		e := elasticOf(*r)
		e.Reclaims++
		r.Elastic = e
		if detail == "" {
			// The requeue was seen before the cluster said why.
			return fmt.Sprintf("Evicted from its spot nodes after running %s (the cluster did not say why; spot nodes can be reclaimed at any time); it is queued again on %s. A new estimate follows.", fmtDuration(ran), r.Flavor),
				fmt.Sprintf("Your request %s was evicted from its spot nodes after running %s and is queued again on %s; a new estimate follows in its thread.", r.ID, fmtDuration(ran), r.Flavor)
		}
		return fmt.Sprintf("Its spot nodes were reclaimed after running %s (%s); it is queued again on %s. A new estimate follows.", fmtDuration(ran), detail, r.Flavor),
			fmt.Sprintf("Your request %s lost its spot nodes after running %s (%s) and is queued again on %s; a new estimate follows in its thread.", r.ID, fmtDuration(ran), detail, r.Flavor)
	}
	return fmt.Sprintf("Evicted and requeued after running %s: %s. A new estimate follows.", fmtDuration(ran), detail),
		fmt.Sprintf("Your request %s was evicted (%s) and is queued again.", r.ID, detail)
}

// requeueDetail says why running r was requeued when gpubot noticed it
// before the cluster's event came (reconciling): Kueue's Evicted word if
// it has one ("Kueue evicted it (NodeFailures): …"), or, for spot work,
// which of its nodes are gone from the cluster; "" when neither says.
func (s *Service) requeueDetail(c *call, r records.Request) string {
	if w, ok := s.kueueWord(c, r.ID); ok && w.Condition == "Evicted" {
		return fmt.Sprintf("Kueue evicted it (%s): %s", w.Reason, strings.TrimRight(w.Message, "."))
	}
	if s.set.Elastic.terms(r.AdmittedFlavor).Capacity != CapacitySpot || len(r.Nodes) == 0 {
		return ""
	}
	snap, err := s.snapshot(c)
	if err != nil {
		return ""
	}
	var gone []string
	for _, n := range r.Nodes {
		if !slices.Contains(gone, n) && !slices.ContainsFunc(snap.Cluster().Nodes, func(x allocator.Node) bool { return x.Name == n }) {
			gone = append(gone, n)
		}
	}
	switch len(gone) {
	case 0:
		return ""
	case 1:
		return "spot node " + gone[0] + " is gone from the cluster"
	}
	return "spot nodes " + strings.Join(gone, ", ") + " are gone from the cluster"
}

// elasticFields are the card's fields for a request on elastic capacity.
func (s *Service) elasticFields(r records.Request) []Field {
	t := s.set.Elastic.terms(r.Flavor)
	if !t.Elastic() {
		return nil
	}
	o := option{terms: t, gpuHours: float64(r.GPUs) * r.Duration.Hours()}
	o.money = o.gpuHours * t.PricePerGPUHour
	what := capacityWords(t)
	if t.Capacity == CapacitySpot {
		what += ", may be reclaimed"
	}
	fs := []Field{{"Capacity", what}, {"Cost", s.cost(o)}}
	if e := r.Elastic; e != nil && e.Check != "" && r.State == records.StateQueued {
		fs = append(fs, Field{"Provisioning", fmt.Sprintf("%s (attempt %d)%s", e.Check, e.Attempt, suffix(": ", e.CheckMessage))})
	}
	return fs
}

// pendingSwitchNote is the card's note on a switch that waits for a lead.
func (s *Service) pendingSwitchNote(r records.Request) string {
	if r.Elastic == nil || r.Elastic.PendingSwitch == "" {
		return ""
	}
	return fmt.Sprintf(" A switch to %s waits for %s's approval.", r.Elastic.PendingSwitch, orList(s.approvers(r.Team)))
}

// elasticProblem says why r, asking for an elastic flavor itself, may not
// be submitted as it is, or "".
func (s *Service) elasticProblem(c *call, r records.Request) string {
	t := s.set.Elastic.terms(r.Flavor)
	if !t.Elastic() {
		return ""
	}
	if t.MaxRunTime > 0 && r.Duration > t.MaxRunTime {
		return fmt.Sprintf("%s runs at most %s and this asks for %s; ask for less and extend later, or use a reserved flavor.", r.Flavor, fmtDuration(t.MaxRunTime), fmtDuration(r.Duration))
	}
	o := option{terms: t, gpuHours: float64(r.GPUs) * r.Duration.Hours()}
	o.money = o.gpuHours * t.PricePerGPUHour
	if why := s.overBudget(r.Team, s.weekSpend(c, r.Team, ""), o); why != "" {
		return fmt.Sprintf("%s on %s is %s.", describe(r), r.Flavor, why)
	}
	return ""
}

// awaitingChecks reports whether queued r holds quota but waits for
// admission checks (Kueue's word says so, or its provisioning is not
// Ready): the cluster has not admitted it, though its quota is reserved.
func (s *Service) awaitingChecks(c *call, r records.Request) bool {
	if w, ok := s.kueueWord(c, r.ID); ok && w.Condition == "AdmissionCheck" {
		return true
	}
	if s.set.Elastic.terms(r.Flavor).Capacity != CapacityProvisioned || s.provisioning == nil {
		return false
	}
	return elasticOf(r).Check != CheckReady
}
