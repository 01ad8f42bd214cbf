package runlog

import (
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sample() []Record {
	at := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	return []Record{
		{Kind: KindRun, Run: "abc123", Recipe: "/r/x.star", Args: map[string]string{"a": "1"}, Dir: "/r", At: at},
		{Kind: KindCall, Seq: 1, Fn: "run", File: "/r/x.star", Line: 3, Hash: "ff", Show: `"true"`, Call: CallEffect, At: at},
		{Kind: KindAnswer, Seq: 1, Value: []byte(`{"t":"none"}`)},
		{Kind: KindCall, Seq: 2, Fn: "files.read", Line: 4, Call: CallAnswer, At: at},
		{Kind: KindAnswer, Seq: 2, Failed: true, Error: "files.read: no such file"},
	}
}

func TestJournalRoundTripAndTornTail(t *testing.T) {
	dir := t.TempDir()
	recs := sample()
	w, err := Create(dir, recs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[1:] {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(Path(dir, "abc123"))
	if err != nil {
		t.Fatal(err)
	}
	_, all, err := openAndClose(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all, recs) {
		t.Fatalf("read back\n%+v\nwant\n%+v", all, recs)
	}
	firstEnd := len(magic) + frameHeader + len(mustJSON(t, recs[0]))
	// Every cut of the file, at every byte, reads back a prefix of the
	// records, and Open cuts the file back to that prefix.
	for cut := len(magic) + 1; cut < len(full); cut++ {
		if err := os.WriteFile(Path(dir, "abc123"), full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		n, got, err := openAndClose(t, dir)
		if err != nil {
			if cut < firstEnd {
				continue // the run record itself is torn: no run
			}
			t.Fatalf("cut %d: %v", cut, err)
		}
		if !reflect.DeepEqual(got, recs[:len(got)]) {
			t.Fatalf("cut %d: read %+v, not a prefix", cut, got)
		}
		if n > int64(cut) {
			t.Fatalf("cut %d: file grew to %d", cut, n)
		}
		// What Open left is whole: appending after it reads back.
		w, _, err := Open(dir, "abc123")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append(Record{Kind: KindEnd, Status: "ok"}); err != nil {
			t.Fatal(err)
		}
		w.Close()
		_, again, err := openAndClose(t, dir)
		if err != nil || len(again) != len(got)+1 || again[len(got)].Kind != KindEnd {
			t.Fatalf("cut %d: after append: %v %+v", cut, err, again)
		}
	}
}

func openAndClose(t *testing.T, dir string) (int64, []Record, error) {
	t.Helper()
	w, recs, err := Open(dir, "abc123")
	if err != nil {
		return 0, nil, err
	}
	st, _ := w.f.Stat()
	w.Close()
	return st.Size(), recs, nil
}

func TestJournalLockRefusesASecondWriter(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, sample()[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir, "abc123"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Open while held: %v, want ErrBusy", err)
	}
	w.Close()
	w2, _, err := Open(dir, "abc123")
	if err != nil {
		t.Fatalf("Open after close: %v", err)
	}
	w2.Close()
	if _, _, err := Open(dir, "nope"); !errors.Is(err, ErrNoRun) {
		t.Fatalf("Open of no run: %v", err)
	}
	if _, _, err := Open(dir, "../x"); err == nil {
		t.Fatal("a run id with a slash was taken")
	}
}

func TestJournalFlippedByteIsNeverMisread(t *testing.T) {
	recs := sample()
	data := []byte(magic)
	for _, r := range recs {
		data = appendFrame(data, mustJSON(t, r))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		d := append([]byte(nil), data...)
		pos := len(magic) + rng.IntN(len(d)-len(magic))
		d[pos] ^= byte(1 + rng.IntN(255))
		got, _, err := Decode(d)
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(got, recs[:len(got)]) {
			t.Fatalf("byte %d flipped: read %+v", pos, got)
		}
	}
}

func TestValidRunID(t *testing.T) {
	for id, want := range map[string]bool{
		"3f9c2a7b1d0e4c55": true, "a": true, "A_b-9": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "../x": false, "a b": false, "a.journal": false, "é": false,
	} {
		if got := validRunID(id); got != want {
			t.Errorf("validRunID(%q) = %v, want %v", id, got, want)
		}
	}
}
