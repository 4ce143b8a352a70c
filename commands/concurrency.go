package commands

import (
	"context"
	"sync"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// How the service handles work concurrently.
//
// Reads (status, queue, capacity, usage, whatif, help, digest, report and
// App Home) take no lock: they answer from the latest published view (a
// snapshot of the cluster, Kueue's report and the latest estimates) and
// from the store, whose readers never wait for its writer.
//
// Writes change requests in the write section (wmu), where a request's
// record is read, decided on and written back, so that no two writers
// interleave on one record. Each operation on a request also holds that
// request's lock from start to end, so operations on one request (two
// approvals, approve and cancel, extend and release) happen one after the
// other. Locks are taken in that order, request first, and a call holds
// at most one request lock, so they cannot deadlock.
//
// A Kubernetes API call (Cluster.Apply on a cluster that is not a
// Stepper) is made outside the write section, holding only the request's
// lock: writes for other requests, and the cluster's events, go on
// meanwhile, and the operation reads its request again afterwards. The
// simulated cluster (a Stepper) changes in memory, inside the write
// section, so that its change and the records of it are one step.

// Stepper is a Cluster that lives in gpubot's process and moves with the
// clock: the simulated cluster. Observe catches it up (Advance) before
// looking at the requests, and its operations, made in memory, happen
// inside the service's write section.
type Stepper interface {
	// Advance moves the cluster to the clock's time and returns what
	// happened on the way.
	Advance(ctx context.Context) ([]allocator.Event, error)
}

// Sharer is a Cluster that can hand out its current state without
// copying it (the simulated cluster): a snapshot that it never changes
// afterwards, which the holder must not change either, nor call the
// allocator's cache-filling methods on (they clone it). A view's
// snapshot is such a one: reads and the refresher only clone it or read
// it without filling caches (facts.go, readSnapshot).
type Sharer interface {
	SharedSnapshot(ctx context.Context) (*allocator.Snapshot, error)
}

// keyLocks are per-key mutexes, made when first used and dropped when
// nobody holds or waits for them.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyLocks) entry(key string) *keyLock {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyLock{}
		k.m[key] = e
	}
	e.refs++
	return e
}

func (k *keyLocks) release(key string, e *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(k.m, key)
	}
}

// lock waits for key's lock and returns its unlock.
func (k *keyLocks) lock(key string) func() {
	e := k.entry(key)
	e.mu.Lock()
	return func() { e.mu.Unlock(); k.release(key, e) }
}

// tryLock takes key's lock if it is free.
func (k *keyLocks) tryLock(key string) (func(), bool) {
	e := k.entry(key)
	if !e.mu.TryLock() {
		k.release(key, e)
		return nil, false
	}
	return func() { e.mu.Unlock(); k.release(key, e) }, true
}

// lockRequest takes request id's lock for c, unless c holds it already,
// and returns the unlock (a no-op then). It must not be called inside
// the write section.
func (s *Service) lockRequest(c *call, id string) func() {
	if id == "" || c.holds == id {
		return func() {}
	}
	unlock := s.reqs.lock(id)
	prev := c.holds
	c.holds = id
	return func() { c.holds = prev; unlock() }
}

// tryRequest takes request id's lock for c if nobody holds it: for work
// done from inside the write section (reconciling, releasing a zombie),
// which leaves a request that is being operated on to its operation.
func (s *Service) tryRequest(c *call, id string) (func(), bool) {
	if c.holds == id {
		return func() {}, true
	}
	if c.holds != "" {
		return nil, false // one request lock per call
	}
	unlock, ok := s.reqs.tryLock(id)
	if !ok {
		return nil, false
	}
	c.holds = id
	return func() { c.holds = ""; unlock() }, true
}

// enter starts the write section for c and returns its end, to be
// deferred: it commits what c decided, or, if c panicked, drops it all
// (and the panic goes on).
func (s *Service) enter(c *call) (leave func()) {
	s.wmu.Lock()
	c.writing = true
	return func() {
		if v := recover(); v != nil {
			s.abandon(c)
			panic(v)
		}
		s.leave(c)
	}
}

// abandon ends the write section of a call that panicked: nothing it
// decided is kept.
func (s *Service) abandon(c *call) {
	defer func() {
		c.writing = false
		s.wmu.Unlock()
		c.runLeft()
	}()
	c.w = pending{}
	c.committed = len(c.outs)
	if k, ok := s.stepper.(StateKeeper); ok {
		if err := k.Discard(c.ctx); err != nil {
			s.log.Error("dropping the simulated cluster's unsaved change", "err", err)
		}
	}
}

// leave ends the write section for c, publishing a new view if the
// cluster changed.
func (s *Service) leave(c *call) {
	defer func() {
		c.writing = false
		s.wmu.Unlock()
		c.runLeft()
	}()
	s.commitOrSay(c)
	s.sendCommitted(c)
	if c.changed || c.republish {
		s.publish(c)
	}
	if c.changed {
		s.estimates.changed()
	}
}

// runLeft runs what waits for c's write section to be over.
func (c *call) runLeft() {
	left := c.left
	c.left = nil
	for _, fn := range left {
		fn()
	}
}

// outside runs fn outside the write section (if c is in it): for work
// that takes long and needs no record, such as an estimate. c reads
// the cluster afresh after.
func (s *Service) outside(c *call, fn func()) {
	if !c.writing {
		fn()
		return
	}
	if err := s.commit(c, true); err != nil {
		s.log.Error("saving a decision", "err", err)
	}
	s.sendCommitted(c)
	s.wmu.Unlock()
	defer s.wmu.Lock()
	fn()
	c.snap = nil
}

// sendCommitted hands what c committed and has not sent to the ordered
// delivery (SetOrderedDelivery), if set. It runs in the write section,
// right after a commit, so that outputs are sent in commit order. A
// private reply with no one to answer (a sweep's) is left out, as the
// sweep's own return leaves it out.
func (s *Service) sendCommitted(c *call) {
	d := s.early.Load()
	if d == nil || s.deps.Commit == nil || c.committed <= c.sent || c.committed > len(c.outs) {
		return
	}
	outs := make([]Output, 0, c.committed-c.sent)
	for _, o := range c.outs[c.sent:c.committed] {
		if c.address(&o.To); o.To.Kind == ToSender && o.To.User == "" {
			continue
		}
		outs = append(outs, o)
	}
	c.sent = c.committed
	if len(outs) > 0 {
		(*d)(c.ctx, outs)
	}
}

// address gives a private reply the sender's chat user and channel,
// unless it has its own.
func (c *call) address(to *Destination) {
	if to.Kind == ToSender {
		to.User = cmpOr(to.User, c.in.replyUser())
		to.Channel = cmpOr(to.Channel, c.in.Channel)
	}
}

// unsent is what c decided and has not sent (see sendCommitted).
func (c *call) unsent() []Output {
	if c.sent >= len(c.outs) {
		return nil
	}
	return c.outs[c.sent:]
}

// flush commits what a call wrote outside any write section (a read's
// audit entries), keeping none of its outputs.
func (s *Service) flush(c *call) {
	if c.w.empty() {
		return
	}
	if err := s.commit(c, false); err != nil {
		s.log.Error("appending to the audit log", "err", err)
	}
}

// view is what reads answer from: the cluster as of the last write, what
// Kueue said then, and the latest estimates (of that snapshot or an
// earlier one) with the options they were made with.
type view struct {
	snap  *allocator.Snapshot // shared: reads clone it, or only read it (facts.go)
	kueue KueueReport
	ests  map[string]allocator.Estimate
	opts  allocator.EstimateOptions
	mix   allocator.Mix // the recent requests' pod sizes, with the estimates
	estAt time.Time     // when ests were made; zero: never
	// estSnap is the snapshot ests were made of (never used directly:
	// what-ifs clone it), and gen counts the estimates published, from 1
	// (0: none yet).
	estSnap *allocator.Snapshot
	gen     uint64
	// memo holds what reads worked out from snap (facts.go); every new
	// view gets its own.
	memo *viewFacts
}

// publish makes a new view from the cluster as it is now (in the write
// section), keeping the latest estimates. The view's snapshot is the
// cluster's own if it shares it (Sharer), not a copy: reads clone it.
func (s *Service) publish(c *call) {
	snap, err := s.viewSnapshot(c.ctx)
	if err != nil {
		s.log.Error("reading the cluster for reads to answer from", "err", err)
		return
	}
	c.kueue = nil
	rep := s.kueueReport(c)
	s.vmu.Lock()
	defer s.vmu.Unlock()
	old := s.cur.Load()
	nv := &view{snap: snap, kueue: rep, memo: s.newFacts()}
	if old != nil {
		nv.ests, nv.opts, nv.mix, nv.estAt, nv.estSnap, nv.gen = old.ests, old.opts, old.mix, old.estAt, old.estSnap, old.gen
	}
	s.cur.Store(nv)
}

// viewSnapshot is the cluster's state for a view: shared if the cluster
// shares it, else a copy.
func (s *Service) viewSnapshot(ctx context.Context) (*allocator.Snapshot, error) {
	if sh, ok := s.deps.Cluster.(Sharer); ok {
		return sh.SharedSnapshot(ctx)
	}
	return s.deps.Cluster.Snapshot(ctx)
}

// setEstimates publishes estimates made at at of snap (a view's, not to
// be changed) with opts, and the mix, as a new generation; what-ifs
// simulated against older ones are dropped.
func (s *Service) setEstimates(ests map[string]allocator.Estimate, opts allocator.EstimateOptions, mix allocator.Mix, at time.Time, snap *allocator.Snapshot) {
	s.vmu.Lock()
	defer s.vmu.Unlock()
	nv := *s.cur.Load()
	nv.ests, nv.opts, nv.mix, nv.estAt, nv.estSnap = ests, opts, mix, at, snap
	nv.gen++
	nv.memo = s.newFacts() // capacity's facts depend on the mix
	s.cur.Store(&nv)
	s.hypos.drop(nv.gen)
}

// clone is a copy of snap, counted.
func (s *Service) clone(snap *allocator.Snapshot) *allocator.Snapshot {
	s.copies.Add(1)
	return snap.Clone()
}

// view returns the current view.
func (s *Service) view() *view { return s.cur.Load() }

// snapshot is the cluster for c: in a read, a copy of the view's; in a
// write, the cluster's own, read once until the next operation on it.
func (s *Service) snapshot(c *call) (*allocator.Snapshot, error) {
	if c.snap != nil {
		return c.snap, nil
	}
	if !c.writing {
		c.snap = s.clone(s.view().snap)
		return c.snap, nil
	}
	s.copies.Add(1)
	snap, err := s.deps.Cluster.Snapshot(c.ctx)
	if err != nil {
		return nil, err
	}
	c.snap = snap
	return snap, nil
}

// readSnapshot is the cluster for c to read without filling caches (Now,
// Cluster, Workloads, Capacity, Standing: see allocator's caveats): c's
// own snapshot if it has read one; else, in a read, the view's; in a
// write, the cluster's current state if it shares it (Sharer), without a
// copy; else c's own (snapshot).
func (s *Service) readSnapshot(c *call) (*allocator.Snapshot, error) {
	switch {
	case c.snap != nil:
		return c.snap, nil
	case !c.writing:
		return s.view().snap, nil
	}
	if sh, ok := s.deps.Cluster.(Sharer); ok {
		return sh.SharedSnapshot(c.ctx)
	}
	return s.snapshot(c)
}
