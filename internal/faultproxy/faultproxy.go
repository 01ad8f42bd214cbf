// Package faultproxy is a test helper that injects connection faults between
// a client and a daemon: a Unix-socket relay that cuts every connection at a
// random point, after a random number of bytes or a random time, in the
// middle of whatever line was passing.
//
// The cut points come from a seeded generator. The seed is logged with every
// proxy; set SOUS_FAULT_SEED to replay a failing run with the same sequence
// of cut points (the interleaving of goroutines is up to the scheduler, so a
// replay hits the same budgets, not necessarily the same bytes).
//
//	p := faultproxy.Start(t, daemonSocket, faultproxy.Options{MinBytes: 200 << 10, MaxBytes: 600 << 10})
//	c, _ := client.DialUnix(ctx, p.Path(), token, client.Options{})
//	... // the client reconnects through p after every cut
//	t.Logf("%d cuts survived", p.Cuts())
//
// With no budgets it cuts nothing: a plain relay, which can also delay
// every byte (Latency) or count the requests it relays (CountMethods).
// Descriptors passed with a line (SCM_RIGHTS) do not cross it.
package faultproxy

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Options choose where connections are cut. A connection is cut when it has
// relayed its byte budget (both directions together) or lived its time
// budget, whichever comes first. Budgets are drawn uniformly from
// [Min, Max] for each connection. Zero Max disables that kind of cut.
type Options struct {
	MinBytes, MaxBytes int64
	MinLife, MaxLife   time.Duration
	// Seed fixes the generator; 0 takes SOUS_FAULT_SEED, else a fresh one.
	Seed uint64
	// Latency delays every relayed byte by this much, each direction (a
	// round trip costs twice it), keeping order: a link across a network.
	Latency time.Duration
	// TCP relays TCP instead (a WebSocket daemon): the target is host:port,
	// the proxy listens on a loopback port and Path returns its host:port.
	TCP bool
	// CountMethods counts the JSON-RPC requests going to the target, by
	// method (Requests): tests prove with it what a client does not send.
	CountMethods bool
}

// Proxy relays connections from its own socket to a target socket.
type Proxy struct {
	path   string
	target string
	opt    Options
	seed   uint64

	mu     sync.Mutex
	rng    *rand.Rand
	conns  map[net.Conn]struct{}
	closed bool
	ln     net.Listener
	wg     sync.WaitGroup

	requests map[string]int // CountMethods: requests relayed, by method; under mu

	paused atomic.Bool
	cuts   atomic.Int64
	dials  atomic.Int64
	bytes  atomic.Int64
}

// Seed returns the seed a test should use: SOUS_FAULT_SEED when set, else
// one from the clock. It logs it with how to replay it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	if v := os.Getenv("SOUS_FAULT_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SOUS_FAULT_SEED=%q: want an unsigned integer", v)
		}
		t.Logf("fault seed %d (from SOUS_FAULT_SEED)", s)
		return s
	}
	s := uint64(time.Now().UnixNano())
	t.Logf("fault seed %d (replay with SOUS_FAULT_SEED=%d)", s, s)
	return s
}

// Start serves a proxy to target until the test ends.
func Start(t testing.TB, target string, opt Options) *Proxy {
	t.Helper()
	if opt.Seed == 0 {
		opt.Seed = Seed(t)
	}
	dir, err := os.MkdirTemp("", "fp-") // short: sun_path is ~108 bytes
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{
		path:   filepath.Join(dir, "p.sock"),
		target: target,
		opt:    opt,
		seed:   opt.Seed,
		rng:    rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x5eedfa17)),
		conns:  make(map[net.Conn]struct{}),
	}
	if opt.CountMethods {
		p.requests = make(map[string]int)
	}
	t.Logf("fault proxy: seed %d, cuts after %d..%d bytes or %s..%s", opt.Seed, opt.MinBytes, opt.MaxBytes, opt.MinLife, opt.MaxLife)
	network, addr := "unix", p.path
	if opt.TCP {
		network, addr = "tcp", "127.0.0.1:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	if opt.TCP {
		p.path = ln.Addr().String()
	}
	p.ln = ln
	t.Cleanup(func() {
		p.Close()
		os.RemoveAll(dir)
	})
	p.wg.Add(1)
	go p.accept()
	return p
}

// Requests is how many JSON-RPC requests of method went to the target so
// far (Options.CountMethods).
func (p *Proxy) Requests(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[method]
}

// Path is the proxy's socket (host:port with TCP): dial it instead of the
// target.
func (p *Proxy) Path() string { return p.path }

// Seed is the generator's seed.
func (p *Proxy) Seed() uint64 { return p.seed }

// Cuts is the number of connections cut so far.
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

// Dials is the number of connections accepted so far.
func (p *Proxy) Dials() int64 { return p.dials.Load() }

// Bytes is the number of bytes relayed so far, both directions.
func (p *Proxy) Bytes() int64 { return p.bytes.Load() }

// Pause stops cutting (connections relay until they end by themselves);
// Resume starts again: a connection whose time to be cut came while paused
// is cut a life later. Connections opened while paused still get budgets.
func (p *Proxy) Pause()  { p.paused.Store(true) }
func (p *Proxy) Resume() { p.paused.Store(false) }

// Close stops accepting, cuts every open connection and waits for the
// relays to end.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.dials.Add(1)
		p.wg.Add(1)
		go p.relay(c)
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// budgets draws the next connection's byte and time budgets (0: none).
func (p *Proxy) budgets() (int64, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	var d time.Duration
	if p.opt.MaxBytes > 0 {
		n = p.opt.MinBytes + p.rng.Int64N(p.opt.MaxBytes-p.opt.MinBytes+1)
	}
	if p.opt.MaxLife > 0 {
		d = p.opt.MinLife + time.Duration(p.rng.Int64N(int64(p.opt.MaxLife-p.opt.MinLife)+1))
	}
	return n, d
}

func (p *Proxy) relay(c net.Conn) {
	defer p.wg.Done()
	u, err := net.Dial(p.ln.Addr().Network(), p.target)
	if err != nil {
		c.Close()
		p.untrack(c)
		return
	}
	if !p.track(u) {
		c.Close()
		u.Close()
		p.untrack(c)
		return
	}
	byteBudget, life := p.budgets()
	var left atomic.Int64
	left.Store(byteBudget)
	var once sync.Once
	end := func(cut bool) {
		once.Do(func() {
			if cut {
				p.cuts.Add(1)
			}
			c.Close()
			u.Close()
		})
	}
	if life > 0 {
		// A connection whose life ends while the proxy is paused lives
		// another life, so that a Resume brings its cut back.
		var (
			mu    sync.Mutex
			timer *time.Timer
			over  bool // the relay ended: no more lives
		)
		mu.Lock()
		timer = time.AfterFunc(life, func() {
			if !p.paused.Load() {
				end(true)
				return
			}
			mu.Lock()
			if !over {
				timer.Reset(life)
			}
			mu.Unlock()
		})
		mu.Unlock()
		defer func() { mu.Lock(); over = true; timer.Stop(); mu.Unlock() }()
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		write, flush := dst.Write, func() {}
		if p.opt.Latency > 0 {
			write, flush = p.delay(dst)
		}
		if p.opt.CountMethods && dst == u {
			write = p.counting(write)
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				keep := int64(n)
				cut := false
				if byteBudget > 0 && !p.paused.Load() {
					if rest := left.Add(-int64(n)); rest < 0 {
						// Deliver part of this read, then cut mid-line.
						keep, cut = max(int64(n)+rest, 0), true
					}
				}
				w, werr := write(buf[:keep])
				p.bytes.Add(int64(w))
				if cut || werr != nil {
					end(cut)
					flush()
					return
				}
			}
			if err != nil {
				flush() // what is on its way still arrives
				end(false)
				return
			}
		}
	}
	wg.Add(2)
	go pipe(u, c)
	go pipe(c, u)
	wg.Wait()
	p.untrack(c, u)
}

// counting wraps a write to the target with the count of the requests
// in what it writes, line by line (a line may come in several reads).
func (p *Proxy) counting(write func([]byte) (int, error)) func([]byte) (int, error) {
	var partial []byte
	return func(b []byte) (int, error) {
		for rest := b; len(rest) > 0; {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				partial = append(partial, rest...)
				break
			}
			line := rest[:i]
			if len(partial) > 0 {
				line = append(partial, line...)
				partial = partial[:0]
			}
			rest = rest[i+1:]
			var req struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(line, &req) == nil && req.Method != "" {
				p.mu.Lock()
				p.requests[req.Method]++
				p.mu.Unlock()
			}
		}
		return write(b)
	}
}

// delay returns a write to dst that delivers each piece Latency after it
// was written, in order, and a flush that waits for what is on its way
// (or until dst fails, when the connection was cut).
func (p *Proxy) delay(dst net.Conn) (write func([]byte) (int, error), flush func()) {
	type piece struct {
		b  []byte
		at time.Time
	}
	q := make(chan piece, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		failed := false
		for pc := range q {
			if failed {
				continue
			}
			time.Sleep(time.Until(pc.at))
			if _, err := dst.Write(pc.b); err != nil {
				failed = true
			}
		}
	}()
	var once sync.Once
	write = func(b []byte) (int, error) {
		q <- piece{append([]byte(nil), b...), time.Now().Add(p.opt.Latency)}
		return len(b), nil
	}
	flush = func() {
		once.Do(func() { close(q) })
		<-done
	}
	return write, flush
}
