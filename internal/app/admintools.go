package app

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

// The operator's commands that read a stopped bot's data directory or a
// configuration file: gpubot config check, gpubot audit, gpubot usage
// export. They never change what they read.

// ErrInUse is returned by the data directory commands while a running
// gpubot holds the data directory (the store's lock).
var ErrInUse = errors.New("the data directory is in use")

// ConfigCheck checks the configuration file at path and writes every
// problem to w, one per line as file:line:column: field: message. It
// returns the number of problems (0: the file is good, and a summary is
// written), or an error when the file cannot be read at all.
func ConfigCheck(path string, w io.Writer) (int, error) {
	cfg, err := config.Load(path)
	var es config.Errors
	switch {
	case errors.As(err, &es):
		for _, e := range es {
			fmt.Fprintln(w, e)
		}
		return len(es), nil
	case err != nil:
		return 0, err
	}
	set := cfg.Settings()
	cl := cfg.Cluster()
	gpus := 0
	for _, n := range cl.Nodes {
		gpus += n.GPUs
	}
	fmt.Fprintf(w, "%s: ok: %d teams, %d people, %d flavors (%d simulated GPUs), %d priorities, %d seeds\n",
		path, len(set.Teams), len(set.People), len(cl.Flavors), gpus, len(set.Priorities), len(cfg.Seeds()))
	return 0, nil
}

// openStopped opens the store of a data directory that no gpubot is
// running on, without waiting for the lock.
func openStopped(dataDir string) (*store.DB, error) {
	path := filepath.Join(dataDir, "gpubot.db")
	// Opening creates a missing file: a mistyped --data-dir would give an
	// empty log, and leave an empty store behind.
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no gpubot data (no gpubot.db); name the bot's --data-dir", dataDir)
	}
	db, err := store.OpenReadOnly(path, store.WithLockTimeout(0))
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("%w: a running gpubot holds %s; stop it first (these commands read a stopped bot's data), or run them on a copy of the file", ErrInUse, path)
	}
	if err != nil {
		return nil, err
	}
	return db, nil
}

// AuditOptions select audit entries for Audit.
type AuditOptions struct {
	DataDir string
	// Since keeps entries at or after it; zero keeps all.
	Since time.Time
	// Request keeps the entries about one request ("r12"); "" keeps all.
	Request string
	// JSON writes one JSON object per entry and line instead of a table.
	JSON bool
	// In is the time zone of the table; nil is UTC.
	In *time.Location
}

// Audit writes the audit log of a stopped bot's data directory to w.
func Audit(ctx context.Context, o AuditOptions, w io.Writer) error {
	db, err := openStopped(o.DataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	req := o.Request
	if req != "" {
		// The IDs people type in chat (R12, #12, 12) work here too.
		cmd, err := commands.Parse("status "+req, commands.Vocabulary{})
		if err != nil || cmd.ID == "" {
			return fmt.Errorf("--request %q is not a request ID like r12", o.Request)
		}
		req = cmd.ID
	}
	entries, err := db.Audit(ctx, store.AuditQuery{Since: o.Since, Target: req})
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(w)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return fmt.Errorf("writing the audit log: %w", err)
			}
		}
		return nil
	}
	loc := o.In
	if loc == nil {
		loc = time.UTC
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tACTOR\tACTION\tREQUEST\tOUTCOME\tDETAIL")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.At.In(loc).Format("2006-01-02 15:04:05 MST"),
			e.Actor, e.Action, orDash(e.Target), e.Outcome, strings.ReplaceAll(e.Detail, "\n", " "))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the audit log: %w", err)
	}
	if len(entries) == 0 {
		fmt.Fprintln(w, "(no entries)")
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// UsageOptions select what UsageExport writes.
type UsageOptions struct {
	DataDir string
	// Since and Until bound the period; GPU-hours are counted within it.
	// A zero Until is Now or, if later, the time of the data directory's
	// newest audit entry (a simulated cluster's time may be ahead).
	Since, Until time.Time
	Now          time.Time
	// JSON writes one JSON object per line instead of CSV.
	JSON bool
}

// usageRow is one line of the export.
type usageRow struct {
	Request   string    `json:"request"`
	Team      string    `json:"team"`
	Requester string    `json:"requester"`
	Flavor    string    `json:"flavor"`
	GPUs      int       `json:"gpus"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end,omitzero"` // zero: still running
	GPUHours  float64   `json:"gpuHours"`
}

var usageHeader = []string{"request", "team", "requester", "flavor", "gpus", "start", "end", "gpu_hours"}

// UsageExport writes the GPU usage of a stopped bot's data directory
// within [o.Since, o.Until): every finished stretch of use (a request
// preempted and admitted again has one per admission) and, with an empty
// end, the work still running when the bot stopped, counted to o.Until.
func UsageExport(ctx context.Context, o UsageOptions, w io.Writer) error {
	db, err := openStopped(o.DataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	if o.Until.IsZero() {
		o.Until = o.Now
		last, err := db.Audit(ctx, store.AuditQuery{Limit: 1})
		if err != nil {
			return err
		}
		if len(last) == 1 && last[0].At.After(o.Until) {
			o.Until = last[0].At
		}
	}
	if !o.Until.After(o.Since) {
		return fmt.Errorf("the period from %s to %s is empty", o.Since.Format(time.RFC3339), o.Until.Format(time.RFC3339))
	}
	recs, err := db.Usage(ctx, o.Since, o.Until)
	if err != nil {
		return err
	}
	var rows []usageRow
	for _, u := range recs {
		rows = append(rows, usageRow{u.Request, u.Team, u.Requester, u.Flavor, u.GPUs, u.Start, u.End, u.GPUHours(o.Since, o.Until)})
	}
	running, err := db.ListRequests(ctx, func(r records.Request) bool {
		return r.State == records.StateRunning && !r.AdmittedAt.IsZero() && r.AdmittedAt.Before(o.Until)
	})
	if err != nil {
		return err
	}
	for _, r := range running {
		u := records.UsageRecord{GPUs: r.GPUs, Start: r.AdmittedAt, End: o.Until}
		rows = append(rows, usageRow{r.ID, r.Team, r.Requester, r.AdmittedFlavor, r.GPUs, r.AdmittedAt, time.Time{}, u.GPUHours(o.Since, o.Until)})
	}
	if o.JSON {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return fmt.Errorf("writing usage: %w", err)
			}
		}
		return nil
	}
	cw := csv.NewWriter(w)
	_ = cw.Write(usageHeader)
	for _, r := range rows {
		end := ""
		if !r.End.IsZero() {
			end = r.End.UTC().Format(time.RFC3339)
		}
		_ = cw.Write([]string{r.Request, r.Team, r.Requester, r.Flavor, strconv.Itoa(r.GPUs), r.Start.UTC().Format(time.RFC3339), end,
			strconv.FormatFloat(r.GPUHours, 'f', 2, 64)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing usage: %w", err)
	}
	return nil
}

// ParseSince reads a --since value: a duration back from now in the chat
// syntax ("30d", "12h"), an RFC 3339 time, or a date (2026-11-01, UTC).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	d, err := commands.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration like 30d or 12h nor a time like 2026-11-01 or 2026-11-01T09:00:00Z", s)
	}
	return now.Add(-d), nil
}

// RBACOptions say what RBAC writes.
type RBACOptions struct {
	// ConfigPath is the configuration whose team namespaces get a Role;
	// "" is the bundled example.
	ConfigPath string
	// ServiceAccount and Namespace name gpubot's ServiceAccount.
	ServiceAccount, Namespace string
}

// RBAC writes the Kubernetes RBAC manifests gpubot needs for a
// configuration: a read-only ClusterRole for cluster-scoped objects and a
// Role per team namespace (see k8sbridge.RBAC).
func RBAC(o RBACOptions, w io.Writer) error {
	cfg, err := loadConfig(o.ConfigPath)
	if err != nil {
		return err
	}
	data, err := k8sbridge.RBAC(bridgeConfig(cfg), k8sbridge.RBACOptions{ServiceAccount: o.ServiceAccount, Namespace: o.Namespace})
	if err != nil {
		return err
	}
	src := filepath.Base(o.ConfigPath)
	if o.ConfigPath == "" {
		src = "the bundled example configuration"
	}
	fmt.Fprintf(w, "# gpubot's RBAC for %s, written by gpubot rbac: a ClusterRole that only\n"+
		"# reads cluster-scoped objects, and a Role in each team namespace. Regenerate\n"+
		"# it when teams or their namespaces change; do not edit it by hand.\n", src)
	_, err = w.Write(data)
	return err
}
