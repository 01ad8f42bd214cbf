package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/journal"
)

// Where a durable run's journal is kept: in --journal DIR when given;
// else, for a run against a standalone daemon (--socket, --remote) that
// has the run.journal feature, by that daemon, so that any of its clients
// resumes the run. The embedded daemon keeps no journal unless told where.

// journalConnectTimeout bounds the connection the journal is kept over.
const journalConnectTimeout = 30 * time.Second

// daemonJournal is the journal store of a standalone daemon, over a
// connection that lasts as long as the runner: the daemon holds the
// run's journal for this connection, and lets it go when it closes,
// however the runner ends. A run uses it as its own connection to the
// daemon too (runtime.Options.HostConn): a record then goes in the same
// stream as the request of the effect it precedes, and the daemon reads
// both in one wake-up; on a connection of its own, each record cost the
// daemon and the runner a wake-up more per effect.
type daemonJournal struct {
	conn  *client.Conn
	store journal.Store
}

func (d *daemonJournal) close() {
	if d != nil {
		d.conn.Close()
	}
}

// openDaemonJournal connects to the standalone daemon tg names and
// returns its journal store. need says what asks for it ("resume",
// "runs"): without it, a daemon that cannot be reached or lacks the
// feature is no error, but no store (nil, nil): the run is not journaled.
func openDaemonJournal(tg client.Target, sync journalSync, fault journal.Fault, need string) (*daemonJournal, error) {
	ctx, cancel := context.WithTimeout(context.Background(), journalConnectTimeout)
	defer cancel()
	conn, err := client.Open(ctx, tg)
	if err != nil {
		if need == "" {
			return nil, nil // the run's first call will say why
		}
		return nil, fmt.Errorf("%s: %w", need, err)
	}
	ok, err := conn.HasFeature(ctx, wire.FeatureRunJournal)
	if err == nil && !ok {
		err = usageErrorf("the daemon at %s keeps no journals (no %s feature: upgrade it, or run it with a --state-dir)", tg.URL, wire.FeatureRunJournal)
	}
	if err != nil {
		conn.Close()
		if need == "" {
			return nil, nil
		}
		var ue *usageError
		if errors.As(err, &ue) {
			return nil, usageErrorf("%s: %v", need, err)
		}
		return nil, fmt.Errorf("%s: %w", need, err)
	}
	store := journal.Daemon{Client: conn.Client, Target: tg.URL, SyncAlways: sync == journalSyncAlways, Fault: fault}
	return &daemonJournal{conn: conn, store: store}, nil
}

// journalSync is --journal-sync: when a journal reaches the disk.
type journalSync string

const (
	// journalSyncBatch: fsync in the background within
	// journal.GroupCommit, and when the run ends.
	journalSyncBatch journalSync = "batch"
	// journalSyncAlways: fsync before every call with an effect.
	journalSyncAlways journalSync = "always"
)

func (s *journalSync) String() string { return string(*s) }
func (s *journalSync) Type() string   { return "MODE" }
func (s *journalSync) Set(v string) error {
	switch journalSync(v) {
	case journalSyncBatch, journalSyncAlways:
		*s = journalSync(v)
		return nil
	}
	return fmt.Errorf("want batch or always, got %q", v)
}

// journalSyncUsage is the --journal-sync flag's help.
const journalSyncUsage = "when the journal reaches the disk: batch (in the background within 100ms, and at the end) or always (before every call with an effect; slower)"

// runJournalStore is the store of a run's journal (nil: the run is not
// journaled), the connection to the run's daemon it keeps the journal
// over (nil: none, the run opens its own), and what closes both once the
// run is over.
func runJournalStore(opts *RunOptions, tg client.Target) (journal.Store, *client.Conn, func(), error) {
	fault, err := journalFault(opts.Getenv("SOUS_FAULT_JOURNAL"))
	if err != nil {
		return nil, nil, nil, err
	}
	nothing := func() {}
	switch {
	case opts.Journal != "":
		return journal.Dir{Path: opts.Journal, SyncAlways: opts.JournalSync == journalSyncAlways, Fault: fault}, nil, nothing, nil
	case opts.NoJournal:
		return nil, nil, nothing, nil
	case client.IsEmbedded(tg.URL):
		if opts.Resume != "" {
			return nil, nil, nil, usageErrorf("resume: where is the run's journal? --journal DIR for a run on the embedded daemon, " +
				"or the daemon that keeps it: --socket PATH or --remote URL")
		}
		return nil, nil, nothing, nil
	}
	need := ""
	if opts.Resume != "" {
		need = "resume"
	}
	dj, err := openDaemonJournal(tg, opts.JournalSync, fault, need)
	if err != nil || dj == nil {
		return nil, nil, nothing, err
	}
	return dj.store, dj.conn, dj.close, nil
}
