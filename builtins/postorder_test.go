package builtins

import (
	"slices"
	"sync"
	"testing"
)

// Permission requests reach the recipe thread in the order the CLI sent
// them, whatever order their goroutines get to post in.
func TestPostOrder(t *testing.T) {
	var o postOrder
	var got []int
	post := func(f func()) { f() }
	add := func(n int) func() { return func() { got = append(got, n) } }
	for _, seq := range []uint64{3, 1, 2, 6, 5, 4} {
		o.post(seq, add(int(seq)), post)
	}
	o.post(0, add(0), post) // unnumbered: at once
	if want := []int{1, 2, 3, 4, 5, 6, 0}; !slices.Equal(got, want) {
		t.Fatalf("posted %v, want %v", got, want)
	}

	// Concurrent posters, as the engine's goroutines are.
	var p postOrder
	var mu sync.Mutex
	var order []uint64
	var wg sync.WaitGroup
	for seq := uint64(1); seq <= 200; seq++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.post(seq, func() { mu.Lock(); order = append(order, seq); mu.Unlock() }, func(f func()) { f() })
		}()
	}
	wg.Wait()
	if len(order) != 200 || !slices.IsSorted(order) {
		t.Fatalf("posted %d callbacks, in order: %v", len(order), slices.IsSorted(order))
	}
}
