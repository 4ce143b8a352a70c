package commands

import (
	"fmt"
	"strings"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// card is a request's card in its current state. It reads the cluster
// only for queued requests, to explain the wait.
func (s *Service) card(c *call, r records.Request, snap *allocator.Snapshot) Reply {
	return s.cardWith(c, r, snap, nil)
}

// cardWith renders the card, using est (if given) instead of the posted
// estimate.
func (s *Service) cardWith(c *call, r records.Request, snap *allocator.Snapshot, est *allocator.Estimate) Reply {
	if snap == nil && (r.State == records.StateQueued || r.State == records.StateAwaitingApproval) {
		if sn, err := s.snapshot(c); err == nil {
			snap = sn
		}
	}
	q, _ := s.queue(r.Team)
	title := fmt.Sprintf("%s · %s for %s · %s", r.ID, size(r, s.reservedFlavors(q)), fmtDuration(r.Duration), r.Team)
	fs := []Field{{"Requester", r.Requester}, {"Priority", r.Priority}}
	if r.Topology != "" {
		fs = append(fs, Field{"Topology", "one " + r.Topology})
	}
	if r.Template != "" {
		fs = append(fs, Field{"Template", r.Template})
	}
	if r.Reason != "" {
		fs = append(fs, Field{"Reason", r.Reason})
	}
	fs = append(fs, s.elasticFields(r)...)
	var head, status, kueueRaw string
	var buttons []Button
	var offer []Block
	switch r.State {
	case records.StateAwaitingApproval:
		head = fmt.Sprintf("%s needs approval", r.ID)
		status = fmt.Sprintf("Needs approval: %s. %s can approve it; it holds no quota until then.", strings.Join(r.Approval, "; "), capitalize(orList(s.approvers(r.Team))))
		if snap != nil {
			if e, ok := s.ifSubmitted(c, snap, r); ok {
				status += " If approved now it " + e + "."
			}
		}
		buttons = []Button{
			{Label: "Approve", Action: Action{Name: VerbApprove, Request: r.ID}, Style: "primary"},
			{Label: "Deny", Action: Action{Name: VerbDeny, Request: r.ID}, Style: "danger"},
			{Label: "Cancel", Action: Action{Name: VerbCancel, Request: r.ID}},
		}
	case records.StateQueued:
		var posted *records.Estimate
		if est != nil {
			posted = toRecord(c.now, *est)
		} else {
			posted = r.Estimate
		}
		word, said := s.kueueWord(c, r.ID)
		if wait, ok := s.provisioningWait(c, r); ok && !(said && word.Never) {
			head = fmt.Sprintf("%s waits for provisioning", r.ID)
			status = wait
			if said {
				status += " Kueue says: " + kueueSays(word)
				kueueRaw = word.Raw()
			}
		} else if said && word.Never {
			// Kueue's word wins: no estimate, no category, no preemption.
			head = fmt.Sprintf("%s will not start as it is", r.ID)
			status = willNotStart(word) + " Change the request (size, flavor, topology) or ask an admin about the cluster; cancel it if it is no longer needed."
			kueueRaw = word.Raw()
		} else {
			head = fmt.Sprintf("%s queued", r.ID)
			status = "Queued"
			if posted != nil {
				status += ": " + s.estimateText(posted)
				head += ": " + s.estimateText(posted)
			}
			status += "."
			if posted == nil {
				status += " " + estimateFollows
			}
			if approx := s.approximate(c, r.Team); approx != "" && posted != nil {
				status += " The estimate is " + approx + "."
			}
			if snap != nil {
				if w, ok := snap.Workload(r.ID); ok && w.Admission == nil {
					reason := allocator.Reason("")
					if posted != nil {
						reason = allocator.Reason(posted.Reason)
					}
					if reason == "" {
						reason = snap.Diagnose(r.ID)
					}
					switch why := s.explain(snap, r, reason); {
					case why == fitsNow:
						status += " It fits now and starts at the next admission cycle."
					case why != "":
						status += " Waiting for " + string(reason) + ": " + why + "."
					}
					if victims, _, ok := snap.ProposeVictims(w); ok && len(victims) > 0 {
						status += fmt.Sprintf(" It can start now only by preempting %s; an admin can do that.", s.victimList(c, victims))
						buttons = append(buttons, Button{Label: "Preempt " + strings.Join(victims, ", "), Action: Action{Name: VerbPreempt, Request: r.ID}, Style: "danger"})
					}
				}
			}
			if said {
				status += " Kueue says: " + kueueSays(word)
				kueueRaw = word.Raw()
			}
		}
		if r.ApprovedBy != "" && r.ApprovedBy != r.Requester {
			status += " Approved by " + r.ApprovedBy + "."
		}
		status += s.pendingSwitchNote(r)
		offer = s.offerBlocks(c, snap, r, posted)
		buttons = append(buttons, Button{Label: "Cancel", Action: Action{Name: VerbCancel, Request: r.ID}})
	case records.StateRunning:
		end := r.AdmittedAt.Add(r.Duration)
		head = fmt.Sprintf("%s running on %s", r.ID, placement(r))
		status = fmt.Sprintf("Running since %s on %s. Ends %s unless extended.", s.clock(r.AdmittedAt), placement(r), s.clock(end))
		buttons = []Button{
			{Label: "Extend 1h", Action: Action{Name: VerbExtend, Request: r.ID, Arg: "1h"}},
			{Label: "Release", Action: Action{Name: VerbRelease, Request: r.ID}, Style: "danger"},
		}
	default:
		head = fmt.Sprintf("%s %s", r.ID, r.State)
		status = fmt.Sprintf("%s %s", capitalize(string(r.State)), s.clock(r.EndedAt))
		if r.EndReason != "" {
			status += ": " + r.EndReason
		}
		if !r.AdmittedAt.IsZero() {
			status += fmt.Sprintf(" after running %s", fmtDuration(r.EndedAt.Sub(r.AdmittedAt)))
		}
		if r.DenyReason != "" {
			status += " (" + r.DenyReason + ")"
		}
		status += "."
	}
	blocks := []Block{header(title), fields(fs...), section(status)}
	blocks = append(blocks, offer...)
	if len(buttons) > 0 {
		blocks = append(blocks, actions(buttons...))
	}
	ctx := fmt.Sprintf("Requested %s by %s", s.clock(r.CreatedAt), r.Requester)
	if r.Origin == "seed" {
		ctx = "Running when gpubot started"
	}
	blocks = append(blocks, contextBlock(ctx))
	if kueueRaw != "" {
		blocks = append(blocks, contextBlock("Kueue's message: "+kueueRaw))
	}
	return Reply{Text: head, Blocks: blocks}
}

// ifSubmitted estimates r as if it were submitted now.
func (s *Service) ifSubmitted(c *call, snap *allocator.Snapshot, r records.Request) (string, bool) {
	sim := s.clone(snap)
	w := s.workload(r)
	w.Created = c.now
	if _, err := sim.Add(w); err != nil {
		return "", false
	}
	events := sim.Schedule()
	for _, ev := range events {
		if ev.Kind == allocator.EventAdmitted && ev.ID == r.ID {
			if victims := victimsOf(events, r.ID); len(victims) > 0 {
				return "starts at once by preempting " + s.victimList(c, victims), true
			}
			return "starts at once", true
		}
	}
	e := allocator.EstimateFor(sim, r.ID, s.viewOptions(c))
	return s.estimateText(toRecord(c.now, e)), true
}

// fitsNow is explain's answer for a request that would fit now, alone:
// it waits for no one, only for the next admission cycle.
const fitsNow = "it fits now and waits only for the next admission cycle"

// explain says in words what a pending request waits for.
func (s *Service) explain(snap *allocator.Snapshot, r records.Request, reason allocator.Reason) string {
	q, _ := s.queue(r.Team)
	flavor := r.Flavor
	if fs := s.reservedFlavors(q); flavor == "" && len(fs) > 0 {
		flavor = fs[0]
	}
	var fc allocator.FlavorCapacity
	for _, f := range snap.Capacity(nil) {
		if f.Flavor == flavor {
			fc = f
		}
	}
	var st allocator.QueueStanding
	for _, x := range snap.Standing() {
		if x.Queue == r.Team {
			st = x
		}
	}
	if res := s.blocker(snap, r); res != allocator.ResourceGPU {
		if why := s.explainResource(snap, r, reason, res, flavor); why != "" {
			return why
		}
	}
	switch reason {
	case allocator.ReasonQuota:
		return fmt.Sprintf("%s already uses %d %s GPUs against a nominal quota of %d, and may not borrow more", r.Team, st.Used[flavor], flavor, st.Nominal[flavor])
	case allocator.ReasonCohort:
		return fmt.Sprintf("%s uses %d of its %d nominal %s GPUs and the %s pool has none left to lend", r.Team, st.Used[flavor], st.Nominal[flavor], flavor, q.Cohort)
	case allocator.ReasonCapacity:
		return fmt.Sprintf("%d of %d %s GPUs are free and it needs %d", fc.Free, fc.Total, flavor, r.GPUs)
	case allocator.ReasonFragmentation:
		return fmt.Sprintf("%d %s GPUs are free but scattered; the largest request that fits now is %d", fc.Free, flavor, fc.Largest[allocator.LevelNone])
	case allocator.ReasonTopology:
		lvl, _ := allocator.ParseLevel(r.Topology)
		return fmt.Sprintf("no single %s has %d free %s GPUs (largest now: %d)", r.Topology, r.GPUs, flavor, fc.Largest[lvl])
	case allocator.ReasonPriority:
		if w, ok := snap.Workload(r.ID); ok {
			if _, why := snap.Fit(w); why == allocator.ReasonNone {
				return fitsNow
			}
		}
		return "higher-priority requests that came later go first"
	}
	return ""
}

// victimList names victims with their owner, size and priority.
func (s *Service) victimList(c *call, ids []string) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id
		if v, err := s.getRequest(c, id); err == nil {
			parts[i] = fmt.Sprintf("%s (%s, %d GPUs, %s)", id, v.Requester, v.GPUs, v.Priority)
		}
	}
	return strings.Join(parts, ", ")
}
