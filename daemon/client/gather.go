package client

import "io"

// gatherChunk is how much of a line a gatherer keeps in its reusable
// buffer, and the size of each chunk past it.
const gatherChunk = 4 << 20

// gatherer assembles a line (or a WebSocket message) read in pieces. The
// first gatherChunk bytes go to buf, which serves one line after another;
// past that, pieces go to chunks of their own, joined at the end into one
// buffer of the exact size that the reader of the line then keeps. A
// buffer grown by doubling would hold a long answer (files.read of a big
// file) up to three times over at its last growth, and twice over for as
// long as the answer's string lives.
type gatherer struct {
	buf    []byte
	chunks [][]byte
	n      int
}

// add appends a copy of p.
func (g *gatherer) add(p []byte) {
	for len(p) > 0 {
		room := g.space()
		k := copy(room, p)
		g.commit(k)
		p = p[k:]
	}
}

// space returns room to read the next bytes into, for commit to take.
func (g *gatherer) space() []byte {
	if len(g.chunks) == 0 && len(g.buf) < gatherChunk {
		if len(g.buf) == cap(g.buf) {
			g.buf = append(g.buf, 0)[:len(g.buf)]
		}
		return g.buf[len(g.buf):min(cap(g.buf), gatherChunk)]
	}
	last := len(g.chunks) - 1
	if last < 0 || len(g.chunks[last]) == cap(g.chunks[last]) {
		g.chunks = append(g.chunks, make([]byte, 0, gatherChunk))
		last++
	}
	c := g.chunks[last]
	return c[len(c):cap(c)]
}

// commit takes the first n bytes of the room space returned.
func (g *gatherer) commit(n int) {
	g.n += n
	if len(g.chunks) == 0 {
		g.buf = g.buf[:len(g.buf)+n]
		return
	}
	last := len(g.chunks) - 1
	g.chunks[last] = g.chunks[last][:len(g.chunks[last])+n]
}

// readFrom reads r to its end.
func (g *gatherer) readFrom(r io.Reader, max int) error {
	for g.n <= max {
		room := g.space()
		room = room[:min(len(room), max+1-g.n)]
		n, err := r.Read(room)
		g.commit(n)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// len is how many bytes were gathered.
func (g *gatherer) len() int { return g.n }

// head is the first n bytes gathered (fewer if there are not as many),
// valid until reset.
func (g *gatherer) head(n int) []byte { return g.buf[:min(n, len(g.buf))] }

// line returns what was gathered: buf itself for a short line, valid
// until reset, or for a long one a buffer of its own (owned), which the
// gatherer forgets.
func (g *gatherer) line() (line []byte, owned bool) {
	if len(g.chunks) == 0 {
		return g.buf, false
	}
	out := make([]byte, 0, g.n)
	out = append(out, g.buf...)
	for _, c := range g.chunks {
		out = append(out, c...)
	}
	g.chunks = nil
	return out, true
}

// reset empties the gatherer, keeping buf for the next line.
func (g *gatherer) reset() {
	g.buf, g.chunks, g.n = g.buf[:0], nil, 0
}
