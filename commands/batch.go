package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/records"
)

// Nothing lost across a crash: what a call decides (requests, audit
// entries, usage, zombies, the simulated cluster's state) and the
// messages it means to send are written together, in one transaction of
// the Committer, when the call leaves its write section; before a
// Kubernetes API call (persist, then act); and, for what a read audits,
// at its end. Until then the call reads its own writes. A durable output
// comes back with Output.Seq, its place in the outbox, and stays there
// until the chat platform confirmed it (see package bot). With
// SetOrderedDelivery, what was committed is also sent then, in the write
// section, so that outputs reach chat in the order they were committed.

// Committer makes a call's writes durable together, with its outbox
// messages, and returns the messages' sequence numbers. *store.DB
// satisfies it.
type Committer interface {
	Commit(ctx context.Context, w records.Writes, at time.Time) ([]uint64, error)
}

// StateKeeper is a Stepper whose state the service commits with its own
// records of each change (the simulated cluster WithSavesByCaller).
type StateKeeper interface {
	// Unsaved returns the states to save (a nil Data removes one), if
	// it changed since Saved.
	Unsaved() ([]records.NamedState, bool, error)
	// Saved says the state last returned by Unsaved is durable.
	Saved()
	// Discard drops the changes that were not saved.
	Discard(ctx context.Context) error
}

// zombieIDs hands out zombie IDs ahead of the commit; *store.DB does.
type zombieIDs interface {
	NextZombieID(ctx context.Context) (string, error)
}

// pending are a call's writes not yet committed.
type pending struct {
	reqs    map[string]records.Request
	order   []string
	audit   []records.AuditEntry
	usage   []records.UsageRecord
	zombies map[string]records.Zombie
	zorder  []string
}

func (p *pending) empty() bool {
	return len(p.order) == 0 && len(p.audit) == 0 && len(p.usage) == 0 && len(p.zorder) == 0
}

// putRequest records r as written by c.
func (s *Service) putRequest(c *call, r records.Request) error {
	if r.ID == "" {
		return fmt.Errorf("saving request: request has no ID")
	}
	if c.w.reqs == nil {
		c.w.reqs = map[string]records.Request{}
	}
	if _, ok := c.w.reqs[r.ID]; !ok {
		c.w.order = append(c.w.order, r.ID)
	}
	c.w.reqs[r.ID] = r
	return nil
}

// getRequest is request id as c sees it: its own write, else the store's.
func (s *Service) getRequest(c *call, id string) (records.Request, error) {
	if r, ok := c.w.reqs[id]; ok {
		return r, nil
	}
	return s.deps.Requests.GetRequest(c.ctx, id)
}

// listRequests is ListRequests as c sees it, with its own writes, from
// the cache of committed requests (cache.go).
func (s *Service) listRequests(c *call, keep func(records.Request) bool) ([]records.Request, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	return s.listFrom(c, s.cache.list, keep), nil
}

// onElastic says whether r is on, or was switched to, elastic capacity:
// the requests the elastic offer's lists (listElastic) look at.
func (s *Service) onElastic(r records.Request) bool {
	return r.Elastic != nil || s.set.Elastic.terms(r.Flavor).Elastic() || s.set.Elastic.terms(r.AdmittedFlavor).Elastic()
}

// listElastic is listRequests among the requests onElastic accepts;
// keep must accept no other.
func (s *Service) listElastic(c *call, keep func(records.Request) bool) ([]records.Request, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	return s.listFrom(c, s.cache.listMarked, func(r records.Request) bool { return s.onElastic(r) && keep(r) }), nil
}

// listFrom lists with list (the cache's), as c sees it.
func (s *Service) listFrom(c *call, list func(func(records.Request) bool) []records.Request, keep func(records.Request) bool) []records.Request {
	if len(c.w.order) == 0 {
		return list(keep)
	}
	// The cache's requests that c has not written, then c's own writes:
	// filtered first, so that only what keep accepts is copied and sorted.
	out := list(func(r records.Request) bool {
		if _, ok := c.w.reqs[r.ID]; ok {
			return false
		}
		return keep == nil || keep(r)
	})
	for _, id := range c.w.order {
		if r := c.w.reqs[id]; keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b records.Request) int { return compareIDs(a.ID, b.ID) })
	return out
}

// readRefs is listRequests for a computation that reads the requests
// and keeps neither them nor the pointers: not copied (the cache's own,
// see requestCache.refs), sorted by ID only if sorted is set. keep must
// not change the request it is given.
func (s *Service) readRefs(c *call, keep func(*records.Request) bool, sorted bool) []*records.Request {
	if len(c.w.order) > 0 {
		all, _ := s.listRequests(c, func(r records.Request) bool { return keep == nil || keep(&r) })
		return refsTo(all)
	}
	rs := s.cache.refs(keep)
	if sorted {
		slices.SortFunc(rs, func(a, b *records.Request) int { return compareIDs(a.ID, b.ID) })
	}
	return rs
}

// readRefsOf is readRefs (unsorted) among requester's requests (any
// case).
func (s *Service) readRefsOf(c *call, requester string, keep func(*records.Request) bool) []*records.Request {
	if len(c.w.order) > 0 {
		return s.readRefs(c, func(r *records.Request) bool {
			return strings.EqualFold(r.Requester, requester) && (keep == nil || keep(r))
		}, false)
	}
	return s.cache.refsOf(requester, keep)
}

// putZombie records z as written by c; a new one (no ID) gets its ID now.
func (s *Service) putZombie(c *call, z records.Zombie) (records.Zombie, error) {
	ids, ok := s.zombies.(zombieIDs)
	if !ok || s.deps.Commit == nil {
		return s.zombies.PutZombie(c.ctx, z)
	}
	if z.ID == "" {
		id, err := ids.NextZombieID(c.ctx)
		if err != nil {
			return z, err
		}
		z.ID = id
	}
	if c.w.zombies == nil {
		c.w.zombies = map[string]records.Zombie{}
	}
	if _, ok := c.w.zombies[z.ID]; !ok {
		c.w.zorder = append(c.w.zorder, z.ID)
	}
	c.w.zombies[z.ID] = z
	return z, nil
}

// getZombie is zombie id as c sees it.
func (s *Service) getZombie(c *call, id string) (records.Zombie, error) {
	if z, ok := c.w.zombies[id]; ok {
		return z, nil
	}
	return s.zombies.GetZombie(c.ctx, id)
}

// listZombies is ZombieStore.Zombies as c sees it: its own writes replace
// the stored zombies, and its new ones are added if they overlap.
func (s *Service) listZombies(c *call, from, to time.Time) ([]records.Zombie, error) {
	zs, err := s.zombies.Zombies(c.ctx, from, to)
	if err != nil || len(c.w.zorder) == 0 {
		return zs, err
	}
	seen := map[string]bool{}
	for i, z := range zs {
		if w, ok := c.w.zombies[z.ID]; ok {
			zs[i] = w
		}
		seen[z.ID] = true
	}
	for _, id := range c.w.zorder {
		z := c.w.zombies[id]
		open := z.Outcome == records.ZombieOpen
		if !seen[id] && z.FoundAt.Before(to) && (open || !z.ResolvedAt.Before(from)) {
			zs = append(zs, z)
		}
	}
	return zs, nil
}

// commit makes c's pending writes durable, with its outputs since the
// last commit when durable is set (then they come back with their Seq),
// and the simulated cluster's state when it changed. On failure nothing
// is kept: the cluster's unsaved change is dropped and the error
// returned; the caller says so.
func (s *Service) commit(c *call, durable bool) error {
	var w records.Writes
	for _, id := range c.w.order {
		w.Requests = append(w.Requests, c.w.reqs[id])
	}
	w.Audit, w.Usage = c.w.audit, c.w.usage
	if c.in.Delivery != "" && !c.handled && s.deps.Commit != nil {
		w.Handled = []string{c.in.Delivery} // handled with the first thing it decided
	}
	for _, id := range c.w.zorder {
		w.Zombies = append(w.Zombies, c.w.zombies[id])
	}
	keeper, _ := s.stepper.(StateKeeper)
	if keeper != nil && c.writing {
		st, changed, err := keeper.Unsaved()
		if err != nil {
			return err
		}
		if changed {
			w.States = append(w.States, st...)
		}
	}
	first := c.committed
	var boxed []int // the indexes in c.outs of w.Outbox's messages
	if durable && s.deps.Commit != nil {
		for i := first; i < len(c.outs); i++ {
			// A private reply is addressed now: after a restart it is
			// sent from the outbox, without the input.
			c.address(&c.outs[i].To)
			if o := c.outs[i]; o.To.Kind == ToSender && o.To.User == "" {
				continue // no one to answer (a sweep's): never sent, so not kept
			}
			data, err := EncodeOutput(c.outs[i])
			if err != nil {
				return fmt.Errorf("encoding a reply: %w", err)
			}
			w.Outbox = append(w.Outbox, data)
			boxed = append(boxed, i)
		}
	}
	c.w = pending{}
	if durable {
		c.committed = len(c.outs)
	}
	if w.Empty() {
		return nil
	}
	if s.deps.Commit == nil {
		if err := s.writeEach(c, w); err != nil {
			return err
		}
		s.cache.put(w.Requests)
		return nil
	}
	seqs, err := s.deps.Commit.Commit(c.ctx, w, c.now)
	if err == nil && len(w.Handled) > 0 {
		c.handled = true
	}
	if err != nil {
		if keeper != nil && len(w.States) > 0 {
			if derr := keeper.Discard(c.ctx); derr != nil {
				s.log.Error("dropping the simulated cluster's unsaved change", "err", derr)
			}
		}
		return err
	}
	s.cache.put(w.Requests)
	if keeper != nil && len(w.States) > 0 {
		keeper.Saved()
	}
	for i, seq := range seqs {
		c.outs[boxed[i]].Seq = seq
	}
	return nil
}

// writeEach writes w through the separate ports, without a Committer
// (tests of the service alone): not atomic.
func (s *Service) writeEach(c *call, w records.Writes) error {
	for _, r := range w.Requests {
		if err := s.deps.Requests.PutRequest(c.ctx, r); err != nil {
			return err
		}
	}
	for _, e := range w.Audit {
		if _, err := s.deps.Audit.AppendAudit(c.ctx, e); err != nil {
			return err
		}
	}
	for _, u := range w.Usage {
		if err := s.deps.Usage.AppendUsage(c.ctx, u); err != nil {
			return err
		}
	}
	for _, z := range w.Zombies {
		if _, err := s.zombies.PutZombie(c.ctx, z); err != nil {
			return err
		}
	}
	return nil
}

// commitOrSay commits c's writes and outputs; if that fails, the sender
// (if any) is told that nothing was saved instead of what the call said.
func (s *Service) commitOrSay(c *call) {
	if err := s.commit(c, true); err != nil {
		s.log.Error("saving a decision", "err", err, "user", c.in.User)
		if c.in.User != "" {
			c.outs = []Output{private(plain(fmt.Sprintf("Sorry, saving that failed on gpubot's side: %s. Nothing was changed; please try again.", plainError(err))))}
		} else {
			c.outs = nil
		}
		c.committed, c.sent = len(c.outs), 0
	}
}

// EncodeOutput encodes an output for the outbox.
func EncodeOutput(o Output) ([]byte, error) { return json.Marshal(o) }

// DecodeOutput decodes an outbox message written by EncodeOutput.
func DecodeOutput(data []byte) (Output, error) {
	var o Output
	if err := json.Unmarshal(data, &o); err != nil {
		return Output{}, fmt.Errorf("decoding an outbox message: %w", err)
	}
	return o, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
