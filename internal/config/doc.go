// Package config reads gpubot's YAML configuration: teams and their
// people, leads and channels, GPU flavors and the simulated cluster's
// nodes, quotas, priorities, approval rules, request limits, templates and
// the work already running on a fresh simulated cluster, and the
// schedules of the daily digests and the weekly report (parsed by package
// digest, the only importer of robfig/cron).
//
// # Basics
//
// Load reads a file, Parse checks bytes, and Default parses the example
// bundled with gpubot (deploy.ExampleConfig), which is what gpubot runs
// with when it is given no configuration. A Config hands out the domain
// types the rest of gpubot works with: Cluster for the allocator,
// Settings and Vocabulary for the /gpu commands, Seeds for the simulator.
// The README's "Configuration reference" lists every key and its default.
//
// # Validation
//
// Checking is strict and complete: unknown keys (with the closest known
// key suggested), values of the wrong type, missing keys, duplicate names,
// references to people, teams, flavors, priorities or templates that do
// not exist, quotas that cannot hold, and seeds that could not run. Every
// problem is reported at once, in file order, as an Errors whose entries
// read like compiler errors:
//
//	gpubot.yaml:42:7: teams[1].quota.h100.nominal: must not be negative
//
// Field paths count list entries from 0, as Kubernetes does.
//
// # Caveats
//
// Durations use the chat syntax (commands.ParseDuration: "90m", "6h",
// "2d", "1h30m"), not Go's, so that a duration means the same in the file
// and in Slack; like chat, they must be more than zero, except that
// entryPenalty and startedAgo may be "0m". Names are case-sensitive in the file but must also differ
// in more than case, since chat commands ignore case. The package imports
// time/tzdata so that time zones load on images without a zoneinfo
// database. YAML anchors and aliases work; merge keys (<<) do not.
package config
