package runlog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppendEncoded is what the daemon pays per effect of a durable
// run to keep its records: the two records a run("true") makes (its call
// and the answer of the call before, 410 bytes with their frames),
// appended to a journal in the test's temporary directory. "write(2)" is
// the baseline in the same run: the same bytes appended to a file of the
// same directory by one write(2) each, as the journal did before it had
// a window (window.go). "paced" makes 2,000 appends a millisecond apart,
// as a run of commands does, and reports the mean time of an append
// (ns/append): each append then finds the clock moved, and a write(2) has
// the file's times to change as well as its size. Both files are fsynced
// every 100 ms meanwhile, as the daemon's group commit does
// (Writer.SyncEvery).
func BenchmarkAppendEncoded(b *testing.B) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	call, _ := json.Marshal(Record{Kind: KindCall, Seq: 7, Fn: "run", File: "/home/user/recipes/journal.star", Line: 3, Hash: "9f2c1a7be0d4", Show: `"true"`, Call: CallEffect, At: at})
	answer := json.RawMessage(`{"k":"answer","seq":6,"value":{"t":"result","v":{"code":0,"stdout":"","stderr":"","ok":true,"cmd":"true","duration_ms":1}}}`)
	recs := []json.RawMessage{answer, call}
	frames := appendFrame(appendFrame(nil, answer), call)
	for _, paced := range []bool{false, true} {
		name := ""
		if paced {
			name = "paced/"
		}
		// loop runs append b.N times, or paced 2,000 times a millisecond
		// apart, timing only the appends.
		loop := func(b *testing.B, append func() error) {
			if !paced {
				for b.Loop() {
					if err := append(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			const n = 2000
			var spent time.Duration
			before := processCPU(b)
			for range n {
				time.Sleep(time.Millisecond)
				t0 := time.Now()
				if err := append(); err != nil {
					b.Fatal(err)
				}
				spent += time.Since(t0)
			}
			b.ReportMetric(float64(spent.Nanoseconds())/n, "ns/append")
			// The process's CPU, the group commit's fsyncs included.
			b.ReportMetric(float64((processCPU(b)-before).Nanoseconds())/n, "cpu-ns/append")
		}
		if paced {
			// What the pacing costs by itself: its CPU is in the others'.
			b.Run(name+"nothing", func(b *testing.B) { loop(b, func() error { return nil }) })
		}
		b.Run(name+"window", func(b *testing.B) {
			w, err := Create(b.TempDir(), Record{Kind: KindRun, Run: "bench", Recipe: "/r/x.star", At: at})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			w.SyncEvery(100 * time.Millisecond)
			if !paced {
				b.SetBytes(int64(len(frames)))
			}
			b.ReportAllocs()
			loop(b, func() error { return w.AppendEncoded(recs) })
		})
		b.Run(name+"write(2)", func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "plain"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			stop := make(chan struct{})
			defer close(stop)
			go func() { // the group commit of the journal before the window
				t := time.NewTicker(100 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case <-t.C:
						_ = f.Sync()
					}
				}
			}()
			if !paced {
				b.SetBytes(int64(len(frames)))
			}
			loop(b, func() error {
				// The frames as the journal makes them, CRC and all.
				frames = appendFrame(appendFrame(frames[:0], answer), call)
				_, err := f.Write(frames)
				return err
			})
		})
	}
}
