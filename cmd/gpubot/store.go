package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gpubot/gpubot/internal/app"
)

const storeUsage = `Usage:
  gpubot store check [--data-dir DIR | FILE]
  gpubot store backup [--data-dir DIR] FILE

check   checks a store without changing it: bbolt's file structure (both
        header pages, every page of the tree, the freelist), bbolt's own
        consistency check, the schema version and every record. FILE is a
        gpubot.db or a backup; default: <data-dir>/gpubot.db. Exit status 0
        when gpubot can start on it, 1 when it is damaged or cannot be
        checked (a running gpubot holds it: check a backup instead).
backup  writes a consistent copy of <data-dir>/gpubot.db to the new file
        FILE, checks the copy, and only then gives it its name. It works
        while gpubot runs (it asks the running gpubot over
        <data-dir>/gpubot.sock) and while it is stopped (it reads the
        file, read-only). It never replaces an existing FILE.

Restore: stop gpubot, check the backup, put it in place of gpubot.db
(keep the old file aside), start gpubot; see README, "Backups and restore".

Flags:
`

func runStore(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		fmt.Fprint(stderr, storeUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("gpubot store "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", envOr("GPUBOT_DATA_DIR", app.DefaultDataDir()), "`directory` holding gpubot.db; or $GPUBOT_DATA_DIR")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), storeUsage)
		app.PrintFlags(fs)
	}
	if sub != "check" && sub != "backup" {
		fmt.Fprintf(stderr, "gpubot store: unknown command %q\n\n", sub)
		fs.Usage()
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch sub {
	case "check":
		if fs.NArg() > 1 {
			fmt.Fprintf(stderr, "gpubot store check: one FILE at most, not %d\n", fs.NArg())
			return 2
		}
		path := filepath.Join(*dataDir, app.StoreFile)
		if fs.NArg() == 1 {
			path = fs.Arg(0)
		}
		ok, err := app.StoreCheck(path, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "gpubot: %v\n", err)
			return 1
		}
		if !ok {
			return 1
		}
		return 0
	default: // backup
		if fs.NArg() != 1 {
			fmt.Fprintf(stderr, "gpubot store backup: give the FILE to write the copy to\n\n")
			fs.Usage()
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := app.StoreBackup(ctx, *dataDir, fs.Arg(0), stdout); err != nil {
			fmt.Fprintf(stderr, "gpubot: %v\n", err)
			return 1
		}
		return 0
	}
}
