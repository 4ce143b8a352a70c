package simcluster

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// The state saved by the cluster's owner (WithSavesByCaller) is kept
// under many names, so that a change writes what changed and not the
// whole cluster (about 2 MB of JSON for 13 000 workloads): one named
// state per workload (workloadPrefix + its ID: the workload and its
// profile) and one for the rest (metaName: the time, the usage and the
// elastic state). A commit writes the workloads the changes since the
// last one touched, as each mutation marks them (track.go), that differ
// from what the store holds, and the rest only if it changed: its cost
// is that of the change, not of the cluster's 13 000 workloads.
//
// Without WithSavesByCaller the state is one blob under StateName, as
// before; a cluster that finds that blob loads it and, with
// WithSavesByCaller, replaces it by the per-workload names at its first
// save (every workload is marked touched; the blob and names it no
// longer has are removed in the same transaction).
const (
	keyedPrefix    = StateName + "."
	metaName       = keyedPrefix + "meta"
	workloadPrefix = keyedPrefix + "w."
	keyedVersion   = 2
)

// KeyedStore is the StateStore of a cluster WithSavesByCaller: it also
// reads the states sharing a prefix and commits several at once (a nil
// Data removes one). *store.DB satisfies it.
type KeyedStore interface {
	StateStore
	States(ctx context.Context, prefix string) (map[string][]byte, error)
	Commit(ctx context.Context, w records.Writes, at time.Time) ([]uint64, error)
}

// meta is the saved state apart from the workloads.
type meta struct {
	Version int                `json:"version"`
	Now     time.Time          `json:"now"`
	Usage   map[string]float64 `json:"usage"`
	Elastic elasticState       `json:"elastic,omitempty"`
}

// savedWorkload is one workload as saved, with its profile if it has one.
type savedWorkload struct {
	Workload allocator.Workload `json:"workload"`
	Profile  *Profile           `json:"profile,omitempty"`
}

// baseline is what the store holds, as of the last save: each
// workload's saved form by ID, and the encoded meta (nil when unknown);
// fromBlob says the store holds the single blob (and stale, per-workload
// names it no longer has), to be replaced.
type baseline struct {
	ws       map[string]savedWorkload
	meta     []byte
	fromBlob bool
	stale    map[string]bool
}

// unsaved is what an Unsaved returned: the workloads it wrote (nil for
// those it removed), the meta as written, and the number of the last
// change it covers.
type unsaved struct {
	ws   map[string]*savedWorkload
	meta []byte
	gen  uint64
}

// touch marks ids as changed by a new change. The caller holds c.mu.
func (c *Cluster) touch(ids map[string]struct{}) {
	c.gen++
	c.dirty = true
	for id := range ids {
		c.touched[id] = c.gen
	}
}

// settle makes u, now durable, the baseline: the workloads not touched
// again since are saved. The caller holds c.mu.
func (c *Cluster) settle(u *unsaved) {
	for id, sw := range u.ws {
		if sw == nil {
			delete(c.base.ws, id)
		} else {
			c.base.ws[id] = *sw
		}
	}
	c.base.meta, c.base.fromBlob, c.base.stale = u.meta, false, nil
	for id, g := range c.touched {
		if g <= u.gen {
			delete(c.touched, id)
		}
	}
	c.dirty, c.pending = c.gen != u.gen, nil
}

// loadKeyed makes the per-workload state in keyed current. The caller
// holds c.mu or has the only reference to c.
func (c *Cluster) loadKeyed(keyed map[string][]byte) error {
	raw, ok := keyed[metaName]
	if !ok {
		return fmt.Errorf("decoding the simulated cluster's saved state: %d workloads saved without %s", len(keyed), metaName)
	}
	var m meta
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("decoding the simulated cluster's saved state (%s): %w", metaName, err)
	}
	if m.Version != keyedVersion {
		return fmt.Errorf("the simulated cluster's saved state has version %d; this gpubot reads versions %d and %d", m.Version, stateVersion, keyedVersion)
	}
	ws := make([]savedWorkload, 0, len(keyed)-1)
	base := baseline{ws: make(map[string]savedWorkload, len(keyed)), meta: raw}
	for name, data := range keyed {
		id, ok := strings.CutPrefix(name, workloadPrefix)
		if !ok {
			continue
		}
		var sw savedWorkload
		if err := json.Unmarshal(data, &sw); err != nil {
			return fmt.Errorf("decoding the simulated cluster's saved workload %s: %w", id, err)
		}
		if sw.Workload.ID != id {
			return fmt.Errorf("decoding the simulated cluster's saved state: %s holds workload %q", name, sw.Workload.ID)
		}
		ws = append(ws, sw)
		base.ws[id] = sw
	}
	slices.SortFunc(ws, func(a, b savedWorkload) int { return cmp.Compare(a.Workload.ID, b.Workload.ID) })
	wls := make([]allocator.Workload, len(ws))
	profiles := map[string]Profile{}
	for i, sw := range ws {
		wls[i] = sw.Workload
		if sw.Profile != nil {
			profiles[sw.Workload.ID] = *sw.Profile
		}
	}
	snap, err := allocator.NewSnapshot(c.c, m.Now, wls, m.Usage)
	if err != nil {
		return fmt.Errorf("the saved simulated cluster no longer matches the configuration (%w); move the data directory aside to start afresh", err)
	}
	c.snap, c.profiles = snap, profiles
	c.el = m.Elastic.clone()
	c.el.upgrade(snap)
	c.base, c.touched = base, map[string]uint64{}
	return nil
}

// loadStored loads what st holds: the single blob if there is one, else
// the per-workload state; found is false when neither is there.
func (c *Cluster) loadStored(ctx context.Context) (found bool, err error) {
	data, err := c.st.GetState(ctx, StateName)
	if err != nil && !errors.Is(err, records.ErrNotFound) {
		return false, fmt.Errorf("loading the simulated cluster: %w", err)
	}
	var keyed map[string][]byte
	if ks, ok := c.st.(KeyedStore); ok {
		if keyed, err = ks.States(ctx, keyedPrefix); err != nil {
			return false, fmt.Errorf("loading the simulated cluster: %w", err)
		}
	}
	if data != nil {
		if err := c.load(data); err != nil {
			return false, err
		}
		c.base = baseline{ws: map[string]savedWorkload{}, fromBlob: true, stale: map[string]bool{}}
		for name := range keyed {
			c.base.stale[name] = true
		}
		// Replaced by the per-workload state at the first save: every
		// workload is to be written.
		c.touched = map[string]uint64{}
		if c.callerSaves {
			for _, w := range c.snap.Workloads() {
				c.touched[w.ID] = c.gen
			}
		}
		c.dirty = c.callerSaves
		return true, nil
	}
	if len(keyed) == 0 {
		return false, nil
	}
	return true, c.loadKeyed(keyed)
}

// delta returns the named states that make the store hold the current
// state, given what it holds (c.base): the touched workloads that differ
// from their saved form, in ID order, and the meta if it changed; with
// what they will make the baseline once durable. The caller holds c.mu.
func (c *Cluster) delta() ([]records.NamedState, *unsaved, error) {
	ids := make([]string, 0, len(c.touched))
	for id := range c.touched {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	u := &unsaved{ws: map[string]*savedWorkload{}, gen: c.gen}
	var out []records.NamedState
	for _, id := range ids {
		old, had := c.base.ws[id]
		w, ok := c.snap.Workload(id)
		if !ok {
			if had {
				out = append(out, records.NamedState{Name: workloadPrefix + id}) // gone
				u.ws[id] = nil
			}
			continue
		}
		cur := &savedWorkload{Workload: w}
		if p, ok := c.profiles[id]; ok {
			cur.Profile = &p
		}
		if had && sameSaved(old, *cur) {
			continue
		}
		data, err := json.Marshal(cur)
		if err != nil {
			return nil, nil, fmt.Errorf("encoding the simulated cluster's workload %s: %w", id, err)
		}
		out = append(out, records.NamedState{Name: workloadPrefix + id, Data: data})
		u.ws[id] = cur
	}
	data, err := json.Marshal(meta{Version: keyedVersion, Now: c.snap.Now(), Usage: c.snap.Usage(), Elastic: c.el})
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the simulated cluster: %w", err)
	}
	u.meta = data
	if !bytes.Equal(data, c.base.meta) {
		out = append(out, records.NamedState{Name: metaName, Data: data})
	}
	if c.base.fromBlob {
		out = append(out, records.NamedState{Name: StateName})
		written := map[string]bool{}
		for _, s := range out {
			written[s.Name] = true
		}
		for _, name := range slices.Sorted(maps.Keys(c.base.stale)) {
			if !written[name] {
				out = append(out, records.NamedState{Name: name})
			}
		}
	}
	return out, u, nil
}

// sameSaved reports whether a and b would be saved alike.
func sameSaved(a, b savedWorkload) bool {
	x, y := a.Workload, b.Workload
	if x.ID != y.ID || x.Queue != y.Queue || x.Priority != y.Priority || x.GPUs != y.GPUs || x.CPU != y.CPU ||
		x.Memory != y.Memory || x.Flavor != y.Flavor || x.Topology != y.Topology || !x.Created.Equal(y.Created) ||
		x.Duration != y.Duration {
		return false
	}
	if (x.Admission == nil) != (y.Admission == nil) {
		return false
	}
	if x.Admission != nil && (x.Admission.Flavor != y.Admission.Flavor || !x.Admission.At.Equal(y.Admission.At) ||
		!slices.Equal(x.Admission.Nodes, y.Admission.Nodes)) {
		return false
	}
	if (a.Profile == nil) != (b.Profile == nil) {
		return false
	}
	return a.Profile == nil || sameProfile(*a.Profile, *b.Profile)
}

func sameProfile(a, b Profile) bool {
	if (a.GPUUtilization == nil) != (b.GPUUtilization == nil) ||
		(a.GPUUtilization != nil && *a.GPUUtilization != *b.GPUUtilization) {
		return false
	}
	return a.PodsNeverReady == b.PodsNeverReady && a.PodsToldFor.Equal(b.PodsToldFor)
}

// saveKeyed commits the current state's delta through the KeyedStore
// itself (a fresh start, SetProfile). The caller holds c.mu.
func (c *Cluster) saveKeyed(ctx context.Context) error {
	ks, ok := c.st.(KeyedStore)
	if !ok {
		return errors.New("saving the simulated cluster: its store cannot keep per-workload state")
	}
	states, u, err := c.delta()
	if err != nil {
		return err
	}
	if len(states) > 0 {
		if _, err := ks.Commit(ctx, records.Writes{States: states}, c.snap.Now()); err != nil {
			return fmt.Errorf("saving the simulated cluster: %w", err)
		}
	}
	c.settle(u)
	return nil
}

// SavedWorkloads returns the workloads st holds, sorted by ID, in either
// format (the single blob or per workload), without a cluster to check
// them against: for tools and tests that look at a stopped gpubot's data.
// Its error wraps records.ErrNotFound when nothing was saved.
func SavedWorkloads(ctx context.Context, st KeyedStore) ([]allocator.Workload, error) {
	data, err := st.GetState(ctx, StateName)
	switch {
	case err == nil:
		var s state
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("decoding the simulated cluster's saved state: %w", err)
		}
		return s.Workloads, nil
	case !errors.Is(err, records.ErrNotFound):
		return nil, fmt.Errorf("loading the simulated cluster: %w", err)
	}
	keyed, err := st.States(ctx, workloadPrefix)
	if err != nil {
		return nil, fmt.Errorf("loading the simulated cluster: %w", err)
	}
	if len(keyed) == 0 {
		if _, err := st.GetState(ctx, metaName); err != nil {
			return nil, fmt.Errorf("loading the simulated cluster: %w", err)
		}
	}
	out := make([]allocator.Workload, 0, len(keyed))
	for name, data := range keyed {
		var sw savedWorkload
		if err := json.Unmarshal(data, &sw); err != nil {
			return nil, fmt.Errorf("decoding the simulated cluster's saved state (%s): %w", name, err)
		}
		out = append(out, sw.Workload)
	}
	slices.SortFunc(out, func(a, b allocator.Workload) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
