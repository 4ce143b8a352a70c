package simulate

import "github.com/gpubot/gpubot/allocator"

// A runtime history for the replay's estimates (Setup.History): the bot
// never starts cold, it learns runtimes from the finished requests in
// its store, and a replay that starts with none learns, in its first
// minutes, only from the shortest runs (those that have ended by then).

// history is the runtime samples of h's jobs, mapped as the replay maps
// its own (see jobMapping): every job with GPUs that could run on the
// cluster, as one run finished unpreempted for its recorded runtime, for
// its team and its template (the requested duration standing for it,
// as in the replay). Shares of a GPU left out of the replay
// (FractionalSkip) are left out here too.
func (m jobMapping) history(h *Trace) ([]allocator.RuntimeSample, error) {
	var out []allocator.RuntimeSample
	for i := range h.Jobs {
		tj := &h.Jobs[i]
		if tj.GPUs == 0 || tj.Runtime < 0 || tj.Fractional() && m.frac == FractionalSkip {
			continue
		}
		j, ok, err := m.job(h.Name, tj)
		if err != nil {
			return nil, err
		}
		if !ok || j.requested <= 0 {
			continue
		}
		out = append(out, j.runtimeSample())
	}
	return out, nil
}
