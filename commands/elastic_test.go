package commands_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
)

// elasticSmall is small with a spot flavor (two 8-GPU nodes, $2 a
// GPU-hour, reclaimed after 3h of a run) and a provisioned one (DWS, two
// nodes, $4 a GPU-hour, 20 minutes to provision, 1 day at most). nlp may
// spend $200 of elastic capacity a week; switching more than 8 GPUs
// needs a lead.
var elasticSmall = strings.NewReplacer(
	"approval: {aboveGPUs: 8, priorities: [high]}", "approval: {aboveGPUs: 16, priorities: [high]}",
	"flavors: [{name: h100, gpusPerNode: 8, nodes: {racksPerBlock: 2, nodesPerRack: 2}}]", `flavors:
  - {name: h100, gpusPerNode: 8, nodes: {racksPerBlock: 2, nodesPerRack: 2}}
  - {name: spot, gpusPerNode: 8, nodes: {nodesPerRack: 2}, capacity: spot, pricePerGPUHour: 2, simulation: {reclaimAfter: 3h}}
  - name: dws
    gpusPerNode: 8
    nodes: {nodesPerRack: 2}
    capacity: provisioned
    pricePerGPUHour: 4
    maxRunTime: 1d
    provisioning: {admissionCheck: dws-check, prior: 30m}
    simulation: {provisioningTime: 20m}
elastic: {offerAfter: 1h, approvalAboveGPUs: 8}`,
	"    quota: {h100: {nominal: 16}}\n    preemption: {withinTeam: LowerPriority}", "    quota: {h100: {nominal: 16}, spot: {nominal: 16}, dws: {nominal: 16}}\n    elasticBudget: {moneyPerWeek: 200}\n    preemption: {withinTeam: LowerPriority}",
).Replace(small)

var elasticSim = map[string]simcluster.ElasticFlavor{
	"spot": {ReclaimAfter: 3 * time.Hour},
	"dws":  {Check: "dws-check", Provisioning: 20 * time.Minute},
}

func newElasticEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, parse(t, elasticSmall), withElastic(elasticSim))
	// bob fills nlp's reserved quota for 6h.
	check(t, e.do("bob", "/gpu request 16xh100 for 6h"), want{"sender", "r1 running"})
	return e
}

// A request that would wait hours on reserved capacity is offered spot
// and DWS side by side, with each one's start and cost; the Switch button
// moves it, audited, and the spot request starts at once.
func TestElasticOfferAndSwitch(t *testing.T) {
	e := newElasticEnv(t)
	outs := e.do("alice", "/gpu request 8xh100 for 2h")
	check(t, outs,
		want{"channel #nlp r2", "Sooner on elastic capacity:\nreserved: starts in 3h–6h (11:00–14:00), next in line"},
		want{"channel #nlp r2", "spot (spot): now, may be reclaimed, ≈ $32 (16 GPU-hours)"},
		want{"channel #nlp r2", "dws (provisioned): in about 30m (assumed: no provisioning seen yet), ≈ $64 (16 GPU-hours), runs at most 1d"},
		want{"sender", "/gpu switch r2 spot or /gpu switch r2 dws"},
	)
	card := said(outs, "channel #nlp r2")[0]
	diff(t, "card buttons", []string{"Switch to spot: switch r2 spot", "Switch to dws: switch r2 dws", "Cancel: cancel r2"}, buttons(card))

	outs = e.press("alice", commands.VerbSwitch, "r2", "spot")
	check(t, outs,
		want{"thread r2", "Switched to spot (spot) by alice"},
		want{"thread r2", "Admitted at once on"},
		want{"sender", "Switched r2 to spot."},
	)
	r := e.req("r2")
	if r.State != records.StateRunning || r.AdmittedFlavor != "spot" || r.Elastic == nil || r.Elastic.From != "h100" || r.Elastic.By != "alice" || r.Elastic.Reserved == nil {
		t.Errorf("after the switch r2 = %+v, elastic %+v; want running on spot, switched by alice with the reserved estimate kept", r, r.Elastic)
	}
	a := e.auditEntries("r2")
	last := a[len(a)-1]
	for _, x := range a {
		if x.Action == "switch" {
			last = x
		}
	}
	if last.Action != "switch" || last.Outcome != "ok" || last.Via != "button" || !strings.Contains(last.Detail, "to spot") {
		t.Errorf("audit of the switch = %+v; want alice's switch by button, ok", last)
	}
	// Pressing it again is stale: it is running now.
	check(t, e.press("alice", commands.VerbSwitch, "r2", "dws"), want{"sender", "only a queued request can switch, and it is running"})
}

// An option over the team's weekly budget is shown with why and without
// a button, in the card and the reply; /gpu switch to it is refused with
// the same reason; a member's large switch waits for a lead.
func TestElasticBudgetAndApproval(t *testing.T) {
	e := newElasticEnv(t)
	e.do("alice", "/gpu request 8xh100 for 6h") // r2: $96 on spot, $192 on dws
	outs := e.press("alice", commands.VerbSwitch, "r2", "spot")
	check(t, outs, want{"thread r2", "Admitted at once"})
	// $96 of $200 committed: another 8 GPUs for 6h fits neither on spot
	// (would be $192) nor on dws ($192).
	outs = e.do("alice", "/gpu request 8xh100 for 6h")
	check(t, outs,
		want{"channel #nlp r3", "spot (spot): now, may be reclaimed, ≈ $96 (48 GPU-hours)\n"},
		want{"channel #nlp r3", "— not available: over nlp's elastic budget: $96 of $200 a week used or committed, this needs $192"},
	)
	for _, b := range buttons(said(outs, "channel #nlp r3")[0]) {
		if strings.HasPrefix(b, "Switch to dws") {
			t.Errorf("the over-budget option has a button: %s", b)
		}
	}
	check(t, e.do("alice", "/gpu switch r3 dws"), want{"sender", "r3 cannot switch to dws: over nlp's elastic budget"})
	if a := e.lastAudit(); a.Action != "switch" || a.Outcome != "refused" {
		t.Errorf("last audit = %+v, want the refused switch", a)
	}

	// A member's switch of more than 8 GPUs waits for bob; the request
	// stays queued on reserved capacity until he approves.
	e.do("bob", "/gpu cancel r3")
	e.do("alice", "/gpu request 16xh100 for 1h") // r4
	outs = e.press("alice", commands.VerbSwitch, "r4", "dws")
	check(t, outs,
		want{"sender", "needs approval"},
		want{"person bob", "alice asks to switch r4"},
	)
	if r := e.req("r4"); r.State != records.StateQueued || r.Flavor != "h100" || r.Elastic.PendingSwitch != "dws" {
		t.Errorf("r4 while the switch waits = state %s flavor %q elastic %+v", r.State, r.Flavor, r.Elastic)
	}
	check(t, e.press("alice", commands.VerbApprove, "r4", ""), want{"sender", "Only bob (lead of nlp) or carol (admin) can approve r4"})
	outs = e.press("bob", commands.VerbApprove, "r4", "")
	check(t, outs, want{"thread r4", "Switched to dws (provisioned) by bob"}, want{"person alice", "Your request r4 was switched to dws by bob"})
	if r := e.req("r4"); r.Flavor != "dws" || r.Elastic.PendingSwitch != "" {
		t.Errorf("r4 after approval = flavor %q elastic %+v; want on dws", r.Flavor, r.Elastic)
	}
}

// A provisioned request: its check is told in the thread (asked, then
// provisioned), it is admitted onto the provisioned nodes, and the time
// it took is what the next offer estimates.
func TestElasticProvisioning(t *testing.T) {
	e := newElasticEnv(t)
	e.do("alice", "/gpu request 8xh100 for 2h")
	outs := e.press("alice", commands.VerbSwitch, "r2", "dws")
	check(t, outs,
		want{"thread r2", "Kueue asked the cluster autoscaler for 1 node of dws (admission check dws-check)"},
		want{"card r2", "r2 waits for provisioning"},
	)
	checkNot(t, outs, want{"thread r2", "New estimate"})
	outs = e.advance(25 * time.Minute)
	check(t, outs,
		want{"thread r2", "Provisioned after 20m: the dws nodes are there"},
		want{"thread r2", "Admitted after 20m on dws-b1-r1-n1"},
	)
	r := e.req("r2")
	if d, ok := r.Elastic.ProvisioningTime(); !ok || d != 20*time.Minute {
		t.Errorf("r2's provisioning time = %s, %v; want 20m", d, ok)
	}
	outs = e.do("dave", "/gpu request 16xh100 for 7h") // vision: waits for nothing
	outs = e.do("alice", "/gpu request 8xh100 for 1h")
	check(t, outs, want{"channel #nlp r4", "dws (provisioned): in about 20m (from the last provisioning)"})
}

// A provisioning attempt that fails is told in the thread and to the
// owner, the quota goes back meanwhile, Kueue's retry is told, and the
// retry's nodes admit it; when every attempt fails, the thread says it was
// given up and how to go back to reserved capacity, which works.
func TestElasticProvisioningFailsAndRetries(t *testing.T) {
	sim := map[string]simcluster.ElasticFlavor{
		"spot": elasticSim["spot"],
		"dws":  {Check: "dws-check", Provisioning: 20 * time.Minute, FailAttempts: 1, Retry: commands.ProvisioningRetry{Limit: 1, Backoff: 5 * time.Minute, MaxBackoff: 30 * time.Minute}},
	}
	e := newEnv(t, parse(t, elasticSmall), withElastic(sim))
	check(t, e.do("bob", "/gpu request 16xh100 for 6h"), want{"sender", "r1 running"})
	e.do("alice", "/gpu request 8xh100 for 2h")
	check(t, e.press("alice", commands.VerbSwitch, "r2", "dws"), want{"thread r2", "Kueue asked the cluster autoscaler for 1 node of dws"})
	outs := e.advance(21 * time.Minute)
	check(t, outs,
		want{"thread r2", "Provisioning failed (attempt 1): no capacity for 1 nodes of dws in the zone (simulated). Kueue gives the quota back and tries again after a back-off"},
		want{"person alice", "Provisioning of your request r2 on dws failed (attempt 1)"},
		want{"card r2", "Provisioning failed (attempt 1"},
	)
	checkNot(t, outs, want{"thread r2", "Admitted"})
	outs = e.advance(5 * time.Minute) // +26m: the back-off (5m) is over at +25m
	check(t, outs, want{"thread r2", "Provisioning again, attempt 2"})
	outs = e.advance(20 * time.Minute) // +46m: attempt 2's nodes came at +45m
	check(t, outs,
		want{"thread r2", "Provisioned after 20m: the dws nodes are there"},
		want{"thread r2", "Admitted after 45m on dws-"},
	)
	if r := e.req("r2"); r.State != records.StateRunning || r.AdmittedFlavor != "dws" || r.Elastic.FailedTold != 1 {
		t.Errorf("r2 = %s on %s, failures told %d; want running on dws, one failure told", r.State, r.AdmittedFlavor, r.Elastic.FailedTold)
	}

	// Every attempt of r3 fails: after the one retry it is given up.
	sim["dws"] = simcluster.ElasticFlavor{Check: "dws-check", Provisioning: 20 * time.Minute, FailAttempts: 9, Retry: commands.ProvisioningRetry{Limit: 1, Backoff: 5 * time.Minute, MaxBackoff: 30 * time.Minute}}
	e = newEnv(t, parse(t, elasticSmall), withElastic(sim))
	e.do("bob", "/gpu request 16xh100 for 6h")
	e.do("alice", "/gpu request 8xh100 for 2h")
	e.press("alice", commands.VerbSwitch, "r2", "dws")
	e.advance(21 * time.Minute)
	e.advance(5 * time.Minute)
	outs = e.advance(20 * time.Minute)
	check(t, outs,
		want{"thread r2", "Provisioning was given up: no capacity for 1 nodes of dws in the zone (simulated). It will not start on dws; /gpu switch r2 h100 puts it back on reserved capacity"},
		want{"person alice", "Your request r2 will not start on dws: provisioning was given up"},
	)
	outs = e.do("alice", "/gpu switch r2 h100")
	check(t, outs,
		want{"thread r2", "Switched back to h100 (reserved capacity) by alice; it is queued there"},
		want{"sender", "Switched r2 back to h100."},
	)
	r := e.req("r2")
	if r.State != records.StateQueued || r.Flavor != "h100" || r.Elastic.Reserved != nil || r.Elastic.Check != "" {
		t.Errorf("r2 after switching back = %s on %q, elastic %+v; want queued on h100, nothing elastic left", r.State, r.Flavor, r.Elastic)
	}
	if a := e.lastAudit(); a.Action != "switch" || a.Outcome != "ok" || !strings.Contains(a.Detail, "from dws back to h100") {
		t.Errorf("last audit = %+v", a)
	}
	// It starts on h100 when bob's work ends, and spends nothing.
	check(t, e.advance(6*time.Hour), want{"thread r2", "Admitted after"})
	if r := e.req("r2"); r.AdmittedFlavor != "h100" {
		t.Errorf("r2 admitted on %s, want h100", r.AdmittedFlavor)
	}
}

// Spot nodes reclaimed mid-run: the owner is told, the request is queued
// again on spot with a new estimate, and the GPU-hours it used are kept.
func TestElasticSpotReclaimed(t *testing.T) {
	e := newElasticEnv(t)
	e.do("alice", "/gpu request 8xh100 for 5h")
	e.press("alice", commands.VerbSwitch, "r2", "spot")
	outs := e.advance(3*time.Hour + time.Minute)
	check(t, outs,
		want{"thread r2", "Its spot nodes were reclaimed after running 3h (spot node spot-b1-r1-n1 reclaimed (simulated)); it is queued again on spot."},
		want{"person alice", "Your request r2 lost its spot nodes after running 3h"},
	)
	r := e.req("r2")
	if r.Elastic.Reclaims != 1 || r.Preemptions != 1 {
		t.Errorf("r2 after the reclaim: reclaims %d, preemptions %d; want 1 and 1", r.Elastic.Reclaims, r.Preemptions)
	}
	found := false
	for _, u := range e.usage() {
		if u.Request == "r2" && u.Flavor == "spot" && u.End.Sub(u.Start) == 3*time.Hour {
			found = true
		}
	}
	if !found {
		t.Errorf("no usage record of r2's 3h on spot: %+v", e.usage())
	}
}

// Asking for an elastic flavor directly is held to its maximum run time
// and to the budget.
func TestElasticDirectRequest(t *testing.T) {
	e := newElasticEnv(t)
	check(t, e.do("alice", "/gpu request 8xdws for 2d"), want{"sender", "dws runs at most 1d and this asks for 2d"})
	check(t, e.do("alice", "/gpu request 16xspot for 8h"), want{"sender", "over nlp's elastic budget: $0 of $200 a week used or committed, this needs $256"})
	check(t, e.do("alice", "/gpu request 8xspot for 2h"), want{"sender", "r2 running on spot-b1-r1-n1"})
}

func TestParseSwitch(t *testing.T) {
	v := commands.Vocabulary{Flavors: []string{"h100", "h100-spot"}, Teams: []string{"nlp"}}
	c, err := commands.Parse("/gpu switch #12 H100-SPOT", v)
	if err != nil || c.Verb != commands.VerbSwitch || c.ID != "r12" || c.Flavor != "h100-spot" {
		t.Errorf("Parse = %+v, %v; want switch r12 h100-spot", c, err)
	}
	for in, msg := range map[string]string{
		"switch r12":            "say which flavor to switch to",
		"switch r12 h100-spto":  "h100-spot",
		"switch r12 spot extra": "unknown flavor",
	} {
		_, err := commands.Parse(in, v)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("Parse(%q) = %v; want an error mentioning %q", in, err, msg)
		}
	}
}

// An option ruled out before its start is known is listed with why, and
// without a start of its own (no dangling "h100-spot (spot): , …"). On the
// bundled example, 40 GPUs are more than nlp may use of h100-spot.
func TestElasticOptionBlockedBeforeItsStart(t *testing.T) {
	e := newEnv(t, exampleConfig(t), seeded)
	outs := e.do("bob", "/gpu request 40xh100 for 8h")
	card := said(outs, "channel #gpu-nlp r10")
	if len(card) == 0 {
		t.Fatalf("no card for r10: %v", outs)
	}
	got := text(card[0])
	if !strings.Contains(got, "h100-spot (spot): may be reclaimed") || !strings.Contains(got, "not available: more than nlp may use of h100-spot even with borrowing") {
		t.Errorf("want h100-spot listed as not available, without a start:\n%s", got)
	}
}

// A switch the cluster refuses leaves the request as it was, and its
// thread, which was told of the switch before the cluster acted, is told
// it failed.
func TestElasticSwitchThatFails(t *testing.T) {
	e := newElasticEnv(t)
	e.do("alice", "/gpu request 8xh100 for 2h")
	e.cluster.failApply = errTimeout
	outs := e.press("alice", commands.VerbSwitch, "r2", "spot")
	e.cluster.failApply = nil
	check(t, outs,
		want{"thread r2", "Switched to spot (spot) by alice"},
		want{"thread r2", "The switch to spot failed on gpubot's side"},
		want{"sender", "switching r2 to spot failed on gpubot's side"},
	)
	if r := e.req("r2"); r.State != records.StateQueued || r.Flavor == "spot" || r.Elastic != nil && r.Elastic.By != "" {
		t.Errorf("after a failed switch r2 = %+v, elastic %+v; want it pending as before", r, r.Elastic)
	}
}

// On a real cluster (a plain Cluster, whose API calls the service makes
// outside its write section) the thread is told of a switch before the
// cluster is asked to make it, through SetOrderedDelivery, so that Kueue's
// admission, which the watch tells, cannot come first; and it is told
// once: Handle does not return what was sent as it was committed.
func TestSwitchIsToldBeforeTheClusterActs(t *testing.T) {
	api := newAPICluster(gateOn(commands.OpSwitch, "r2"))
	e := newEnv(t, parse(t, elasticSmall), withElastic(elasticSim), withAPI(api))
	e.do("bob", "/gpu request 16xh100 for 6h")
	e.do("alice", "/gpu request 8xh100 for 2h")
	rec := &recorder{}
	e.svc.SetOrderedDelivery(rec.send)
	done := async(t, func() []commands.Output {
		return e.svc.Handle(e.ctx, commands.Input{User: "alice", Action: &commands.Action{Name: commands.VerbSwitch, Request: "r2", Arg: "spot"}})
	})
	<-api.entered
	early := rec.all()
	check(t, early, want{"thread r2", "Switched to spot (spot) by alice"})
	for _, o := range early {
		if o.Seq == 0 {
			t.Errorf("an output sent early is not in the outbox: %+v", o)
		}
	}
	close(api.release)
	outs := done()
	if got := said(outs, "thread r2"); slices.ContainsFunc(got, func(r commands.Reply) bool { return strings.Contains(r.Text, "Switched to spot") }) {
		t.Errorf("Handle returned the switch's thread post again after sending it early: %v", got)
	}
	// The rest is sent as it is committed, or returned.
	all := append(rec.all(), outs...)
	check(t, all, want{"sender", "Switched r2 to spot."})
}

// TestSpotOfferSimulatedOncePerRequest: a request command that waits
// long works out its spot start once for its card and its reply; one that
// starts soon, with no offer, works out none.
func TestSpotOfferSimulatedOncePerRequest(t *testing.T) {
	e := newElasticEnv(t)
	before := e.svc.SpotSimulations()
	outs := e.svc.Handle(e.ctx, commands.Input{User: "alice", Text: "/gpu request 8xh100 for 2h"})
	check(t, outs,
		want{"channel #nlp r2", "spot (spot): now, may be reclaimed"},
		want{"sender", "/gpu switch r2 spot or /gpu switch r2 dws"},
	)
	if n := e.svc.SpotSimulations() - before; n != 1 {
		t.Errorf("%d spot simulations for one request command with an offer, want 1 (card and reply share it)", n)
	}
	// Queued, but starting within offerAfter (1h): no offer, no simulation.
	fresh := newEnv(t, parse(t, elasticSmall), withElastic(elasticSim))
	check(t, fresh.do("bob", "/gpu request 16xh100 for 30m"), want{"sender", "r1 running"})
	before = fresh.svc.SpotSimulations()
	outs = fresh.svc.Handle(fresh.ctx, commands.Input{User: "alice", Text: "/gpu request 8xh100 for 1h"})
	check(t, outs, want{"channel #nlp r2", "starts in"})
	checkNot(t, outs, want{"channel #nlp r2", "Sooner on elastic capacity"})
	if n := fresh.svc.SpotSimulations() - before; n != 0 {
		t.Errorf("%d spot simulations for a request that starts soon (no offer), want 0", n)
	}
}

// TestRefreshSpotOffersShareOneCopy: a refresh that re-posts the cards of
// several waiting requests works out each one's spot start on one copy
// of the cluster, and each as if it were the only one: every card says
// spot starts now, though the spot nodes hold one of them only.
func TestRefreshSpotOffersShareOneCopy(t *testing.T) {
	en := &shiftedEngine{}
	e := newEnv(t, parse(t, elasticSmall), withElastic(elasticSim), withEngine(en))
	check(t, e.do("bob", "/gpu request 16xh100 for 6h"), want{"sender", "r1 running"})
	ids := []string{"r2", "r3", "r4"}
	for _, id := range ids {
		check(t, e.do("alice", "/gpu request 16xh100 for 2h"), want{"channel #nlp " + id, "spot (spot): now"})
	}
	en.shift = 5 * time.Hour
	sims, copies, bares := e.svc.SpotSimulations(), e.svc.SnapshotCopies(), e.svc.BareSnapshots()
	e.svc.MarkEstimatesStale()
	outs := e.svc.Settle(e.ctx)
	for _, id := range ids {
		check(t, outs, want{"card " + id, "spot (spot): now"})
	}
	if n := e.svc.SpotSimulations() - sims; n != uint64(len(ids)) {
		t.Errorf("%d spot simulations for %d re-posted cards, want one each", n, len(ids))
	}
	if n := e.svc.SnapshotCopies() - copies; n != 2 {
		t.Errorf("the refresh made %d copies of the cluster, want 2 (its own, and one for all its spot simulations)", n)
	}
	if n := e.svc.BareSnapshots() - bares; n != 1 {
		t.Errorf("the refresh's offers made %d empty snapshots of the cluster for %d cards, want 1", n, len(ids))
	}
}

// TestSpotOfferAfterAPreemptingOneIsFresh: a spot simulation that starts
// its request by preempting others leaves the copy it ran on changed; the
// next card's simulation runs on a fresh one (and also starts at once).
func TestSpotOfferAfterAPreemptingOneIsFresh(t *testing.T) {
	en := &shiftedEngine{}
	e := newEnv(t, parse(t, elasticSmall), withElastic(elasticSim), withEngine(en))
	check(t, e.do("bob", "/gpu request 16xh100 for 6h"), want{"sender", "r1 running"})
	for _, id := range []string{"r2", "r3"} { // low-priority work fills the spot nodes
		e.do("alice", "/gpu request 8xh100 for 6h priority low")
		check(t, e.press("alice", commands.VerbSwitch, id, "spot"), want{"sender", "Switched " + id + " to spot."})
	}
	ids := []string{"r4", "r5"}
	for range ids {
		e.do("alice", "/gpu request 16xh100 for 2h")
	}
	en.shift = 5 * time.Hour
	copies := e.svc.SnapshotCopies()
	e.svc.MarkEstimatesStale()
	outs := e.svc.Settle(e.ctx)
	for _, id := range ids {
		check(t, outs, want{"card " + id, "spot (spot): now"})
	}
	if n := e.svc.SnapshotCopies() - copies; n != uint64(1+len(ids)) {
		t.Errorf("the refresh made %d copies of the cluster, want %d (its own, and one for each of %d spot simulations that preempted)", n, 1+len(ids), len(ids))
	}
}

// A team's ClusterQueue edited behind gpubot's configuration (spot taken
// out of it) is not offered spot as if it could run there: the card says
// why and has no button for it, the flavor it still has is offered as
// usual, and switching to spot anyway is refused with the reason.
func TestElasticOfferOnAFlavorTheQueueLost(t *testing.T) {
	e := newElasticEnv(t)
	e.cluster.drop = map[string]string{"nlp": "spot"}
	outs := e.do("alice", "/gpu request 8xh100 for 2h")
	check(t, outs,
		want{"channel #nlp r2", "spot (spot): may be reclaimed, ≈ $32 (16 GPU-hours) — not available: nlp's queue in the cluster has no spot"},
		want{"channel #nlp r2", "dws (provisioned): in about 30m"},
		want{"sender", "/gpu switch r2 dws."},
	)
	diff(t, "card buttons", []string{"Switch to dws: switch r2 dws", "Cancel: cancel r2"}, buttons(said(outs, "channel #nlp r2")[0]))
	check(t, e.press("alice", commands.VerbSwitch, "r2", "spot"),
		want{"sender", "r2 cannot switch to spot: nlp's queue in the cluster has no spot. Nothing was changed."})
	if r := e.requests()["r2"]; r.State != records.StateQueued || r.Flavor != "h100" || r.Elastic != nil {
		t.Errorf("after the refused switch r2 = %+v, want queued on h100 as before", r)
	}
}
