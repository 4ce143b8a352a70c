package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// ErrOtherCluster is returned by Run when the data directory belongs to
// another cluster than the one gpubot was started on. Using it anyway
// would resubmit, on the new cluster, every queued request that is not
// there.
var ErrOtherCluster = errors.New("the data directory belongs to another cluster")

// clusterStateName is the store's state blob that records which cluster
// the data directory belongs to.
const clusterStateName = "cluster"

// dataOwner is what the data directory records about its cluster.
type dataOwner struct {
	// Kind is "simulated" or "kubernetes".
	Kind string `json:"kind"`
	// UID is the kube-system namespace's UID (kubernetes only).
	UID string `json:"uid,omitempty"`
	// Server is the API server's URL when the directory was first used,
	// for the message only.
	Server string `json:"server,omitempty"`
}

func (o dataOwner) String() string {
	if o.Kind == "simulated" {
		return "the simulated cluster"
	}
	return fmt.Sprintf("the Kubernetes cluster at %s (kube-system namespace UID %s)", o.Server, o.UID)
}

func (o dataOwner) same(p dataOwner) bool { return o.Kind == p.Kind && o.UID == p.UID }

var simulated = dataOwner{Kind: "simulated"}

// claimDataDir records that db belongs to cur, or fails with
// ErrOtherCluster when it belongs to another. A data directory from before
// gpubot recorded this belongs to the simulated cluster when it holds the
// simulated cluster's state, and is claimed by cur otherwise.
func claimDataDir(ctx context.Context, db *store.DB, dir string, cur dataOwner) error {
	data, err := db.GetState(ctx, clusterStateName)
	switch {
	case errors.Is(err, store.ErrNotFound):
		prev := cur
		if _, err := db.GetState(ctx, simcluster.StateName); err == nil {
			prev = simulated
		} else if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("reading the data directory's cluster: %w", err)
		}
		if !prev.same(cur) {
			return mismatch(dir, prev, cur)
		}
		data, err := json.Marshal(cur)
		if err != nil {
			return fmt.Errorf("recording the data directory's cluster: %w", err)
		}
		if err := db.PutState(ctx, clusterStateName, data); err != nil {
			return fmt.Errorf("recording the data directory's cluster: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading the data directory's cluster: %w", err)
	}
	var prev dataOwner
	if err := json.Unmarshal(data, &prev); err != nil {
		return fmt.Errorf("reading the data directory's cluster: %w: %v", store.ErrCorrupt, err)
	}
	if !prev.same(cur) {
		return mismatch(dir, prev, cur)
	}
	return nil
}

func mismatch(dir string, prev, cur dataOwner) error {
	return fmt.Errorf("%w: %s holds the requests of %s, not of %s; "+
		"give each cluster its own --data-dir (its queued requests would otherwise be submitted again here)", ErrOtherCluster, dir, prev, cur)
}
