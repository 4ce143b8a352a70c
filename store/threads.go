package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

// PutThread records where the card and thread of request requestID live,
// replacing what was recorded before.
func (db *DB) PutThread(ctx context.Context, requestID string, t records.Thread) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	if requestID == "" {
		return errors.New("saving thread: no request ID")
	}
	v, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("saving thread of request %s: encoding: %w", requestID, err)
	}
	err = db.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketThreads).Put([]byte(requestID), v)
	})
	if err != nil {
		return fmt.Errorf("saving thread of request %s: %w", requestID, err)
	}
	return nil
}

// GetThread returns where the card and thread of request requestID live,
// or an error wrapping ErrNotFound.
func (db *DB) GetThread(ctx context.Context, requestID string) (records.Thread, error) {
	if err := db.ready(ctx); err != nil {
		return records.Thread{}, err
	}
	var t records.Thread
	err := db.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketThreads).Get([]byte(requestID))
		if v == nil {
			return ErrNotFound
		}
		if err := json.Unmarshal(v, &t); err != nil {
			return corrupt(bucketThreads, strconv.Quote(requestID), err)
		}
		return nil
	})
	if err != nil {
		return records.Thread{}, fmt.Errorf("getting thread of request %s: %w", requestID, err)
	}
	return t, nil
}
