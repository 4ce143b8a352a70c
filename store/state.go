package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// PutState stores data as the blob called name, replacing any earlier
// one. The store keeps its own copy; a nil data is stored as empty.
func (db *DB) PutState(ctx context.Context, name string, data []byte) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	if name == "" {
		return errors.New("saving state: no name")
	}
	err := db.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketState).Put([]byte(name), append([]byte{}, data...))
	})
	if err != nil {
		return fmt.Errorf("saving state %s: %w", name, err)
	}
	return nil
}

// GetState returns a copy of the blob called name, or an error wrapping
// ErrNotFound. An empty blob comes back as a non-nil empty slice.
func (db *DB) GetState(ctx context.Context, name string) ([]byte, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	var data []byte
	err := db.view(func(tx *bolt.Tx) error {
		var ok bool
		if data, ok = lookup(tx.Bucket(bucketState), []byte(name)); !ok {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("getting state %s: %w", name, err)
	}
	return data, nil
}

// States returns a copy of every blob whose name starts with prefix, by
// name, read in one transaction (a consistent set). None is an empty map.
func (db *DB) States(ctx context.Context, prefix string) (map[string][]byte, error) {
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	err := db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketState).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			out[string(k)] = append([]byte{}, v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the states named %s…: %w", prefix, err)
	}
	return out, nil
}

// UpdateState reads the blob called name, passes a copy of it to fn (nil
// if there is none) and stores what fn returns, all in one transaction:
// no other write can slip in between. If fn returns an error, nothing is
// stored and UpdateState returns that error, wrapped.
//
// fn runs while the store's single write transaction is open, so it must
// be quick and must not call the store (that would deadlock). If fn
// panics, the transaction is rolled back and the panic goes on.
func (db *DB) UpdateState(ctx context.Context, name string, fn func(old []byte) ([]byte, error)) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	if name == "" {
		return errors.New("updating state: no name")
	}
	err := db.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketState)
		old, _ := lookup(b, []byte(name))
		data, err := callerFunc(fn, old)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), append([]byte{}, data...))
	})
	if err != nil {
		return fmt.Errorf("updating state %s: %w", name, err)
	}
	return nil
}

// callerFunc calls the caller's fn, marking a panic in it as the
// caller's, so that the store's guard lets it go on instead of taking it
// for bbolt failing.
func callerFunc(fn func([]byte) ([]byte, error), old []byte) (data []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			panic(callerPanic{v})
		}
	}()
	return fn(old)
}
