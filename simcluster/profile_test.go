package simcluster_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/simcluster"
)

// Utilization comes from the profiles (busy without one), over the part
// of the window each workload has run; pending and unknown workloads are
// left out.
func TestGPUUtilization(t *testing.T) {
	f := newFixture(t, twoNodes())
	for _, w := range []string{"idle", "busy", "young"} {
		d := time.Duration(0)
		if w == "young" {
			d = 50 * time.Minute
		}
		f.at(d)
		if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: wl(w, 4, 1, 6*time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	f.at(time.Hour)
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: wl("waiting", 16, 1, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetProfile(f.ctx, "idle", simcluster.Profile{GPUUtilization: ptr.To(1.5)}); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetProfile(f.ctx, "nobody", simcluster.Profile{}); err == nil {
		t.Error("SetProfile of a workload the cluster does not have succeeded")
	}
	got, err := f.sim.GPUUtilization(f.ctx, []string{"idle", "busy", "young", "waiting", "nobody"}, 20*time.Minute, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]commands.Utilized{
		"idle":  {Peak: 1.5, Coverage: 1, Source: "simulated"},
		"busy":  {Peak: simcluster.BusyUtilization, Coverage: 1, Source: "simulated"},
		"young": {Peak: simcluster.BusyUtilization, Coverage: 0.5, Source: "simulated"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("utilization (-want +got):\n%s", diff)
	}
}

// Pods that never become ready are reported once, at the timeout after
// the admission, which NextEvent announces; the profile is saved with
// the cluster and goes with the workload.
func TestPodsNeverReady(t *testing.T) {
	f := newFixture(t, twoNodes())
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: wl("stuck", 16, 1, 6*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetProfile(f.ctx, "stuck", simcluster.Profile{PodsNeverReady: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := f.sim.NextEvent(), t0.Add(simcluster.DefaultPodsReadyTimeout); !got.Equal(want) {
		t.Errorf("NextEvent %s, want the pods timeout %s", rel(got), rel(want))
	}
	f.at(5 * time.Minute)
	if evs, err := f.sim.Advance(f.ctx); err != nil || len(evs) != 0 {
		t.Fatalf("before the timeout: %v, %v", events(evs), err)
	}
	// A restart in between keeps the profile.
	again, _, err := simcluster.New(f.ctx, twoNodes(), f.st, f.clock)
	if err != nil {
		t.Fatal(err)
	}
	f.at(12 * time.Minute)
	evs, err := again.Advance(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"pods-not-ready stuck at +10m0s"}, events(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if evs[0].Pods != 2 || evs[0].Detail != "0 of 2 pods ready; pod gpubot-stuck-0: ImagePullBackOff (simulated)" {
		t.Errorf("pods %d, detail %q", evs[0].Pods, evs[0].Detail)
	}
	if got, want := again.NextEvent(), t0.Add(6*time.Hour); !got.Equal(want) {
		t.Errorf("NextEvent after the report %s, want the end %s", rel(got), rel(want))
	}
	f.at(20 * time.Minute)
	if evs, err := again.Advance(f.ctx); err != nil || len(evs) != 0 {
		t.Errorf("reported again: %v, %v", events(evs), err)
	}
	u, _ := again.GPUUtilization(f.ctx, []string{"stuck"}, 10*time.Minute, t0.Add(20*time.Minute))
	if u["stuck"].Peak != 0 {
		t.Errorf("GPUs of pods never ready at %v%%, want 0", u["stuck"].Peak)
	}
	if _, err := again.Apply(f.ctx, commands.Op{Kind: commands.OpRemove, ID: "stuck"}); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: wl("stuck", 16, 1, 6*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	f.at(40 * time.Minute)
	if evs, err := again.Advance(f.ctx); err != nil || len(evs) != 0 {
		t.Errorf("a new workload with the same ID kept the old profile: %v, %v", events(evs), err)
	}
}
