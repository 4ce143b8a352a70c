package commands_test

import (
	"testing"
)

// Kueue's Fair Sharing in the replies: l lends 16 GPUs; nlp and vision
// have none of their own and borrow. nlp borrows 8 of the 16 its cohort
// could lend: a dominant share of 500‰ of GPUs; vision 0.
const fairShared = `timezone: UTC
priorities: [{name: normal, value: 200}]
admission: {mode: FairSharing}
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: alice}, {name: dave}, {name: lena}]
teams:
  - {name: lend, cohort: pool, members: [lena], quota: {h100: {nominal: 16}}}
  - {name: nlp, cohort: pool, members: [alice], quota: {h100: {nominal: 0}}}
  - {name: vision, cohort: pool, members: [dave], quota: {h100: {nominal: 0}}}
`

func TestFairSharingReplies(t *testing.T) {
	e := newEnv(t, parse(t, fairShared))
	e.do("alice", "request 8xh100 for 3h") // r1: admitted, nlp borrows 8
	e.do("lena", "request 8xh100 for 3h")  // r2: admitted, within lend's quota
	check(t, e.do("alice", "usage"),
		want{"sender", "Dominant share"},
		want{"sender", "nlp | 0 | 0% | 8 / 0 | 8 | 0 | 0.0 | 500‰ of GPUs"},
		want{"sender", "vision | 0 | 0% | 0 / 0 | 0 | 0 | 0.0 | 0"},
		want{"sender", "Kueue admits the team with the lowest first"},
	)
	e.do("dave", "request 8xh100 for 3h") // r3: nothing free
	check(t, e.do("dave", "queue"),
		want{"sender", "Team's share"},
		want{"sender", "| vision |"},
		want{"sender", "Kueue's Fair Sharing"},
	)
}

// CPU next to GPUs: requests ask for 6 cores per GPU; nlp's quota is 16
// GPUs and 48 cores. r1 (8 GPUs, 48 cores) runs; r2 (4 GPUs) finds
// GPUs free but no CPU quota: the reply and the queue say CPU.
const cpuBound = `timezone: UTC
priorities: [{name: normal, value: 200}]
requests: {cpuPerGPU: 6}
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2, cpu: 96}}]
people: [{name: alice}]
teams:
  - {name: nlp, members: [alice], quota: {h100: {nominal: 16, cpu: 48}}}
`

func TestCPUBoundReplies(t *testing.T) {
	e := newEnv(t, parse(t, cpuBound))
	e.do("alice", "request 8xh100 for 3h")
	outs := e.do("alice", "request 4xh100 for 3h")
	check(t, outs, want{"channel #gpu r2", "Waiting for quota: nlp uses 48 cores of its 48 cores CPU quota on h100 and this needs 24 cores more."})
	check(t, e.do("alice", "queue"), want{"sender", "quota (CPU)"}, want{"sender", "The queue is quota-bound."})
}
