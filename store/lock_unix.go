//go:build unix

package store

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// errWouldBlock is lockShared giving up because a writer holds the file.
var errWouldBlock = errors.New("file is locked")

// lockShared takes a shared flock on f, as bbolt's read-only open does,
// retrying every 50 ms for up to timeout (once if timeout <= 0). The lock
// goes with the file descriptor. Waiting for a lock is real time, as in
// bbolt.
func lockShared(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if !time.Now().Before(deadline) {
			return errWouldBlock
		}
		time.Sleep(50 * time.Millisecond)
	}
}
