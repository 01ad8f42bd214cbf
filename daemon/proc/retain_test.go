package proc

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestRetentionForgetsOldestExited(t *testing.T) {
	r := NewRegistry(Options{RetainExited: 2})
	defer r.Shutdown(false, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 4 {
		p, err := r.Spawn(Spec{ID: fmt.Sprint("p", i), Command: "true"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-ctx.Done():
			t.Fatal("process did not exit")
		}
		time.Sleep(2 * time.Millisecond) // distinct exit times
	}
	live, err := r.Spawn(Spec{ID: "live", Command: "sleep", Args: []string{"5"}})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Signal(9)
	r.prune(time.Now())
	for i, want := range []bool{false, false, true, true} {
		if got := r.Get(fmt.Sprint("p", i)) != nil; got != want {
			t.Errorf("p%d retained = %v, want %v", i, got, want)
		}
	}
	if r.Get("live") == nil {
		t.Error("a running process was forgotten")
	}
	// Age: everything that exited is past a 0-length window an hour later.
	r.prune(time.Now().Add(2 * time.Hour))
	if r.Get("p3") != nil || r.Get("live") == nil {
		t.Errorf("after an hour: p3 retained %v, live retained %v", r.Get("p3") != nil, r.Get("live") != nil)
	}
}
