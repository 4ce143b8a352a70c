package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/records"
)

// TestConsoleZombies: on the bundled example, the sweep (every 10
// minutes of simulated time) prompts the owners of the idle and the
// never-ready seed; grace keeps hers with its button; frank does not
// answer, so carol (speech's only lead is frank himself) is told 30
// minutes later and gpubot releases it 30 minutes after that — across a
// restart in between.
func TestConsoleZombies(t *testing.T) {
	dir := t.TempDir()
	out := chat(t, dir, `
:advance 10m
:as grace
:click still using it r4
:advance 30m
`)
	contains(t, out,
		"[Tue 09:00] ── direct message to frank ──", "pods are not all running",
		"[Tue 09:10] ── direct message to grace ──", "Your request r4 (6× h100, speech) holds 6 GPUs but looks unused: its GPUs have been idle since 08:40", "[1] Still using it   [2] Release",
		"── thread of r4 ──", "Zombie check z1",
		"── direct message to frank ──", "Your request r7 (5× h100, speech) holds 5 GPUs but looks unused: its pods have not all been running since 08:50",
		"If nobody answers, carol is told at 09:40 and gpubot releases it at 10:10.",
		"grace> :click still using it r4", "grace says r4 is still in use",
		"[Tue 09:40] ── direct message to carol ──", "r7 (5× h100, speech) holds 5 GPUs without using them", "frank did not answer within 30m. gpubot releases it at 10:10 unless someone answers.", "Release   [", "] Still using it",
		"── thread of r7 ──", "Zombie check z2: frank did not answer within 30m. Told carol.",
	)
	// gpubot restarts; the timeline goes on from the store.
	out = chat(t, dir, `
:advance 40m
/gpu status r7
`)
	contains(t, out,
		"[Tue 10:10] ── thread of r7 ──", "Released by gpubot after 1h20m; its 5 GPUs are free again.",
		"── direct message to frank ──", "gpubot released your request r7", "(zombie check z2)",
		"/gpu status r7", "Finished 10:10: released by gpubot",
	)
	db := open(t, dir)
	zs, err := db.Zombies(context.Background(), start.Add(-24*time.Hour), start.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, z := range zs {
		got = append(got, z.ID+" "+z.Request+" "+string(z.Kind)+" "+string(z.Outcome)+" "+z.ResolvedBy)
	}
	want := []string{"z1 r4 idle kept grace", "z2 r7 pods-not-ready auto-released gpubot"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("zombies (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"gpubot seed ok", "gpubot admitted ok", "gpubot pods-not-ready ok", "gpubot zombie-found ok", "gpubot zombie-leads-told ok", "gpubot release ok", "gpubot zombie-auto-released ok"}, audit(t, db, "r7")); d != "" {
		t.Errorf("audit of r7 (-want +got):\n%s", d)
	}
	if r := request(t, db, "r4"); r.State != records.StateRunning {
		t.Errorf("r4, kept, is %s", r.State)
	}
}
