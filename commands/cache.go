package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gpubot/gpubot/records"
)

// requestCache holds every request as last committed, so that reads
// (status, queue, usage, the estimates' learning) do not decode the whole
// store for each command. The service is the only writer of requests: it
// loads the cache at start and updates it after each commit, under the
// write section. Values handed out are copies, but for the read-only
// lists (refs, refsOf, listIn), which share what the cache holds.
type requestCache struct {
	mu sync.RWMutex
	// m's values are never changed in place: put stores a new copy, so
	// that a pointer handed out by refs stays the request as it was.
	m map[string]*records.Request
	// marked says which requests the elastic offer's lists look at (on or
	// switched to elastic capacity); set before load. ids holds their IDs.
	marked func(records.Request) bool
	ids    map[string]bool
	// byRequester holds the IDs of each requester's requests (by the
	// requester's name in lower case): /gpu status reads one person's
	// requests among thousands.
	byRequester map[string]map[string]bool
	// running and scorable hold the IDs of the requests running now and
	// of those whose start can score their first estimate (usage's
	// lists, facts.go), kept with every change.
	running, scorable map[string]bool
}

// classify records r in the running and scorable sets (held for writing).
func (rc *requestCache) classify(r records.Request) {
	setIf(rc.running, r.ID, isRunning(r))
	setIf(rc.scorable, r.ID, scorable(r))
}

func setIf(set map[string]bool, id string, in bool) {
	if in {
		set[id] = true
	} else {
		delete(set, id)
	}
}

// listIn returns the requests whose IDs are in set (running or scorable),
// shallow (read only), in ID order.
func (rc *requestCache) listIn(set func(*requestCache) map[string]bool) []records.Request {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	ids := make([]string, 0, len(set(rc)))
	for id := range set(rc) {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareIDs)
	out := make([]records.Request, len(ids))
	for i, id := range ids {
		out[i] = *rc.m[id]
	}
	return out
}

// index records r under its requester, in byRequester (held for writing).
func (rc *requestCache) index(r records.Request) {
	if old, ok := rc.m[r.ID]; ok && !strings.EqualFold(old.Requester, r.Requester) {
		delete(rc.byRequester[strings.ToLower(old.Requester)], r.ID)
	}
	k := strings.ToLower(r.Requester)
	ids := rc.byRequester[k]
	if ids == nil {
		ids = map[string]bool{}
		rc.byRequester[k] = ids
	}
	ids[r.ID] = true
}

// refsOf is refs among requester's requests (any case).
func (rc *requestCache) refsOf(requester string, keep func(*records.Request) bool) []*records.Request {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	ids := rc.byRequester[strings.ToLower(requester)]
	out := make([]*records.Request, 0, len(ids))
	for id := range ids {
		if r := rc.m[id]; keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func (rc *requestCache) load(ctx context.Context, rs RequestStore) error {
	all, err := rs.ListRequests(ctx, nil)
	if err != nil {
		return fmt.Errorf("reading the requests: %w", err)
	}
	m := make(map[string]*records.Request, len(all))
	ids := map[string]bool{}
	for i, r := range all {
		m[r.ID] = &all[i]
		if rc.marked != nil && rc.marked(r) {
			ids[r.ID] = true
		}
	}
	rc.mu.Lock()
	rc.m, rc.ids, rc.byRequester = m, ids, map[string]map[string]bool{}
	rc.running, rc.scorable = map[string]bool{}, map[string]bool{}
	for _, r := range all {
		rc.index(r)
		rc.classify(r)
	}
	rc.mu.Unlock()
	return nil
}

// put records committed requests.
func (rc *requestCache) put(rs []records.Request) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, r := range rs {
		rc.index(r)
		rc.classify(r)
		c := cloneRequest(r)
		rc.m[r.ID] = &c
		if rc.marked != nil && rc.marked(r) {
			rc.ids[r.ID] = true
		} else {
			delete(rc.ids, r.ID)
		}
	}
}

// listMarked is list among the marked requests only: keep must accept
// none that is not marked.
func (rc *requestCache) listMarked(keep func(records.Request) bool) []records.Request {
	rc.mu.RLock()
	out := make([]records.Request, 0, len(rc.ids))
	for id := range rc.ids {
		if r := rc.m[id]; keep == nil || keep(*r) {
			out = append(out, cloneRequest(*r))
		}
	}
	rc.mu.RUnlock()
	slices.SortFunc(out, func(a, b records.Request) int { return compareIDs(a.ID, b.ID) })
	return out
}

func (rc *requestCache) get(id string) (records.Request, bool) {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	r, ok := rc.m[id]
	if !ok {
		return records.Request{}, false
	}
	return cloneRequest(*r), true
}

// list returns copies of the requests keep accepts (all for nil), by ID.
func (rc *requestCache) list(keep func(records.Request) bool) []records.Request {
	rc.mu.RLock()
	out := make([]records.Request, 0, 16)
	for _, r := range rc.m {
		if keep == nil || keep(*r) {
			out = append(out, cloneRequest(*r))
		}
	}
	rc.mu.RUnlock()
	slices.SortFunc(out, func(a, b records.Request) int { return compareIDs(a.ID, b.ID) })
	return out
}

// refs returns the requests keep accepts as they are in the cache,
// unsorted and not copied: for computations that read them and keep
// neither them nor the pointers. A pointer is to the request as it was
// committed when refs ran (put replaces, never changes, an entry), so a
// later commit cannot change what it points to. keep gets the cached
// request itself and must not change it.
func (rc *requestCache) refs(keep func(*records.Request) bool) []*records.Request {
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	out := make([]*records.Request, 0, 16)
	for _, r := range rc.m {
		if keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// cloneRequest copies r so that changing the copy (appending to its
// waits, say) cannot touch the original.
func cloneRequest(r records.Request) records.Request {
	r.Nodes = slices.Clone(r.Nodes)
	r.Approval = slices.Clone(r.Approval)
	r.Waits = slices.Clone(r.Waits)
	if r.Estimate != nil {
		e := *r.Estimate
		r.Estimate = &e
	}
	if r.FirstEstimate != nil {
		e := *r.FirstEstimate
		r.FirstEstimate = &e
	}
	return r
}
