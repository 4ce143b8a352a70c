package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpubot/gpubot/store"
)

// The admin socket: a running gpubot holds its store's file exclusively
// (bbolt's flock), so tools that need the store of a running bot ask the
// bot itself, over a Unix socket in the data directory. Only someone who
// can open the data directory (mode 0700) can connect: the same people
// who could read gpubot.db when the bot is stopped.
//
//	GET /backup   a consistent copy of the store (store.DB.Backup), as
//	              application/octet-stream

// SocketName is the admin socket's name in the data directory.
const SocketName = "gpubot.sock"

// maxSocketPath is the longest Unix socket path Linux and macOS accept.
const maxSocketPath = 104

// serveAdmin serves the admin socket of db in dataDir until the returned
// stop is called. A path too long for a Unix socket, or a socket that
// cannot be made, is logged and leaves the bot running without it.
func serveAdmin(dataDir string, db *store.DB, log *slog.Logger) (stop func()) {
	path := filepath.Join(dataDir, SocketName)
	if len(path) >= maxSocketPath {
		log.Warn("no admin socket: the data directory's path is too long for a Unix socket; gpubot store backup works only while gpubot is stopped", "path", path)
		return func() {}
	}
	// A socket left by a gpubot that was killed: this process holds the
	// store's lock, so no other gpubot serves this directory.
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		log.Warn("no admin socket; gpubot store backup works only while gpubot is stopped", "path", path, "err", err)
		return func() {}
	}
	_ = os.Chmod(path, 0o600)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /backup", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set("Content-Type", "application/octet-stream")
		n, err := db.Backup(r.Context(), w)
		if err != nil {
			// The body is cut short; the client's check of the copy fails.
			log.Error("backup over the admin socket failed", "bytes", n, "err", err)
			return
		}
		log.Info("backup taken over the admin socket", "bytes", n, "took", time.Since(start).String())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = os.Remove(path)
	}
}

// adminClient talks to the admin socket in dataDir.
func adminClient(dataDir string) *http.Client {
	path := filepath.Join(dataDir, SocketName)
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// errNoAdmin says that no gpubot answers on the admin socket.
var errNoAdmin = errors.New("no gpubot answers on the admin socket")

// fetchBackup writes a backup from the gpubot serving dataDir to dest.
func fetchBackup(ctx context.Context, dataDir, dest string) (store.Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://gpubot/backup", nil)
	if err != nil {
		return store.Report{}, err
	}
	resp, err := adminClient(dataDir).Do(req)
	if err != nil {
		return store.Report{}, fmt.Errorf("%w (%s): %w", errNoAdmin, filepath.Join(dataDir, SocketName), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return store.Report{}, fmt.Errorf("the running gpubot answered %s to the backup", strconv.Quote(resp.Status))
	}
	return store.WriteBackup(dest, func(w io.Writer) error {
		_, err := io.Copy(w, resp.Body)
		return err
	})
}
