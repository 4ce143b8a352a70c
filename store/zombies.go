package store

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

// PutZombie stores a zombie finding. A zombie without an ID is new: it is
// given the next ID ("z1", "z2", … from the sequence of bucket zombies)
// and returned with it. A zombie with an ID replaces the stored one,
// which must exist (else the error wraps ErrNotFound): IDs come only from
// the store.
func (db *DB) PutZombie(ctx context.Context, z records.Zombie) (records.Zombie, error) {
	if err := db.ready(ctx); err != nil {
		return records.Zombie{}, err
	}
	doing := "saving zombie " + z.ID
	if z.ID == "" {
		doing = "saving a new zombie of " + cmp.Or(z.Request, z.Workload)
	}
	err := db.update(func(tx *bolt.Tx) error {
		if z.ID == "" {
			n, err := tx.Bucket(bucketZombies).NextSequence()
			if err != nil {
				return err
			}
			z.ID = zombieID(n)
			return putZombie(tx, z)
		}
		b := tx.Bucket(bucketZombies)
		if n, ok := zombieNumber(z.ID); !ok || b.Get(seqKey(n)) == nil {
			return ErrNotFound
		}
		return putZombie(tx, z)
	})
	if err != nil {
		return records.Zombie{}, fmt.Errorf("%s: %w", doing, err)
	}
	return z, nil
}

// putZombie writes z, which has an ID, in tx, moving the ID counter past
// it.
func putZombie(tx *bolt.Tx, z records.Zombie) error {
	b := tx.Bucket(bucketZombies)
	n, ok := zombieNumber(z.ID)
	if !ok {
		return fmt.Errorf("%q is not a zombie ID", z.ID)
	}
	if n > b.Sequence() {
		if err := b.SetSequence(n); err != nil {
			return err
		}
	}
	v, err := json.Marshal(z)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	return b.Put(seqKey(n), v)
}

// GetZombie returns the zombie with the given ID, or an error wrapping
// ErrNotFound.
func (db *DB) GetZombie(ctx context.Context, id string) (records.Zombie, error) {
	if err := db.ready(ctx); err != nil {
		return records.Zombie{}, err
	}
	var z records.Zombie
	err := db.view(func(tx *bolt.Tx) error {
		n, ok := zombieNumber(id)
		if !ok {
			return ErrNotFound
		}
		key := seqKey(n)
		v := tx.Bucket(bucketZombies).Get(key)
		if v == nil {
			return ErrNotFound
		}
		var err error
		z, err = decodeZombie(key, v)
		return err
	})
	if err != nil {
		return records.Zombie{}, fmt.Errorf("getting zombie %s: %w", id, err)
	}
	return z, nil
}

// Zombies returns the zombies whose waste overlaps [from, to): those
// with Since before to that were still open at from (open ones, and
// those resolved after from), in the order they were found. It returns
// nothing if to is not after from.
//
// It reads every stored zombie: they are few (a handful a day), and a
// zombie found today may have started wasting GPUs before any bound a
// key could give.
func (db *DB) Zombies(ctx context.Context, from, to time.Time) ([]records.Zombie, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	if !to.After(from) {
		return nil, nil
	}
	var out []records.Zombie
	err := db.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketZombies).ForEach(func(k, v []byte) error {
			z, err := decodeZombie(k, v)
			if err != nil {
				return err
			}
			if overlaps(z, from, to) {
				out = append(out, z)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing zombies from %s to %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return out, nil
}

// overlaps reports whether z wasted GPUs within [from, to).
func overlaps(z records.Zombie, from, to time.Time) bool {
	if !z.Since.Before(to) {
		return false
	}
	if z.Outcome == records.ZombieOpen || z.ResolvedAt.IsZero() {
		return true
	}
	return z.ResolvedAt.After(from)
}

func zombieID(n uint64) string { return "z" + strconv.FormatUint(n, 10) }

// zombieNumber parses "z<N>" (N ≥ 1, no leading zeros).
func zombieNumber(id string) (uint64, bool) {
	s, ok := strings.CutPrefix(id, "z")
	if !ok || s == "" || s[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func seqKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// decodeZombie decodes the value at key, which must hold the zombie whose
// ID the key's number gives.
func decodeZombie(key, v []byte) (records.Zombie, error) {
	var z records.Zombie
	if len(key) != 8 {
		return z, corrupt(bucketZombies, fmt.Sprintf("%x", key), errors.New("key is not 8 bytes"))
	}
	id := zombieID(binary.BigEndian.Uint64(key))
	if err := json.Unmarshal(v, &z); err != nil {
		return z, corrupt(bucketZombies, id, err)
	}
	if z.ID != id {
		return z, corrupt(bucketZombies, id, fmt.Errorf("holds zombie %q", z.ID))
	}
	return z, nil
}
