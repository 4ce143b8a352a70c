// Package store keeps gpubot's durable state in one bbolt file: requests,
// chat threads, the audit log, usage history, dedupe keys for chat
// deliveries, named state blobs and zombie findings (work found holding
// GPUs without using them). It is the only package that imports
// bbolt; the rest of gpubot sees plain records types and the small
// interfaces it declares for itself (package commands' RequestStore,
// AuditLog, …), which *DB satisfies.
//
// # Basics
//
// Open the file once per process and share the *DB between goroutines:
//
//	db, err := store.Open(filepath.Join(dataDir, "gpubot.db"))
//	if err != nil {
//		return err // errors.Is(err, store.ErrLocked): another gpubot runs
//	}
//	defer db.Close()
//
// Every method that reads or writes records takes a context, checks it
// (returning ctx.Err() as is) and then runs exactly one bbolt transaction: writes are all or nothing, and a
// method that returns nil has made its change durable, because bbolt
// fsyncs the file on each commit. Several changes that must land together
// go through one call: Commit writes a decision's requests, audit entries,
// usage, zombies, named state (the simulated cluster's), job runs and
// outbox messages in one transaction (SaveRequests and UpdateState are
// narrower).
//
// Errors say what was being done ("saving request r7: …") and wrap the
// sentinels ErrNotFound, ErrLocked, ErrSchema, ErrClosed, ErrCorrupt,
// ErrDamaged (with ErrEmpty for a zero-length file) and ErrReadOnly;
// test them with errors.Is. A stored value that does not decode is
// reported as ErrCorrupt with its bucket and key; it never panics.
//
// # Failing safe
//
// Open checks an existing file before it writes anything to it: Check,
// read-only under a shared lock, first reads bbolt's file format itself
// with every offset bounds-checked (both header pages, the file's length
// against its header, every page of the tree and of nested buckets, the
// freelist, each page used once or free), then runs bbolt's Tx.Check,
// the schema version and a decode of every record. A damaged, empty,
// corrupt or foreign file is refused with the file's name and the first
// problems, and is left byte for byte as it was. bbolt reads pages
// through a memory map without bounds checks: on a damaged file it
// panics or faults (SIGBUS, SIGSEGV) where no recover helps, which is why
// the structure is read independently first. While running, every
// transaction runs behind a recover with panic-on-fault: a panic or fault
// inside bbolt becomes ErrDamaged, and the DB stops using the file.
//
// OpenReadOnly opens a checked file without ever writing it (for tools
// reading a stopped gpubot's data). Backup writes a consistent copy of a
// live store (bbolt's Tx.WriteTo, in a read transaction, so writes go
// on); WriteBackup turns such a copy into a new, synced, checked file.
//
// Values come back as fresh copies: nothing returned points into bbolt's
// memory map, which is only valid inside a transaction.
//
// The file holds these top-level buckets:
//
//	meta           "schema": the schema version, in decimal; "usage-max-span":
//	               the longest usage record ever appended (bounds usage scans)
//	requests       request ID → records.Request as JSON. The bucket's bbolt
//	               sequence is the counter behind NextRequestID.
//	audit          8-byte big-endian sequence (1, 2, …) → records.AuditEntry
//	               as JSON. Append-only; the bucket sequence is the last one.
//	usage          8-byte big-endian End (unix nanoseconds) + request ID →
//	               records.UsageRecord as JSON, so scans by time are cheap.
//	usage-index    8-byte Start + request ID → key in usage; makes
//	               AppendUsage idempotent per (Request, Start).
//	threads        request ID → records.Thread as JSON (where its card is); also
//	               "channel:#name" → the ID of a channel configured by name
//	dedupe         delivery key → 8-byte big-endian expiry (unix nanoseconds)
//	dedupe-expiry  8-byte expiry + delivery key → nothing; oldest first, for
//	               pruning
//	state          name → opaque blob (for example the simulated cluster's,
//	               one per workload and one for the rest; States reads
//	               those sharing a prefix, Commit removes one given nil Data)
//	zombies        8-byte big-endian sequence (1, 2, …) → records.Zombie as
//	               JSON, whose ID is "z" and the sequence in decimal. The
//	               bucket's sequence is the counter behind new zombies' IDs.
//	jobs           scheduled job name → records.JobRun as JSON: the job's last
//	               completed run (or its baseline), so that a digest is never
//	               posted twice for one period, across restarts
//	samples        8-byte big-endian At (unix nanoseconds) → records.Sample as
//	               JSON: the cluster's fragmentation and what the queue waited
//	               for, sampled periodically for the digest's averages
//	outbox         8-byte big-endian sequence (1, 2, …) → records.Outbound as
//	               JSON: a message gpubot means to send, written in the same
//	               transaction as the decision that causes it (Commit) and
//	               removed once the chat platform confirmed it (Delivered;
//	               removals that arrive while one is written share the
//	               next write). The bucket's sequence is the last one given.
//	inbox          delivery key → records.Inbound as JSON: a delivery from the
//	               chat platform, stored before it is acked (Receive) and
//	               removed with the decision it led to (Commit) or once
//	               handled (Handled); handled at the next start if a crash
//	               came between. The bucket's sequence orders them.
//
// # Caveats
//
// One process at a time. bbolt takes an exclusive flock on the file, so a
// second gpubot (or a second Open in the same process) waits up to the
// lock timeout and fails with ErrLocked; so do Check and OpenReadOnly
// (which take a shared lock) while a gpubot has it open. A running
// gpubot's store is copied with Backup, in that process. Run one replica per volume; on
// Kubernetes use a ReadWriteOnce volume and the Recreate strategy so the
// old pod lets go before the new one opens the file. flock is advisory and
// unreliable on some network file systems: keep the file on a local disk
// or a block volume.
//
// Writes are serialised. bbolt has one writer at a time and each commit
// costs an fsync (about 0.3 ms per write on the development machine's
// local disk, far more on network disks), so the store suits gpubot's rate
// of decisions, not bulk import.
// Readers run alongside the writer and see a consistent snapshot.
// UpdateState's callback runs inside the write transaction: it must be
// quick and must not call the store, or it deadlocks.
//
// Checking costs a read of the whole file at every Open: see
// BENCHMARKS.md for the figures. A bucket added to allBuckets should get
// its records decoded in recordCheck.all (check.go); until then bbolt's
// consistency check covers it.
//
// Schema versions. The file records the version of its layout. Open
// writes the current version into a new file and refuses, with ErrSchema
// naming both versions, a file with a newer version (written by a newer
// gpubot: downgrades fail loudly instead of misreading data), an
// unreadable one, or a non-empty bbolt file without one (not gpubot's).
// The version changes only when a key or value changes meaning; adding an
// optional JSON field to a record does not change it, since old builds
// ignore unknown fields and new builds read missing ones as zero. When it
// changes, Open will migrate older files forward in its single opening
// transaction. Version 1 is the first, so no migration exists yet. Adding
// a bucket does not change it either: Open creates missing buckets, and
// older builds leave buckets they do not know alone (jobs and samples were
// added that way).
//
// Time is an input. Nothing here reads the clock: audit entries carry
// the caller's At, Seen takes now. Times used in keys (usage End and
// Start, dedupe expiries) must lie between 1970 and 2262, the range of
// int64 unix nanoseconds.
//
// The file only grows. bbolt reuses freed pages but never shrinks the
// file; the audit log and usage history are kept forever. Dedupe keys are
// the exception: every Seen call prunes up to 64 expired ones.
package store
