package journal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/runlog"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
)

// daemonStore serves a daemon with a state dir on a Unix socket and
// returns a Daemon store over a fresh connection to it; more gives
// another client of the same daemon.
func daemonStore(tb testing.TB) (store Daemon, more func() Daemon) {
	tb.Helper()
	sock, _ := daemontest.ServeUnix(tb, daemon.Config{Token: "tok", StateDir: tb.TempDir()})
	return daemonStoreAt(tb, sock)
}

// daemonStoreAt is daemonStore of the daemon at sock.
func daemonStoreAt(tb testing.TB, sock string) (store Daemon, more func() Daemon) {
	more = func() Daemon {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := client.DialUnix(ctx, sock, "tok", client.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		return Daemon{Client: c, Target: "unix://" + sock}
	}
	return more(), more
}

// TestDaemonStore: a run created on one client is listed running, refused
// to another while held, and taken over by that other once its log is
// closed, with every record appended, in order.
func TestDaemonStore(t *testing.T) {
	first, more := daemonStore(t)
	second := more()
	l, err := first.Create(Record{Kind: KindRun, Run: "r1", Recipe: "/x.star", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 300; i++ {
		if err := l.Append(Record{Kind: KindCall, Seq: i, Fn: "run", Call: CallEffect}); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	// Synced on a Unix socket is written to it: the daemon applies it soon.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		runs, err := second.List()
		if err == nil && len(runs) == 1 && runs[0].State == StateRunning && runs[0].Steps == 300 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("List while held: %+v %v", runs, err)
		}
	}
	if _, _, err := second.Open("r1"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Open while held: %v, want ErrBusy", err)
	}
	if _, _, err := second.Open("nope"); !errors.Is(err, ErrNoRun) {
		t.Fatalf("Open of no run: %v, want ErrNoRun", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, recs, err := second.Open("r1")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if len(recs) != 301 || recs[0].Kind != KindRun {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs[1:] {
		if r.Seq != i+1 {
			t.Fatalf("record %d has seq %d: out of order", i+1, r.Seq)
		}
	}
	if err := l.Append(Record{Kind: KindPrint}); err == nil {
		t.Fatal("a closed log appends")
	}
}

// TestDaemonStoreAcrossReconnects: a runner whose connection is cut
// again and again (a fault proxy, at seeded byte counts) re-takes its
// journal with its lease on every new connection, and the resent appends
// are applied once each, in order.
func TestDaemonStoreAcrossReconnects(t *testing.T) {
	sock, _ := daemontest.ServeUnix(t, daemon.Config{Token: "tok", StateDir: t.TempDir()})
	proxy := faultproxy.Start(t, sock, faultproxy.Options{MinBytes: 16 << 10, MaxBytes: 64 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, proxy.Path(), "tok", client.Options{ReconnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := Daemon{Client: c, Target: "unix://" + proxy.Path()}.Create(Record{Kind: KindRun, Run: "r3", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	for i := 1; i <= n; i++ {
		if err := l.Append(Record{Kind: KindCall, Seq: i, Fn: "run", Show: strings.Repeat("x", i%50)}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if proxy.Cuts() < 2 {
		t.Fatalf("only %d cuts (seed %d)", proxy.Cuts(), proxy.Seed())
	}
	other, _ := daemonStoreAt(t, sock)
	l2, recs, err := other.Open("r3")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if len(recs) != n+1 {
		t.Fatalf("%d records after %d cuts, want %d (seed %d)", len(recs), proxy.Cuts(), n+1, proxy.Seed())
	}
	for i, r := range recs[1:] {
		if r.Seq != i+1 {
			t.Fatalf("record %d has seq %d (seed %d)", i+1, r.Seq, proxy.Seed())
		}
	}
}

// BenchmarkDaemonLog is what a journaled call costs the runner on a
// daemon: its record, a sync (a round trip), its answer in the
// background; against the file store (Dir) in the same run.
func BenchmarkDaemonLog(b *testing.B) {
	call := Record{Kind: KindCall, Fn: "run", File: "/src/main.star", Line: 2, Hash: "0123456789abcdef0123456789abcdef",
		Show: `"true"`, Call: CallEffect, At: time.Now()}
	answer := Record{Kind: KindAnswer, Value: []byte(`{"t":"result","code":0,"stdout":"","stderr":""}`)}
	bench := func(b *testing.B, s Store) {
		l, err := s.Create(Record{Kind: KindRun, Run: "bench", Recipe: "/src/main.star", At: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.ResetTimer()
		for i := range b.N {
			call.Seq, answer.Seq = i+1, i+1
			if err := l.Append(call); err != nil {
				b.Fatal(err)
			}
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
			if err := l.Append(answer); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("dir", func(b *testing.B) { bench(b, Dir{Path: b.TempDir()}) })
	b.Run("daemon", func(b *testing.B) { s, _ := daemonStore(b); bench(b, s) })
}

// TestDaemonLogSendsWithoutASync: an effect's answer appended and never
// synced waits (no timer: one per effect cost a context switch); the
// record of a reading call, which may block (sleep), goes within
// sendWithin on its own, and takes the answer before it along; Flush
// sends what waits at once.
func TestDaemonLogSendsWithoutASync(t *testing.T) {
	state := t.TempDir()
	sock, _ := daemontest.ServeUnix(t, daemon.Config{Token: "tok", StateDir: state})
	store, _ := daemonStoreAt(t, sock)
	l, err := store.Create(Record{Kind: KindRun, Run: "r5", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	onDisk := func() int {
		data, err := os.ReadFile(runlog.Path(filepath.Join(state, "runs"), "r5"))
		if err != nil {
			t.Fatal(err)
		}
		recs, _, err := runlog.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	waitFor := func(n int, what string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); onDisk() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (%d records on disk, want %d)", what, onDisk(), n)
			}
		}
	}
	if err := l.Append(Record{Kind: KindAnswer, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * sendWithin)
	if n := onDisk(); n != 1 {
		t.Fatalf("%d records on disk before another append, want the head alone", n)
	}
	if err := l.Append(Record{Kind: KindCall, Seq: 2, Fn: "sleep", Call: CallAnswer}); err != nil {
		t.Fatal(err)
	}
	waitFor(3, "a reading call's record did not go with the answer before it")
	if err := l.Append(Record{Kind: KindCall, Seq: 3, Fn: "sleep", Call: CallAnswer}); err != nil {
		t.Fatal(err)
	}
	waitFor(4, "a reading call's record did not go on its own")
	l.(*daemonLog).sendWithin = time.Hour // only Flush can send these
	for _, r := range []Record{{Kind: KindAnswer, Seq: 3}, {Kind: KindCall, Seq: 4, Fn: "run", Call: CallEffect}} {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// Written on the socket: applied as soon as the daemon reads it.
	for deadline := time.Now().Add(5 * time.Second); onDisk() < 6; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a flush left records unsent (%d on disk)", onDisk())
		}
	}
}

// steps is what List says of run r's steps on store s (-1: not listed).
func steps(t *testing.T, s Daemon, r string) int {
	t.Helper()
	runs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range runs {
		if x.Run == r {
			return x.Steps
		}
	}
	return -1
}

// SyncAhead holds what waits for the next request on the journal's own
// connection, the effect's, and declines for any other connection or
// with SyncAlways; a Flush sends what was held when no request followed.
func TestDaemonSyncAhead(t *testing.T) {
	first, more := daemonStore(t)
	second := more()
	l, err := first.Create(Record{Kind: KindRun, Run: "r1", Recipe: "/x.star", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := l.(Ahead)
	if err := l.Append(Record{Kind: KindCall, Seq: 1, Fn: "run", Call: CallEffect}); err != nil {
		t.Fatal(err)
	}
	if done, err := a.SyncAhead(second.Client); done || err != nil {
		t.Fatalf("SyncAhead for another connection: %v %v, want false", done, err)
	}
	if done, err := a.SyncAhead(first.Client); !done || err != nil {
		t.Fatalf("SyncAhead: %v %v", done, err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := steps(t, second, "r1"); n != 0 {
		t.Fatalf("%d steps before the effect's request, want 0: the record went ahead of it", n)
	}
	if err := first.Client.Call(context.Background(), "server.ping", nil, nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); steps(t, second, "r1") != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the record did not go with the next request: %d steps", steps(t, second, "r1"))
		}
	}

	// No request follows (the effect failed before it sent one): the
	// next Flush sends it.
	if err := l.Append(Record{Kind: KindCall, Seq: 2, Fn: "run", Call: CallEffect}); err != nil {
		t.Fatal(err)
	}
	if done, err := a.SyncAhead(first.Client); !done || err != nil {
		t.Fatalf("SyncAhead: %v %v", done, err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); steps(t, second, "r1") != 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Flush did not send what SyncAhead held: %d steps", steps(t, second, "r1"))
		}
	}

	always := first
	always.SyncAlways = true
	la, err := always.Create(Record{Kind: KindRun, Run: "r2", Recipe: "/x.star", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	if done, err := la.(Ahead).SyncAhead(first.Client); done || err != nil {
		t.Fatalf("SyncAhead with SyncAlways: %v %v, want false", done, err)
	}
}
