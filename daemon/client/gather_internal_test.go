package client

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestGathererJoinsPiecesExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var g gatherer
	for _, size := range []int{0, 10, gatherChunk - 1, gatherChunk, gatherChunk + 1, 3*gatherChunk + 12345} {
		g.reset()
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.IntN(256))
		}
		for p := want; len(p) > 0; {
			k := min(len(p), 1+rng.IntN(300<<10))
			g.add(p[:k])
			p = p[k:]
		}
		if g.len() != size {
			t.Fatalf("%d bytes: len %d", size, g.len())
		}
		line, owned := g.line()
		if !bytes.Equal(line, want) {
			t.Fatalf("%d bytes: the line differs", size)
		}
		if long := size > gatherChunk; owned != long || (owned && cap(line) != size) {
			t.Fatalf("%d bytes: owned %v, cap %d", size, owned, cap(line))
		}
		if !bytes.Equal(g.head(8), want[:min(8, size)]) {
			t.Fatalf("%d bytes: head %x", size, g.head(8))
		}
	}
}

func TestGathererReadsToMax(t *testing.T) {
	var g gatherer
	src := bytes.Repeat([]byte("abc"), gatherChunk)
	if err := g.readFrom(bytes.NewReader(src), len(src)); err != nil || g.len() != len(src) {
		t.Fatalf("read %d of %d: %v", g.len(), len(src), err)
	}
	if line, _ := g.line(); !bytes.Equal(line, src) {
		t.Fatal("the message differs")
	}
	g.reset()
	if err := g.readFrom(bytes.NewReader(src), 1000); err != nil || g.len() != 1001 {
		t.Fatalf("over a max of 1000: read %d, %v", g.len(), err)
	}
}
