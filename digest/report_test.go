package digest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/records"
)

func TestWeeklyReport(t *testing.T) {
	e := newEnv(t)
	// The report of Monday 7 December: this week is 30 Nov – 6 Dec, last
	// week 23–29 Nov; gpubot started on 2 Nov.
	reportDue := time.Date(2026, 12, 7, 9, 0, 0, 0, berlin)
	d := func(month time.Month, day, hour, minute int) time.Time {
		return time.Date(2026, month, day, hour, minute, 0, 0, berlin)
	}
	ok := func(at time.Time, actor, action, target, via string) records.AuditEntry {
		return records.AuditEntry{At: at, Actor: actor, Action: action, Target: target, Outcome: "ok", Via: via}
	}
	e.put(
		// First week: approved after 4h.
		records.Request{ID: "r1", Team: "nlp", Priority: "high", State: records.StateFinished, CreatedAt: d(11, 3, 8, 0)},
		// This week: approved after 2h (slow, by button) and after 10m
		// (by button); cancelled after waiting two days.
		records.Request{ID: "r12", Team: "nlp", Priority: "normal", State: records.StateFinished, CreatedAt: d(12, 3, 8, 0)},
		records.Request{ID: "r13", Team: "nlp", Priority: "normal", State: records.StateFinished, CreatedAt: d(12, 3, 9, 50)},
		records.Request{ID: "r14", Team: "vision", Priority: "normal", State: records.StateCancelled, CreatedAt: d(12, 2, 9, 0), EndedAt: d(12, 4, 9, 0)},
		// High-priority waits: 12m this week, 3h last week, 20h in the
		// first week.
		records.Request{ID: "r15", Team: "nlp", Priority: "urgent", State: records.StateFinished, CreatedAt: d(12, 2, 10, 0),
			Waits: []records.Wait{{From: d(12, 2, 10, 0), To: d(12, 2, 10, 12)}}},
		records.Request{ID: "r16", Team: "nlp", Priority: "high", State: records.StateFinished, CreatedAt: d(11, 24, 10, 0),
			Waits: []records.Wait{{From: d(11, 24, 10, 0), To: d(11, 24, 13, 0)}}},
		records.Request{ID: "r17", Team: "vision", Priority: "high", State: records.StateFinished, CreatedAt: d(11, 4, 0, 0),
			Waits: []records.Wait{{From: d(11, 4, 0, 0), To: d(11, 4, 20, 0)}}},
	)
	e.audit(
		ok(d(11, 2, 9, 0), "gpubot", "seed", "r0", ""),
		ok(d(11, 3, 10, 0), "carol", "preempt", "r1", ""),
		ok(d(11, 3, 12, 0), "bob", "approve", "r1", ""),
		ok(d(11, 24, 10, 0), "carol", "preempt", "r16", ""),
		ok(d(11, 25, 10, 0), "carol", "preempt", "r16", ""),
		ok(d(12, 1, 10, 0), "carol", "preempt", "r15", ""),
		ok(d(12, 1, 10, 0), "carol", "preempted", "r10", ""),  // the admin's victim
		ok(d(12, 2, 11, 0), "gpubot", "preempted", "r11", ""), // Kueue's policy
		ok(d(12, 3, 10, 0), "bob", "approve", "r12", "button"),
		ok(d(12, 3, 10, 0), "bob", "approve", "r13", "button"),
		records.AuditEntry{At: d(12, 3, 11, 0), Actor: "dave", Action: "preempt", Target: "r13", Outcome: "refused"},
	)
	e.sample(
		records.Sample{At: d(12, 2, 12, 0), Flavors: []records.FlavorSample{{Flavor: "h100", GPUs: 100, Fragmented: 8}}},
		records.Sample{At: d(11, 24, 12, 0), Flavors: []records.FlavorSample{{Flavor: "h100", GPUs: 100, Fragmented: 15}}},
	)
	zombies := zombieList{
		{ID: "z1", Team: "nlp", GPUs: 8, Since: d(12, 2, 0, 0), FoundAt: d(12, 2, 1, 0), Outcome: records.ZombieReleasedManually, ResolvedAt: d(12, 2, 3, 0)},
		{ID: "z2", Team: "nlp", GPUs: 4, Since: d(12, 3, 0, 0), FoundAt: d(12, 3, 1, 0), Outcome: records.ZombieAutoReleased, ResolvedAt: d(12, 3, 2, 0)},
		{ID: "z3", Team: "vision", GPUs: 8, Since: d(11, 24, 0, 0), FoundAt: d(11, 24, 1, 0), Outcome: records.ZombieKept, ResolvedAt: d(11, 24, 10, 0)},
	}
	eng := e.engine(mondayCluster(), reportDue, nil, zombies)
	r, err := eng.Report(e.ctx, reportDue)
	if err != nil {
		t.Fatal(err)
	}
	got := text(r)
	has(t, got,
		"Weekly report, Mon 30 Nov–Sun 6 Dec: 4 manual interventions (last week 2, first week 2), high-priority p95 wait 12m (1 wait).",
		" | This week | Last week | First week (Mon 2 Nov)",
		"Manual interventions | 4 | 2 | 2",
		"  admin preemptions | 1 | 2 | 1",
		"  zombies released by a lead or admin | 1 | 0 | 0",
		"  approvals after more than 1h | 1 | 0 | 1",
		"  cancelled after waiting over 1d | 1 | 0 | 0",
		"High-priority p95 wait | 12m (1 wait) | 3h (1 wait) | 20h (1 wait)",
		"Fragmentation, % of all GPUs | 8.0% | 15.0% | not sampled",
		// z1 3h × 8, z2 2h × 4; last week z3 10h × 8.
		"Zombie GPU-hours | 32 | 80 | 0",
		"Done automatically instead, this week: 1 automatic preemption (Kueue's policy, with the victims requeued and told), 1 zombie released by gpubot, 2 approvals by button.",
		"High priority: high and urgent.",
	)
	if strings.Contains(got, "no first week") {
		t.Errorf("the report says there is no first week:\n%s", got)
	}

	// In gpubot's first fortnight there is no first week to compare.
	early := newEnv(t)
	early.audit(ok(d(11, 27, 9, 0), "gpubot", "seed", "r0", ""))
	r, err = early.engine(mondayCluster(), reportDue, nil, nil).Report(early.ctx, reportDue)
	if err != nil {
		t.Fatal(err)
	}
	has(t, text(r), "so there is no first week to compare with yet", "Zombie GPU-hours | not swept | not swept", "0 manual interventions (last week 0)")
}
