//go:build !unix

package store

import (
	"errors"
	"os"
	"time"
)

// errWouldBlock is lockShared giving up because a writer holds the file.
var errWouldBlock = errors.New("file is locked")

// lockShared does nothing where flock does not exist: bbolt's own
// read-only open, which Check makes next, locks the file there.
func lockShared(*os.File, time.Duration) error { return nil }
