package digest_test

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
	"github.com/gpubot/gpubot/records"
)

// due is when the tests' digest is due: Tuesday 1 December, 09:00 in
// Berlin; "yesterday" is Monday 30 November.
var due = time.Date(2026, 12, 1, 9, 0, 0, 0, berlin)

// monday fills the store with a Monday whose numbers are worked out in
// TestDailyDigestNumbers.
func monday(e *env) {
	est := func(at, from, to time.Time) *records.Estimate {
		return &records.Estimate{At: at, Earliest: from, Latest: to, Known: true}
	}
	e.put(
		// r1: high, waited 30m, started inside its estimate give or take
		// a minute (half a minute after it), ran out of its requested time.
		records.Request{ID: "r1", Requester: "alice", Team: "nlp", GPUs: 8, Priority: "high", Duration: 4 * time.Hour,
			State: records.StateFinished, CreatedAt: at(30, 10, 0), SubmittedAt: at(30, 10, 0), QueuedAt: at(30, 10, 0),
			AdmittedAt: at(30, 10, 30), EndedAt: at(30, 14, 30), EndReason: commands.EndTimeUp,
			FirstEstimate: est(at(30, 10, 0), at(30, 10, 20), at(30, 10, 29).Add(30*time.Second)),
			Waits:         []records.Wait{{From: at(30, 10, 0), To: at(30, 10, 30)}}},
		// r2: normal, asked on Sunday, waited 3h, preempted at 05:00 and
		// waited again 1h, released at noon; started outside its estimate.
		records.Request{ID: "r2", Requester: "alice", Team: "nlp", GPUs: 4, Priority: "normal", Duration: 12 * time.Hour,
			State: records.StateFinished, CreatedAt: at(29, 22, 0), QueuedAt: at(30, 5, 0), AdmittedAt: at(30, 6, 0),
			EndedAt: at(30, 12, 0), EndReason: "released by alice", Preemptions: 1,
			FirstEstimate: est(at(29, 22, 0), at(30, 0, 0), at(30, 0, 30)),
			Waits:         []records.Wait{{From: at(29, 22, 0), To: at(30, 1, 0)}, {From: at(30, 5, 0), To: at(30, 6, 0)}}},
		// r3: high, asked Monday 20:00, still waiting: 4h at midnight.
		records.Request{ID: "r3", Requester: "dave", Team: "vision", GPUs: 8, Priority: "high", Duration: 2 * time.Hour,
			State: records.StateQueued, CreatedAt: at(30, 20, 0), SubmittedAt: at(30, 20, 0), QueuedAt: at(30, 20, 0)},
		// r4: awaiting approval since Monday 08:00: 16h at midnight.
		records.Request{ID: "r4", Requester: "dave", Team: "vision", GPUs: 32, Priority: "normal", Duration: 6 * time.Hour,
			State: records.StateAwaitingApproval, CreatedAt: at(30, 8, 0)},
		// r5: denied after half an hour: not a wait for GPUs.
		records.Request{ID: "r5", Requester: "grace", Team: "speech", GPUs: 8, Priority: "low", Duration: time.Hour,
			State: records.StateDenied, CreatedAt: at(30, 8, 30), EndedAt: at(30, 9, 0), DeniedBy: "frank"},
		// r6: seeded work running since Sunday: GPU-hours, never a wait.
		records.Request{ID: "r6", Requester: "frank", Team: "speech", GPUs: 8, Priority: "normal", Duration: 3 * 24 * time.Hour,
			State: records.StateRunning, Origin: "seed", CreatedAt: at(29, 0, 0), AdmittedAt: at(29, 0, 0),
			Waits: []records.Wait{{From: at(29, 0, 0), To: at(29, 0, 0)}}},
	)
	e.use(
		records.UsageRecord{Request: "r1", Team: "nlp", Requester: "alice", Flavor: "h100", GPUs: 8, Start: at(30, 10, 30), End: at(30, 14, 30)},
		records.UsageRecord{Request: "r2", Team: "nlp", Requester: "alice", Flavor: "h100", GPUs: 4, Start: at(30, 1, 0), End: at(30, 5, 0)},
		records.UsageRecord{Request: "r2", Team: "nlp", Requester: "alice", Flavor: "h100", GPUs: 4, Start: at(30, 6, 0), End: at(30, 12, 0)},
	)
	e.audit(
		records.AuditEntry{At: at(29, 0, 0), Actor: "gpubot", Action: "seed", Target: "r6", Outcome: "ok"},
		records.AuditEntry{At: at(30, 5, 0), Actor: "gpubot", Action: "preempted", Target: "r2", Outcome: "ok"},
	)
	h100 := func(frag float64, largest int) []records.FlavorSample {
		return []records.FlavorSample{{Flavor: "h100", GPUs: 32, Free: 8, Fragmented: frag, Largest: largest}}
	}
	e.sample(
		records.Sample{At: at(30, 10, 0), Pending: 2, Waiting: map[string]int{"quota": 2}, Flavors: h100(6, 4)},
		records.Sample{At: at(30, 11, 0), Pending: 1, Waiting: map[string]int{"capacity": 1}, Flavors: h100(3, 6)},
		records.Sample{At: at(30, 12, 0), Flavors: h100(0, 8)},
		// The Sunday before: the trend.
		records.Sample{At: at(29, 12, 0), Flavors: h100(8, 0)},
	)
}

var mondayZombies = zombieList{
	{ID: "z1", Team: "nlp", Owner: "alice", GPUs: 8, Kind: records.ZombieIdle, Since: at(30, 11, 0), FoundAt: at(30, 11, 20),
		Outcome: records.ZombieReleasedByOwner, ResolvedAt: at(30, 13, 0), ResolvedBy: "alice"},
	{ID: "z2", Team: "vision", Owner: "dave", GPUs: 4, Kind: records.ZombiePodsNotReady, Since: at(30, 22, 0), FoundAt: at(30, 22, 30)},
}

func mondayCluster() *allocator.Cluster {
	return cluster(4, map[string][2]int{"nlp": {16, 8}, "vision": {8, 8}, "speech": {8, -1}})
}

// mondayWorkloads: r6 runs, r3 waits (the cluster is full).
func mondayWorkloads() []allocator.Workload {
	return []allocator.Workload{
		{ID: "r6", Queue: "speech", Priority: prio["normal"], GPUs: 32, Created: at(29, 0, 0), Duration: 3 * 24 * time.Hour,
			Admission: &allocator.Admission{Flavor: "h100", At: at(29, 0, 0), Nodes: []string{"h100-n1", "h100-n2", "h100-n3", "h100-n4"}}},
		{ID: "r3", Queue: "vision", Priority: prio["high"], GPUs: 8, Created: at(30, 20, 0), Duration: 2 * time.Hour},
	}
}

func TestDailyDigestNumbers(t *testing.T) {
	e := newEnv(t)
	monday(e)
	eng := e.engine(mondayCluster(), due, mondayWorkloads(), mondayZombies)
	r, err := eng.Digest(e.ctx, "", due)
	if err != nil {
		t.Fatal(err)
	}
	got := text(r)
	// GPU-hours: nlp 32 + 16 + 24 = 72, speech's seed 8 × 24 = 192.
	has(t, got,
		"Daily digest for the cluster, Mon 30 Nov: 264 GPU-hours, 3 requests started, high-priority p95 wait 4h.",
		"speech | 192 | 27 | 73% | 33% | 100%",
		"nlp | 72 | 0 | 27% | 33% | 19%",
		"vision | 0 | 0 | 0% | 33% | 0%",
		// high: r1 30m, r3 4h still waiting; normal: r2 3h and 1h, r4 16h.
		"high | 2 (1 still waiting) | 30m | 4h | 4h | –",
		// The 7 days before: r2's first wait, 2h at Sunday midnight.
		"normal | 3 (1 still waiting) | 3h | 16h | 16h | 2h",
		"Requests: 4 new, 3 started, 1 finished, 1 ran out of their requested time, 1 preempted, 1 denied, 0 cancelled",
		"r4: dave, 32 GPUs for 6h, asked Mon 08:00 (1d1h ago); erin (lead) or carol (admin) can decide.",
		"Over the day (3 samples): 9.4% of all GPUs on average (7 days before: 25.0%); largest request that fit: h100 median 6, smallest 4.",
		"Zombies: 2 found (1 still open, 1 released by their owner); 24 GPU-hours held without being used.",
		// r1 inside give or take a minute, not exactly; r2 outside.
		"Estimates: 1 of 2 starts fell inside the first posted range, give or take a minute (50%; 0% exactly); median error 5m, median range width 10m.",
		"Work waited in 67% of the samples yesterday; the queue was quota-bound 50% of that time.",
	)
	if strings.Contains(got, "low |") {
		t.Errorf("a denied request counted as a wait:\n%s", got)
	}
	if r.Image == nil || r.Image.Name != "gpubot-digest-cluster-2026-11-30.png" {
		t.Fatalf("image = %+v, want the cluster chart of 30 Nov", r.Image)
	}
	img, err := png.Decode(bytes.NewReader(r.Image.PNG))
	if err != nil {
		t.Fatalf("the chart is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 500 {
		t.Errorf("chart is %v, too small to read", b)
	}
	has(t, r.Image.Alt, "GPU-hours per day (Tue 24, Wed 25, Thu 26, Fri 27, Sat 28, Sun 29, Mon 30)",
		"speech: 0, 0, 0, 0, 0, 192, 192", "nlp: 0, 0, 0, 0, 0, 0, 72", "high: –, –, –, –, –, –, 4h")
}

func TestTeamDigestIsByPerson(t *testing.T) {
	e := newEnv(t)
	monday(e)
	eng := e.engine(mondayCluster(), due, mondayWorkloads(), mondayZombies)
	r, err := eng.Digest(e.ctx, "nlp", due)
	if err != nil {
		t.Fatal(err)
	}
	got := text(r)
	has(t, got,
		"Daily digest for nlp, Mon 30 Nov: 72 GPU-hours, 3 requests started, high-priority p95 wait 30m.",
		"nlp used 72 GPU-hours (7 days before: 0 a day), 27% of the cluster's (fair share 33%), 19% of its nominal quota of 16 GPUs.",
		"Person | GPU-hours",
		"alice | 72 | 0",
		"Requests: 1 new, 3 started, 1 finished, 1 ran out of their requested time, 1 preempted, 0 denied",
		"Zombies: 1 found (1 released by their owner); 16 GPU-hours held without being used.",
		"Nothing of nlp waits now, so no what-if applies.",
	)
	for _, other := range []string{"r4:", "vision |", "dave"} {
		if strings.Contains(got, other) {
			t.Errorf("nlp's digest shows %q from another team:\n%s", other, got)
		}
	}
	if r.Image == nil || !strings.Contains(r.Image.Alt, "alice: 0, 0, 0, 0, 0, 0, 72") {
		t.Errorf("team chart is not by person: %+v", r.Image)
	}
	if _, err := eng.Digest(e.ctx, "nosuch", due); err == nil {
		t.Error("a digest of an unknown team was built")
	}
}

func TestEmptyDigestIsOneLine(t *testing.T) {
	e := newEnv(t)
	eng := e.engine(mondayCluster(), due, nil, mondayZombies)
	r, err := eng.Digest(e.ctx, "speech", due)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Daily digest for speech, Mon 30 Nov: nothing happened — no GPUs used, no requests, nothing waiting."; r.Text != want || len(r.Blocks) != 0 || r.Image != nil {
		t.Errorf("empty digest = %q with %d blocks, image %v; want %q alone", r.Text, len(r.Blocks), r.Image != nil, want)
	}
}

func TestDigestWithoutZombieSweepsSaysSo(t *testing.T) {
	e := newEnv(t)
	monday(e)
	eng := e.engine(mondayCluster(), due, mondayWorkloads(), nil)
	r, err := eng.Digest(e.ctx, "", due)
	if err != nil {
		t.Fatal(err)
	}
	has(t, text(r), "zombie sweeps are not running")
}

// TestDigestJobPostsIntoTheChannel runs the scheduled job as the
// scheduler does: on time it posts the digest in its channel; late, it
// says it is late.
func TestDigestJobPostsIntoTheChannel(t *testing.T) {
	e := newEnv(t)
	monday(e)
	eng := e.engine(mondayCluster(), due, mondayWorkloads(), mondayZombies)
	s := digest.NewScheduler(e.db)
	daily := mustSchedule(t, "0 9 * * 1-5", berlin)
	report := digest.Posting{Channel: "#gpu-admins", Schedule: mustSchedule(t, "0 9 * * 1", berlin)}
	if err := eng.Register(s, []digest.Posting{{Team: "nlp", Channel: "#gpu-nlp", Schedule: daily}, {Channel: "#gpu-admins", Schedule: daily}}, report); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"sample cluster": digest.SampleEvery, "digest team nlp in #gpu-nlp": "0 9 * * 1-5",
		"digest cluster in #gpu-admins": "0 9 * * 1-5", "weekly report in #gpu-admins": "0 9 * * 1"}
	for name, spec := range want {
		if s.Jobs()[name] != spec {
			t.Errorf("job %q = %q, want %q (jobs: %v)", name, s.Jobs()[name], spec, s.Jobs())
		}
	}
	s.RunDue(e.ctx, due.Add(-time.Hour))
	outs := s.RunDue(e.ctx, due)
	var posts []commands.Output
	for _, o := range outs {
		if o.To.Kind == commands.ToPost {
			posts = append(posts, o)
		}
	}
	if len(posts) != 2 || posts[0].To.Channel != "#gpu-nlp" || posts[1].To.Channel != "#gpu-admins" {
		t.Fatalf("posts = %+v, want nlp's then the cluster's", posts)
	}
	if strings.Contains(text(posts[0].Reply), "Posted late") || strings.Contains(text(posts[0].Reply), "Only you see this") {
		t.Errorf("an on-time post says it is late or private:\n%s", text(posts[0].Reply))
	}
	samples, err := e.db.Samples(e.ctx, due.Add(-time.Hour), due.Add(time.Second))
	if err != nil || len(samples) != 1 {
		t.Fatalf("the sampler took %d samples (%v), want one at 09:00", len(samples), err)
	}
	if s := samples[0]; s.Pending != 1 || s.Waiting["cohort"] != 1 || len(s.Flavors) != 1 || s.Flavors[0].Free != 0 || s.AwaitingApproval != 1 {
		t.Errorf("sample = %+v; want r3 waiting for the cohort (speech borrows all of it) on a full h100, r4 awaiting approval", s)
	}

	// Wednesday's digest, with gpubot back only at 11:30.
	late := time.Date(2026, 12, 2, 11, 30, 0, 0, berlin)
	var lateDigest *commands.Output
	for _, o := range s.RunDue(e.ctx, late) {
		if o.To.Kind == commands.ToPost && o.To.Channel == "#gpu-admins" {
			lateDigest = &o
		}
	}
	if lateDigest == nil {
		t.Fatal("the missed digest was not posted at the late start")
	}
	has(t, text(lateDigest.Reply), "Posted late: it was due Wed 09:00, while gpubot was not running.", "Tue 1 Dec")
}

// TestPostingInItsOwnZone: a digest with its own time zone is due in
// that zone, and its "yesterday" is that zone's calendar day.
func TestPostingInItsOwnZone(t *testing.T) {
	e := newEnv(t)
	monday(e)
	eng := e.engine(mondayCluster(), due, mondayWorkloads(), mondayZombies)
	s := digest.NewScheduler(e.db)
	ny := mustZone("America/New_York")
	post := digest.Posting{Team: "vision", Channel: "#gpu-vision", Schedule: mustSchedule(t, "0 9 * * *", ny), Location: ny}
	if err := eng.Register(s, []digest.Posting{post}, digest.Posting{}); err != nil {
		t.Fatal(err)
	}
	s.RunDue(e.ctx, due) // 09:00 Berlin, 03:00 in New York: the baseline
	nine := time.Date(2026, 12, 1, 9, 0, 0, 0, ny)
	if got := s.Next(); !got.Equal(nine) && !got.Before(nine) {
		t.Fatalf("Next = %s, want by %s", got, nine)
	}
	var got string
	for _, o := range s.RunDue(e.ctx, nine) {
		if o.To.Kind == commands.ToPost {
			got = text(o.Reply)
		}
	}
	// Monday in New York ends at 06:00 on Tuesday in Berlin: r4's wait for
	// approval (since Monday 08:00 Berlin) is 22h by then.
	has(t, got, "Daily digest for vision, Mon 30 Nov:", "calendar day in America/New_York", "normal | 1 (1 still waiting) | 22h")
}
