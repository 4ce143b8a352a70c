package commands_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// TestWhatIf: what-ifs answer as a request would, and submit nothing.
func TestWhatIf(t *testing.T) {
	tests := map[string]struct {
		setup [][2]string
		user  string
		cmd   string
		says  []string
		not   []string
	}{
		"starts at once": {
			user: "alice", cmd: "whatif 8xh100 for 2h",
			says: []string{"If requested now, 8× h100 for 2h in nlp at normal priority would start at once on h100-b1-r1-n1."},
			not:  []string{"approval", "preempting"},
		},
		"queued": {
			setup: [][2]string{{"bob", "request 16xh100 for 2h"}},
			user:  "alice", cmd: "whatif 8xh100 for 1h",
			says: []string{
				"If requested now, 8× h100 for 1h in nlp at normal priority would be queued: starts in 1h–2h (09:00–10:00), next in line.",
				"It would wait for quota: nlp already uses 16 h100 GPUs against a nominal quota of 16, and may not borrow more.",
				"Nothing was submitted.",
			},
		},
		"starts only by automatic preemption": {
			setup: [][2]string{{"bob", "request 16xh100 for 2h priority low"}},
			user:  "alice", cmd: "whatif 8xh100 for 1h",
			says: []string{"would start at once on h100-b1-r1-n1 by preempting r1 (bob, 16 GPUs, low)."},
		},
		"an admin could preempt": {
			setup: [][2]string{{"erin", "request 16xh100 for 4h priority low"}},
			user:  "dave", cmd: "whatif 8xh100 for 1h",
			says: []string{"would be queued", "An admin could start it now by preempting r1 (erin, 16 GPUs, low)."},
		},
		"needs approval from a lead": {
			user: "alice", cmd: "whatif 16xh100 for 1h priority high",
			says: []string{"would start at once", "It needs approval first (more than 8 GPUs; priority high) from bob (lead of nlp) or carol (admin); until then it holds no quota."},
		},
		"needs approval the asker can give": {
			user: "bob", cmd: "whatif 16xh100 for 1h",
			says: []string{"It needs approval (more than 8 GPUs), which you can give yourself."},
		},
		"never fits": {
			user: "alice", cmd: "whatif 24xh100 for 1h",
			says: []string{"24× h100 can never be admitted for nlp"},
		},
		"not a member": {
			user: "alice", cmd: "whatif 8xh100 for 1h team vision",
			says: []string{"You are not a member of vision"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, parse(t, small))
			for _, c := range tc.setup {
				e.do(c[0], c[1])
			}
			before, workloads, audit, now := e.requests(), e.workloads(), e.audit(""), e.sim.Now()
			outs := e.do(tc.user, tc.cmd)
			diff(t, "destinations", []string{"sender"}, dests(outs))
			for _, s := range tc.says {
				check(t, outs, want{"sender", s})
			}
			for _, s := range tc.not {
				checkNot(t, outs, want{"sender", s})
			}
			diff(t, "requests", before, e.requests())
			diff(t, "workloads", workloads, e.workloads())
			diff(t, "audit", audit, e.audit(""))
			if !e.sim.Now().Equal(now) {
				t.Errorf("the cluster moved to %s", e.sim.Now())
			}
			// No request ID was used up.
			e.do("alice", "request 1xh100 for 1h")
			if _, err := e.db.GetRequest(e.ctx, "r"+strconv.Itoa(len(before)+1)); err != nil {
				t.Errorf("the next request did not get the next ID: %v", err)
			}
		})
	}
}

// TestWhatIfCapacity: only admins ask how waits change with more or fewer
// GPUs; the answer changes nothing.
func TestWhatIfCapacity(t *testing.T) {
	tests := map[string]struct {
		user  string
		cmd   string
		says  []string
		audit string
	}{
		"not an admin": {
			user: "bob", cmd: "whatif +8xh100",
			says:  []string{"Only admins (carol) can ask what-ifs about capacity. Nothing was changed."},
			audit: "bob whatif +8 h100 refused",
		},
		"more GPUs end fragmentation": {
			user: "carol", cmd: "whatif +8xh100",
			says: []string{
				"What if adding 8 h100 GPUs: mean wait of the 1 waiting requests 30m → 0m; 1 start earlier, 0 later.",
				"r5 | within 1h (09:00–10:00) | starts at once",
				"Simulated 1 new 8-GPU nodes in one new block. Quotas are unchanged. Nothing was changed in the cluster.",
			},
			audit: "carol whatif +8 h100 ok",
		},
		"fewer GPUs of another flavor": {
			user: "carol", cmd: "whatif -8xa100",
			says: []string{
				"What if removing 8 a100 GPUs: mean wait of the 1 waiting requests 30m → 30m; 0 start earlier, 0 later.",
				"Simulated removing 1 a100 node (the last by name); 0 running workloads on them requeued.",
			},
			audit: "carol whatif -8 a100 ok",
		},
		"fewer GPUs than there are": {
			user: "carol", cmd: "whatif -512xa100",
			says: []string{"there are not that many a100 GPUs to remove"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, exampleConfig(t), seeded)
			e.do("dave", "request 8xh100 for 4h") // r5 waits, for fragmentation
			if r := e.req("r5"); r.State != records.StateQueued || r.Estimate.Reason != "fragmentation" {
				t.Fatalf("r5 is %s waiting for %q; want queued for fragmentation", r.State, r.Estimate.Reason)
			}
			before, workloads, audit := e.requests(), e.workloads(), e.audit("")
			outs := e.do(tc.user, tc.cmd)
			diff(t, "destinations", []string{"sender"}, dests(outs))
			for _, s := range tc.says {
				check(t, outs, want{"sender", s})
			}
			diff(t, "requests", before, e.requests())
			diff(t, "workloads", workloads, e.workloads())
			if tc.audit != "" {
				audit = append(audit, tc.audit)
			}
			diff(t, "audit", audit, e.audit(""))
		})
	}
}

// TestUsage checks the GPU-hours against arithmetic by hand.
func TestUsage(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("alice", "request 8xh100 for 3h") // r1: 08:00–09:00, released
	e.do("bob", "request 4xh100 for 10h")  // r2: 08:00–18:00
	e.do("dave", "request 16xh100 for 2h") // r3: needs approval
	e.do("erin", "approve r3")             // r3: 08:00–10:00
	e.advance(time.Hour)
	e.do("alice", "release r1")
	e.advance(3 * time.Hour) // 12:00

	// Over the last 7 days at 12:00:
	//   alice r1   8 GPUs × 1h =  8
	//   bob   r2   4 GPUs × 4h = 16 (running)
	//   dave  r3  16 GPUs × 2h = 32
	// nlp 24, vision 32; 56 in all.
	outs := e.do("alice", "usage")
	check(t, outs,
		want{"sender", "GPU usage over the last 7 days, all teams: 56 GPU-hours."},
		want{"sender", "nlp | 24 | 43% | 4 / 16 | 0 | 0 |"},
		want{"sender", "vision | 32 | 57% | 0 / 16 | 0 | 0 |"},
	)
	outs = e.do("alice", "usage nlp")
	check(t, outs,
		want{"sender", "GPU usage over the last 7 days, nlp: 24 GPU-hours."},
		want{"sender", "bob | 16"},
		want{"sender", "alice | 8"},
	)
	checkNot(t, outs, want{"sender", "vision |"}, want{"sender", "dave |"})

	// Two days later r2 has ended (18:00 on the first day). The last 2
	// days start at 12:00 on the first day: r1 and r3 are out, r2 counts
	// from 12:00 to 18:00, 4 GPUs × 6h = 24.
	e.advance(48 * time.Hour)
	outs = e.do("alice", "usage 2d")
	check(t, outs, want{"sender", "GPU usage over the last 2 days, all teams: 24 GPU-hours."}, want{"sender", "nlp | 24 | 100% |"})

	want := []records.UsageRecord{
		{Request: "r1", Team: "nlp", Requester: "alice", Flavor: "h100", GPUs: 8, Start: t0, End: t0.Add(time.Hour)},
		{Request: "r3", Team: "vision", Requester: "dave", Flavor: "h100", GPUs: 16, Start: t0, End: t0.Add(2 * time.Hour)},
		{Request: "r2", Team: "nlp", Requester: "bob", Flavor: "h100", GPUs: 4, Start: t0, End: t0.Add(10 * time.Hour)},
	}
	diff(t, "usage records", want, e.usage())
}

// TestCalibration counts the queued requests that started inside their
// first posted range.
func TestCalibration(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("bob", "request 16xh100 for 2h")  // r1 runs 08:00–10:00
	e.do("alice", "request 8xh100 for 1h") // r2 waits: 09:00–10:00, starts 10:00: inside, 30m off the middle
	e.do("dave", "request 16xh100 for 4h") // r3 needs approval
	e.do("erin", "approve r3")             // r3 runs from 08:00
	e.do("dave", "request 8xh100 for 1h")  // r4 waits: 10:00–12:00
	if r := e.req("r4"); r.FirstEstimate == nil || !r.FirstEstimate.Earliest.Equal(t0.Add(2*time.Hour)) || !r.FirstEstimate.Latest.Equal(t0.Add(4*time.Hour)) {
		t.Fatalf("r4's first estimate = %+v, want 10:00–12:00", r.FirstEstimate)
	}
	e.advance(time.Hour)
	e.do("erin", "release r3") // r4 starts 09:00: outside, 2h off the middle
	e.advance(2 * time.Hour)

	// Interval scores: r2 its width, 1h; r4 2h + 10 × 1h early = 12h.
	check(t, e.do("alice", "usage"), want{"sender", "Estimate accuracy: 1 of 2 queued requests started inside their first posted range, give or take a minute (50%, aiming at 80%; 50% exactly); " +
		"median range 1h, median error 30m (90% within 2h); interval score 6h30m (the range's width plus 10× how far outside it the start fell; lower is better)."})
	check(t, e.do("alice", "usage nlp"), want{"sender", "Estimate accuracy: 1 of 1 queued requests started inside their first posted range, give or take a minute (100%, aiming at 80%; 100% exactly); " +
		"median range 1h, median error 30m (90% within 30m); interval score 1h (the range's width plus 10× how far outside it the start fell; lower is better)."})
	check(t, e.do("alice", "usage vision"), want{"sender", "Estimate accuracy: 0 of 1 queued requests started inside their first posted range, give or take a minute (0%, aiming at 80%; 0% exactly); " +
		"median range 2h, median error 2h (90% within 2h); interval score 12h (the range's width plus 10× how far outside it the start fell; lower is better)."})

	fresh := newEnv(t, parse(t, small))
	fresh.do("alice", "request 8xh100 for 1h")
	check(t, fresh.do("alice", "usage"), want{"sender", "Estimate accuracy: no queued request has started in this period yet."})
}

// TestViews: status, queue and capacity read what is stored and running.
func TestViews(t *testing.T) {
	e := newEnv(t, parse(t, small))
	e.do("bob", "request 16xh100 for 2h")
	e.do("alice", "request 8xh100 for 1h")
	e.do("alice", "request 16xh100 for 1h")
	e.do("dave", "request 4xh100 for 1h")
	tests := map[string]struct {
		user, cmd string
		says      []string
		not       []string
	}{
		"my requests": {
			user: "U0ALICE", cmd: "status",
			says: []string{"alice, you have 2 requests open or ended in the last 24h.", "r2 | 8× h100 | 1h | nlp | normal | queued | starts in 1h–2h (09:00–10:00), next in line", "r3 | 16× h100 | 1h | nlp | normal | awaiting-approval | asked 08:00"},
			not:  []string{"r1 |", "r4 |"},
		},
		"one request, anyone's": {
			user: "dave", cmd: "status r1",
			says: []string{"r1 running on h100-b1-r1-n1, h100-b1-r1-n2", "[Release]"},
		},
		"nothing of mine": {
			user: "erin", cmd: "status",
			says: []string{"You have no open requests and none ended in the last 24h."},
		},
		"no such request": {
			user: "erin", cmd: "status r42",
			says: []string{"There is no request r42."},
		},
		"the queue": {
			user: "dave", cmd: "queue",
			says: []string{
				"1 request waiting in the cluster, in admission order.",
				"1 | r2 | alice | nlp | 8× h100 | normal | quota | in 1h–2h (09:00–10:00)",
				"Waiting for: 1 quota. The queue is quota-bound.",
				"r3 (alice, 16× h100) awaits approval by bob (lead of nlp) or carol (admin); it holds no quota.",
				"Admission order: priority, then arrival (best-effort FIFO).",
			},
		},
		"another team's queue": {
			user: "dave", cmd: "queue vision",
			says: []string{"Nothing is waiting in vision: requests that fit start at once."},
		},
		"capacity": {
			user: "dave", cmd: "capacity",
			says: []string{"h100 | 4 | 32 | 20 | 12 | 8 / 8 / 8 / 8"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			outs := e.do(tc.user, tc.cmd)
			diff(t, "destinations", []string{"sender"}, dests(outs))
			for _, s := range tc.says {
				check(t, outs, want{"sender", s})
			}
			for _, s := range tc.not {
				checkNot(t, outs, want{"sender", s})
			}
		})
	}
}

// TestEstimatesLearnRuntimes: once a team's requests have been ending
// at a quarter of their time, a request queued behind one of them is
// expected when a quarter of its time has run, not half to all of it.
func TestEstimatesLearnRuntimes(t *testing.T) {
	e := newEnv(t, parse(t, small))
	start := func() time.Time { return e.clock.Now() }
	for i := range 5 {
		e.do("bob", "request 16xh100 for 4h")
		id := fmt.Sprintf("r%d", i+1)
		if r := e.req(id); r.State != records.StateRunning {
			t.Fatalf("%s is %s, want running", id, r.State)
		}
		e.advance(time.Hour)
		e.do("bob", "release "+id)
	}
	t1 := start()
	e.do("bob", "request 16xh100 for 4h")  // r6 runs
	e.do("alice", "request 8xh100 for 1h") // r7 waits for it
	r := e.req("r7")
	if r.FirstEstimate == nil || !r.FirstEstimate.Known {
		t.Fatalf("r7's first estimate = %+v", r.FirstEstimate)
	}
	if got := r.FirstEstimate.Earliest; !got.Equal(t1.Add(time.Hour)) {
		t.Errorf("r7 expected from %v; want %v (r6 runs a quarter of its 4h, as bob's team's requests do)", got, t1.Add(time.Hour))
	}
	if got := r.FirstEstimate.Latest; !got.Before(t1.Add(2 * time.Hour)) {
		t.Errorf("r7 expected by %v; want before %v (without learning: 2h to 4h)", got, t1.Add(2*time.Hour))
	}
}

// TestStatusShowsOneScreen: a person with more requests than fit a chat
// table sees the open ones first, at most 25 rows, and the rest counted
// by state.
func TestStatusShowsOneScreen(t *testing.T) {
	e := newEnv(t, parse(t, strings.Replace(small, "maxDuration: 2d", "maxDuration: 30d", 1)))
	for range 4 {
		e.do("alice", "request 8xh100 for 1h")
	}
	e.advance(2 * time.Hour) // those that ran have finished
	for range 26 {
		e.do("alice", "request 8xh100 for 10d")
	}
	outs := e.do("alice", "status")
	check(t, outs, want{"sender", "alice, you have 30 requests open or ended in the last 24h."})
	var tab *commands.Table
	var all string
	for _, r := range said(outs, "sender") {
		all += text(r)
		for _, b := range r.Blocks {
			if b.Table != nil {
				tab = b.Table
			}
		}
	}
	if tab == nil {
		t.Fatalf("no table in:\n%s", show(outs))
	}
	if len(tab.Rows) != 25 {
		t.Errorf("%d rows, want 25", len(tab.Rows))
	}
	finished := 0
	for _, row := range tab.Rows {
		if row[5] == string(records.StateFinished) {
			finished++
		}
	}
	if finished != 0 {
		t.Errorf("%d finished rows shown before open ones:\n%v", finished, tab.Rows)
	}
	if !strings.Contains(all, "…and 5 more (") || !strings.Contains(all, "finished") {
		t.Errorf("the rest is not counted by state:\n%s", all)
	}
}
