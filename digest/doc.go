// Package digest posts what gpubot measured, on a schedule: the daily
// digest (per team channel, and one cluster-wide for admins), the weekly
// success report, and the periodic samples they average. It also owns the
// scheduler that runs every scheduled job of gpubot, the zombie sweep
// included, and it is the only importer of github.com/robfig/cron/v3.
//
// # Basics
//
// A Scheduler runs named jobs, each on its own Schedule (a cron spec,
// ParseSchedule). A job's body is a plain function of its Run (Due, the
// scheduled time it is for, and Now); Func and Outputs adapt plain bodies
// of now, such as the zombie sweep:
//
//	sched := digest.NewScheduler(db, digest.WithLogger(log))
//	eng.Register(sched, cfg.Digests(), report, reportChannel) // sampler, digests, report
//	sched.Add("zombie sweep", every10m, digest.Outputs(svc.Sweep))
//	outs := sched.RunDue(ctx, now) // at start: catches up
//
// Time is an input: RunDue(now) runs what is due at now. On the
// simulated clock (the console's :advance, Slack on the simulated
// cluster), the driver stops at Next and calls RunDue, so a digest due at
// 09:00 is posted at 09:00 of simulated time. In real time with a real
// cluster, RunCron lets robfig/cron fire at the schedules' times and
// calls RunDue then; robfig/cron has no injectable clock, so it is used
// only there and to parse specs (with CRON_TZ= or the config's zone).
//
// Never twice, never missing. Each job's last completed run (its Due) is
// recorded in the store (records.JobRun) in the same transaction as its
// posts, which go into the outbox until Slack (or the console) confirms
// them (WithCommitter, as gpubot runs it): a restart never repeats a run,
// and a post that did not go out before a crash goes out after it. A job new to the store gets a
// baseline at the moment it is first seen; from then on, every due time
// is run: on time, or, if gpubot was not running then, once at the next
// start, marked Late (the post says so). When several due times passed
// while gpubot was down, only the latest runs (the log counts the
// others). A failed run is retried after 5 minutes, three times in all;
// then its due time is given up and logged as an error.
//
// The Engine computes the contents from gpubot's own records: requests
// (with their Waits), usage, the audit log, the samples, and the zombies
// found by the sweep (ZombieLog, declared here, implemented by the
// store). Yesterday is the calendar day before the digest's due day in
// the config's time zone; the trend is the 7 days before yesterday.
//
// Definitions, also in the README:
//
//   - Waits run from a request's creation (the wait for approval counts)
//     or its requeue after a preemption, to its admission. Each wait
//     counts on its own, in the period where it ended; a wait still
//     going at a period's end counts there with its length so far (the
//     digest says how many).
//   - Started counts admissions (re-admissions too); finished, requests
//     released or whose Job ended on its own; expired, those that ran
//     until their requested time was up; preempted, audited preemptions.
//   - Fragmentation is measure (a) as the allocator computes it; now from
//     the cluster, and averaged over the samples taken every 10 minutes
//     (SampleEvery), with the largest request that fitted.
//   - Estimate calibration scores each request's first posted estimate
//     against its first admission: the share inside the range, the
//     median error (from the range's middle) and the median width.
//   - The capacity sentence: what the queue waited for most in the
//     period's samples, and, for the work waiting now (high priority if
//     any), the p95 of the estimated waits as they are and with 8 or 16
//     more GPUs of each flavor (commands.WithCapacity) or a team's
//     borrowing limit raised by 16 (commands.WithBorrowingLimit), all from
//     allocator.Estimates with the service's learned runtimes: the engine
//     of /gpu whatif +N.
//   - High priority is every priority at or above the one named "high"
//     (the highest one if none is so named).
//   - Manual interventions (weekly report): admin preemptions, zombies
//     released by a lead or admin, approvals given more than an hour
//     after the request, requests cancelled after waiting more than a
//     day. Done automatically instead: preemptions by Kueue's policy,
//     zombies released by gpubot, approvals by button.
//
// # Caveats
//
// Exactly once needs the outbox (WithCommitter). Without one, a run is
// recorded before its posts are handed out: a crash in between loses
// them rather than posting twice, the worse failure for a channel digest.
// A post that Slack received but whose confirmation a crash lost is sent
// again after the restart (see package bot: a window of milliseconds).
//
// The digests read every request and the audit log of the last 8 days
// each time; that is quick at gpubot's rates, not for millions of
// records. The what-ifs run two simulations per candidate change (about
// ten on the example cluster), once per moment for all digests posted
// then.
//
// A digest's "now" parts (pending approvals, fragmentation now, the
// what-ifs) describe the cluster when the digest is built: for a late
// digest, at the late start, not at its due time.
package digest
