package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

// NextRequestID returns a new request ID: "r1", "r2", and so on, from a
// counter kept in the file (the sequence of bucket requests). It never
// returns the same ID twice, nor an ID of the form r<N> that PutRequest,
// SaveRequests or Commit has already stored. It writes nothing: the
// store's next write of any kind makes the IDs handed out so far durable (one
// fsync a request instead of two). After a restart, an ID that was handed
// out and not followed by any write may be handed out again: nothing in
// the file can name it. An ID shown outside before anything is stored
// (written on a cluster's object) must come from ReserveRequestID.
func (db *DB) NextRequestID(ctx context.Context) (string, error) {
	if err := db.ready(ctx); err != nil {
		return "", err
	}
	var seq uint64
	if err := db.view(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bucketRequests).Sequence()
		return nil
	}); err != nil {
		return "", fmt.Errorf("allocating request ID: %w", err)
	}
	db.idMu.Lock()
	defer db.idMu.Unlock()
	n := max(db.ids.Load(), seq) + 1
	db.ids.Store(n)
	return "r" + strconv.FormatUint(n, 10), nil
}

// ReserveRequestID is NextRequestID made durable before it returns: the
// ID is never handed out again, even after a crash that stores nothing.
func (db *DB) ReserveRequestID(ctx context.Context) (string, error) {
	id, err := db.NextRequestID(ctx)
	if err != nil {
		return "", err
	}
	// update keeps the IDs handed out (keepIDs).
	if err := db.update(func(*bolt.Tx) error { return nil }); err != nil {
		return "", fmt.Errorf("reserving request ID %s: %w", id, err)
	}
	return id, nil
}

// keepIDs moves the file's ID counter past every ID handed out, in a
// transaction that writes anyway.
func (db *DB) keepIDs(b *bolt.Bucket) error {
	if n := db.ids.Load(); n > b.Sequence() {
		return b.SetSequence(n)
	}
	return nil
}

// PutRequest stores r under r.ID, replacing any request with that ID.
func (db *DB) PutRequest(ctx context.Context, r records.Request) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	if r.ID == "" {
		return errors.New("saving request: request has no ID")
	}
	err := db.update(func(tx *bolt.Tx) error {
		return putRequest(tx.Bucket(bucketRequests), r)
	})
	if err != nil {
		return fmt.Errorf("saving request %s: %w", r.ID, err)
	}
	return nil
}

// SaveRequests stores several requests in one transaction: either all are
// stored or, on error, none is. Later entries win over earlier ones with
// the same ID.
func (db *DB) SaveRequests(ctx context.Context, rs ...records.Request) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	ids := make([]string, len(rs))
	for i, r := range rs {
		if r.ID == "" {
			return fmt.Errorf("saving requests: request %d of %d has no ID", i+1, len(rs))
		}
		ids[i] = r.ID
	}
	if len(rs) == 0 {
		return nil
	}
	err := db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRequests)
		for _, r := range rs {
			if err := putRequest(b, r); err != nil {
				return fmt.Errorf("request %s: %w", r.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("saving requests %s: %w", strings.Join(ids, ", "), err)
	}
	return nil
}

// GetRequest returns the request with the given ID, or an error wrapping
// ErrNotFound.
func (db *DB) GetRequest(ctx context.Context, id string) (records.Request, error) {
	if err := db.ready(ctx); err != nil {
		return records.Request{}, err
	}
	var r records.Request
	err := db.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketRequests).Get([]byte(id))
		if v == nil {
			return ErrNotFound
		}
		var err error
		r, err = decodeRequest([]byte(id), v)
		return err
	})
	if err != nil {
		return records.Request{}, fmt.Errorf("getting request %s: %w", id, err)
	}
	return r, nil
}

// ListRequests returns the stored requests for which keep returns true
// (all of them if keep is nil), ordered by ID number: r2 before r10. IDs
// of another shape sort by their non-numeric prefix, then their trailing
// number. keep runs outside the transaction, so it may call the store.
func (db *DB) ListRequests(ctx context.Context, keep func(records.Request) bool) ([]records.Request, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	var all []records.Request
	err := db.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRequests).ForEach(func(k, v []byte) error {
			r, err := decodeRequest(k, v)
			if err != nil {
				return err
			}
			all = append(all, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing requests: %w", err)
	}
	if keep != nil {
		all = slices.DeleteFunc(all, func(r records.Request) bool { return !keep(r) })
	}
	slices.SortFunc(all, func(a, b records.Request) int { return compareIDs(a.ID, b.ID) })
	return all, nil
}

// putRequest writes r and moves the ID counter past r's number, so that
// NextRequestID never hands out an ID that is already taken.
func putRequest(b *bolt.Bucket, r records.Request) error {
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	if err := b.Put([]byte(r.ID), v); err != nil {
		return err
	}
	if n, ok := requestNumber(r.ID); ok && n > b.Sequence() {
		return b.SetSequence(n)
	}
	return nil
}

// decodeRequest decodes the request stored at key.
func decodeRequest(key, v []byte) (records.Request, error) {
	var r records.Request
	if err := json.Unmarshal(v, &r); err != nil {
		return records.Request{}, corrupt(bucketRequests, strconv.Quote(string(key)), err)
	}
	if r.ID != string(key) {
		return records.Request{}, corrupt(bucketRequests, strconv.Quote(string(key)),
			fmt.Errorf("record has ID %q", r.ID))
	}
	return r, nil
}

// requestNumber returns N for an ID "r<N>" as NextRequestID makes them.
func requestNumber(id string) (uint64, bool) {
	digits, ok := strings.CutPrefix(id, "r")
	if !ok || digits == "" || digits[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// compareIDs orders IDs by non-numeric prefix, then by the value of their
// trailing digits, then bytewise (which settles leading zeros).
func compareIDs(a, b string) int {
	pa, na := splitID(a)
	pb, nb := splitID(b)
	if c := strings.Compare(pa, pb); c != 0 {
		return c
	}
	na, nb = strings.TrimLeft(na, "0"), strings.TrimLeft(nb, "0")
	if c := cmp.Compare(len(na), len(nb)); c != 0 {
		return c
	}
	if c := strings.Compare(na, nb); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// splitID splits id into its prefix and its trailing ASCII digits.
func splitID(id string) (prefix, digits string) {
	i := len(id)
	for i > 0 && id[i-1] >= '0' && id[i-1] <= '9' {
		i--
	}
	return id[:i], id[i:]
}
