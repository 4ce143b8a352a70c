package commands

import (
	"errors"
	"fmt"
	"strings"
)

// verbHelp is what help says about each verb.
var verbHelp = map[Verb]struct {
	summary  string
	who      string
	examples []string
}{
	VerbRequest: {"Ask for GPUs. gpubot answers at once: started (where), queued (start estimate as a range, position, what it waits for), needs approval (who can approve), or can start only by preempting named work. On a Kubernetes cluster Kueue's own reason is shown too, and a request Kueue cannot admit as it is (no flavor matches, no node that exists can hold it, more than the quota even with borrowing) is said to not start as it is, with why and no estimate. Durations take m, h, d. Flavor is optional (your team's reserved flavors are tried in order; spot and provisioned flavors only when named, or switched to from the offer gpubot makes when reserved capacity would take long: see /gpu help switch). Topology keeps all pods in one host, rack or block.",
		"members and leads of the team; admins", []string{"/gpu request 8xh100 for 4h", "/gpu request 16xh100 for 2d team nlp priority high topology rack reason \"llama sweep\""}},
	VerbStatus:   {"Your open requests and those that ended in the last day (25 at most, open ones first); with an id, that request's card with its buttons.", "everyone", []string{"/gpu status", "/gpu status r12"}},
	VerbQueue:    {"Pending work in admission order, with each request's start estimate and what it waits for (quota, cohort, capacity, fragmentation, topology or priority; CPU or memory named when they, not GPUs, are short; on a cluster, also what Kueue says), each team's dominant resource share when Kueue's Fair Sharing is on, and whether the queue is capacity-, quota-, fragmentation- or priority-bound. Estimates marked approx. depend on Kueue features gpubot does not model.", "everyone", []string{"/gpu queue", "/gpu queue nlp", "/gpu queue h100"}},
	VerbCapacity: {"Per flavor: nodes and GPUs in all, used, free, the largest request that fits now (anywhere, in one host, rack, block), and how many free GPUs are fragmented. On a cluster the numbers are the cluster's nodes only; flavors with quota but no nodes, and GPU nodes no flavor selects, are listed.", "everyone", []string{"/gpu capacity"}},
	VerbUsage:    {"GPU-hours by team (and by person for one team), fair-share standing (and each team's dominant resource share when Kueue's Fair Sharing is on), borrowing, and how good start estimates were (share of starts inside the range, width, error, interval score). Default: the last 7 days.", "everyone", []string{"/gpu usage", "/gpu usage nlp 30d"}},
	VerbWhatIf:   {"Estimate a request without submitting it (what-if works too). Admins can also ask how waits change with more or fewer GPUs of a flavor.", "everyone; capacity what-ifs: admins", []string{"/gpu whatif 32xh100 for 1d", "/gpu whatif +16xh100", "/gpu whatif -8xa100"}},
	VerbCancel:   {"Withdraw a request that has not started (a running one is released).", "the requester, the team's leads, admins", []string{"/gpu cancel r12"}},
	VerbRelease:  {"Stop a running request now and free its GPUs.", "the requester, the team's leads, admins", []string{"/gpu release r12"}},
	VerbExtend:   {"Ask for more time: adds the duration to the request (up to the configured maximum).", "the requester, the team's leads, admins", []string{"/gpu extend r12 2h"}},
	VerbApprove:  {"Approve a request that needs approval; it is submitted at once.", "the team's leads, admins", []string{"/gpu approve r12"}},
	VerbDeny:     {"Deny a request that needs approval, optionally saying why.", "the team's leads, admins", []string{"/gpu deny r12 please use a100 for this"}},
	VerbPreempt:  {"Start a queued request now by preempting the lower-priority work gpubot proposes; the victims are requeued and told.", "admins", []string{"/gpu preempt r12"}},
	VerbSwitch:   {"Move a queued request to elastic capacity: a spot flavor (starts sooner, cheaper, may be reclaimed; a reclaimed request is requeued) or a provisioned one (nodes are created for it, as GKE's Dynamic Workload Scheduler does; runs at most the flavor's maximum run time). gpubot offers it on the card when the reserved estimate is later than elastic.offerAfter or the request could start only by preempting others, with each option's start estimate and cost; an option over the team's weekly elastic budget, or longer than the flavor's maximum run time, is shown without a button and with why. Switching more GPUs than elastic.approvalAboveGPUs needs a lead's approval. The same as the card's Switch button; audited. Naming one of the team's reserved flavors moves a queued request on elastic capacity back (say, when provisioning was given up).", "the requester, the team's leads, admins", []string{"/gpu switch r12 h100-spot", "/gpu switch r12 h100-dws", "/gpu switch r12 h100"}},
	VerbKeep:     {"Answer a zombie check: the work is still in use. gpubot asks when it finds running work holding GPUs without using them (pods not running, running past its end, idle GPUs); this answer means nobody else is told and nothing is released, and gpubot does not ask about the same kind of waste again for a while (zombies.keepFor). The same as the Still using it button.", "the requester, the team's leads, admins", []string{"/gpu keep r12", "/gpu keep z3"}},
	VerbDigest:   {"Yesterday's digest of the cluster, or of one team, shown only to you. It has GPU-hours by team (by person for one team) against fair share and quota, waits by priority, requests started, finished, preempted, denied and expired, approvals pending for hours, fragmentation, zombies, estimate accuracy, the capacity verdict with a what-if, and a chart. Without a team, the cluster-wide digest. The same digests are posted on the schedules in the config's digests.", "everyone", []string{"/gpu digest", "/gpu digest nlp"}},
	VerbReport:   {"The weekly success report, shown only to you. It has manual interventions, high-priority p95 wait, fragmentation and zombie GPU-hours, this week against last week and gpubot's first week, and what gpubot did automatically instead. It is also posted on the schedule in the config's report.", "everyone", []string{"/gpu report"}},
	VerbTrack:    {"Follow a workload submitted outside gpubot (kubectl, CI). Needs a Kubernetes cluster.", "everyone", []string{"/gpu track nlp/llama-pretrain"}},
	VerbHelp:     {"This help (/gpu alone shows it too); with a command, its details.", "everyone", []string{"/gpu help", "/gpu help request"}},
}

// helpReply is /gpu help [verb].
func helpReply(topic Verb) Reply {
	if topic != "" {
		h, ok := verbHelp[topic]
		if !ok {
			return plain(fmt.Sprintf("There is no command %q. /gpu help lists them.", topic))
		}
		return plain(fmt.Sprintf("/gpu %s", Usage(topic)),
			section(h.summary),
			fields(Field{"Who", h.who}, Field{"Examples", strings.Join(h.examples, "\n")}))
	}
	lines := make([]string, 0, len(Verbs))
	for _, v := range Verbs {
		lines = append(lines, "/gpu "+Usage(v)+"\n    "+firstSentence(verbHelp[v].summary))
	}
	return plain("gpubot takes GPU requests and tells you where they stand. Commands:",
		section(strings.Join(lines, "\n")),
		contextBlock("Words are case-insensitive; key=value and key value both work; durations take m, h, d (90m, 6h, 2d). /gpu help <command> for details and examples."))
}

// sentence ends s with a full stop unless it ends with punctuation.
func sentence(s string) string {
	if s == "" || strings.ContainsAny(s[len(s)-1:], ".?!") {
		return s
	}
	return s + "."
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// parseErrorReply shows a parse error with its position and an example.
func parseErrorReply(err error) Reply {
	var pe *ParseError
	if !errors.As(err, &pe) {
		return plain(capitalize(err.Error()) + ".")
	}
	blocks := []Block{code(pe.Caret())}
	if pe.Example != "" && pe.Example != "/gpu help" {
		blocks = append(blocks, contextBlock("Example: "+pe.Example+"  ·  /gpu help for all commands"))
	} else {
		blocks = append(blocks, contextBlock("/gpu help lists the commands."))
	}
	return plain(sentence(capitalize(pe.Error())), blocks...)
}
