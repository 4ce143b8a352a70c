package app_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpubot/gpubot/internal/app"
)

// TestConsoleElastic: the same elastic story as on the fake Slack, in the
// console on the simulated cluster (elasticExample's configuration): the
// offer, a switch to DWS told step by step through a failed attempt, its
// retry and the admission on the new nodes; a switch to spot whose node
// is reclaimed after 3 hours, its owner told and the request requeued; and
// a request over the spent budget shown without Switch buttons, its
// /gpu switch refused with why.
func TestConsoleElastic(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	err := app.Run(context.Background(), app.Options{
		ConfigPath: elasticExample(t, ""),
		DataDir:    dir,
		Stdin: strings.NewReader(`:as bob
/gpu request 40xh100 for 8h
/gpu request 16xh100 for 2h
/gpu request 16xh100 for 5h
:click Switch to h100-dws r11
:click Switch to h100-spot r12
/gpu request 16xh100 for 8h
/gpu switch r13 h100-spot
:advance 25m
:advance 2m
:advance 25m
:advance 2h9m
/gpu status r12
`),
		Stdout:  &out,
		Start:   start,
		LogFile: filepath.Join(dir, "test.log"),
	})
	if err != nil {
		t.Fatalf("app.Run: %v\n%s", err, out.String())
	}
	got := out.String()
	contains(t, got,
		"new card r11", "Sooner on elastic capacity:", "h100-spot (spot): now, may be reclaimed, ≈ $102 (32 GPU-hours)", "] Switch to h100-spot", "] Switch to h100-dws",
		"bob> :click Switch to h100-dws r11", "Switched to h100-dws (provisioned) by bob",
		"Kueue asked the cluster autoscaler for 2 nodes of h100-dws (admission check dws-h100)",
		"bob> :click Switch to h100-spot r12", "Switched to h100-spot (spot) by bob",
		"new card r13", "h100-spot (spot): now, may be reclaimed, ≈ $410 (128 GPU-hours), runs at most 1d — not available: over nlp's elastic budget: $429 of $600 a week used or committed, this needs $410",
		"bob> /gpu switch r13 h100-spot", "r13 cannot switch to h100-spot: over nlp's elastic budget",
		"bob> :advance 25m", "Provisioning failed (attempt 1): no capacity for 2 nodes of h100-dws in the zone (simulated)",
		"Provisioning of your request r11 on h100-dws failed (attempt 1)",
		"bob> :advance 2m", "Provisioning again, attempt 2",
		"bob> :advance 25m", "Provisioned after 25m: the h100-dws nodes are there", "Admitted after 52m on h100-dws-",
		"bob> :advance 2h9m", "Your request r12 lost its spot nodes after running 3h",
		"Its spot nodes were reclaimed after running 3h", "it is queued again on h100-spot", "thread of r12", "Admitted at once on h100-spot-",
	)
	r13 := got[strings.Index(got, "new card r13"):]
	r13 = r13[:strings.Index(r13, "bob> /gpu switch r13")]
	if strings.Contains(r13, "] Switch to") {
		t.Errorf("the over-budget options of r13 have buttons:\n%s", r13)
	}
	db := open(t, dir)
	if r := request(t, db, "r11"); r.AdmittedFlavor != "h100-dws" || r.Elastic == nil || r.Elastic.FailedTold != 1 {
		t.Errorf("r11 = %s on %s, elastic %+v; want running on h100-dws after one failure", r.State, r.AdmittedFlavor, r.Elastic)
	}
	if r := request(t, db, "r12"); r.Elastic == nil || r.Elastic.Reclaims != 1 {
		t.Errorf("r12's elastic record = %+v; want one reclaim", r.Elastic)
	}
}
