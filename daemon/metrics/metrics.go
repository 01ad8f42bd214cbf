// Package metrics exports a daemon's counters in Prometheus' text format
// (docs/PROTOCOL.md, -metrics-addr). The counters are the daemon's own atomics
// (daemon.Stats), read at scrape time: nothing is counted twice, and the
// daemon itself knows nothing of HTTP or Prometheus.
//
// Only counts are exported: no command lines, output, paths or tokens. The
// endpoint has no auth; bind it to a trusted interface (loopback).
//
// The exposition is written here (exposition.go), with the standard go_*
// and process_* gauges beside the daemon's (runtime.go), rather than with
// prometheus/client_golang: every sous command links this package, and the
// client library's package initialisers (its default registry, procfs,
// protobuf) ran at every start: 0.30, 0.17 and 0.23 ms of package init
// (GODEBUG=inittrace=1, one run on a loaded machine). Text format 0.0.4 is
// what every scraper reads.
package metrics

import (
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/netlimit"
)

// Namespace prefixes every metric of the daemon.
const Namespace = "sous_daemon"

// metric names and documents one daemon.Stats field.
type metric struct {
	name  string
	help  string
	gauge bool
}

// known names the Stats fields. A field missing here is still exported,
// under its snake_case name and as untyped, so a counter added to Stats is
// never silently left out; give it a line here for a proper name and help.
var known = map[string]metric{
	"Connections":       {"connections_total", "Connections accepted, every transport (Unix socket, WebSocket).", false},
	"ConnectionsOpen":   {"connections_open", "Connections open now, every transport.", true},
	"Spawns":            {"spawns_total", "Processes spawned (process.spawn).", false},
	"Exits":             {"exits_total", "Spawned processes that exited.", false},
	"Reattaches":        {"reattaches_total", "process.reattach calls.", false},
	"StreamBytes":       {"stream_bytes_total", "Bytes of child output read (stdout and stderr).", false},
	"MirroredBytes":     {"mirrored_bytes_total", "Bytes of child output the daemon teed or wrote into a pipe or file its spawner passed (of stream_bytes_total), which did not cross the connection.", false},
	"StdinBytes":        {"stdin_bytes_total", "Bytes of stdin accepted for children.", false},
	"Refused":           {"refused_requests_total", "Requests refused for a bad or missing auth token (-32001).", false},
	"RefusedSpawns":     {"refused_spawns_total", "Spawns refused because the command is not in --allow-command.", false},
	"FramePumps":        {"frame_pumps_total", "Goroutines started to deliver a subscription's frames: streams whose reader fell behind the child, and mirrored spawns.", false},
	"WebSocketsOpen":    {"websocket_connections_open", "WebSocket connections open now (what --max-connections bounds).", true},
	"UpgradesRefused":   {"websocket_upgrades_unauthorized_total", "WebSocket upgrades refused with 401 (bad or missing bearer token).", false},
	"UpgradesOverLimit": {"websocket_upgrades_over_limit_total", "WebSocket upgrades refused with 503 (--max-connections).", false},
	"HeartbeatDrops":    {"websocket_heartbeat_drops_total", "WebSocket peers dropped for not answering a ping in time.", false},
	"WebSocketsPending": {"websocket_pending_connections", "TCP connections to the WebSocket listeners not upgraded yet.", true},
	"WebSocketsShed":    {"websocket_shed_connections_total", "TCP connections to a WebSocket listener closed on accept because too many were pending.", false},
}

// Collector reads a daemon's Stats at scrape time.
type Collector struct {
	values []value
}

type value struct {
	name, help, typ string
	v               *atomic.Int64
}

// NewCollector exports every atomic.Int64 field of stats.
func NewCollector(stats *daemon.Stats) *Collector {
	c := &Collector{}
	rv := reflect.ValueOf(stats).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		p, ok := rv.Field(i).Addr().Interface().(*atomic.Int64)
		if !ok || !f.IsExported() {
			continue
		}
		m, ok := known[f.Name]
		typ := typeCounter
		switch {
		case !ok:
			m = metric{name: snake(f.Name), help: "The daemon's Stats." + f.Name + " counter."}
			typ = typeUntyped
		case m.gauge:
			typ = typeGauge
		}
		c.values = append(c.values, value{name: Namespace + "_" + m.name, help: m.help, typ: typ, v: p})
	}
	return c
}

// collect writes one sample per counter: one load each.
func (c *Collector) collect(e *exposition) {
	for _, v := range c.values {
		e.sample(v.name, v.help, v.typ, float64(v.v.Load()))
	}
}

// snake turns a Go field name into a metric name: RefusedSpawns →
// refused_spawns.
func snake(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Handler serves the daemon's metrics at /metrics, with the Go runtime's
// and the process' standard gauges beside them.
func Handler(stats *daemon.Stats) http.Handler {
	c := NewCollector(stats)
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		var e exposition
		c.collect(&e)
		collectGo(&e)
		collectProcess(&e)
		w.Header().Set("Content-Type", contentType)
		w.Write(e.buf)
	})
	return mux
}

// Server is a running metrics endpoint.
type Server struct {
	hs *http.Server
	ln net.Listener
}

// The endpoint has no auth, so whoever reaches it may hold connections:
// at most maxPending at once (more are closed on accept), each for one
// request of at most handshakeTimeout to read and write (no keep-alive: a
// scrape every few seconds can afford a connection each).
const (
	maxPending       = 16
	handshakeTimeout = 5 * time.Second
)

// Listen binds addr (host:port) and serves the metrics of stats on it in
// the background.
func Listen(addr string, stats *daemon.Stats) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{
		Handler:           Handler(stats),
		ReadHeaderTimeout: handshakeTimeout,
		ReadTimeout:       handshakeTimeout,
		WriteTimeout:      handshakeTimeout,
		IdleTimeout:       handshakeTimeout,
		MaxHeaderBytes:    16 << 10,
		ConnState:         netlimit.ConnState,
	}
	hs.SetKeepAlivesEnabled(false)
	s := &Server{ln: ln, hs: hs}
	go s.hs.Serve(netlimit.New(ln, maxPending, netlimit.Counters{})) // returns when Close closes the listener
	return s, nil
}

// URL is where the metrics are served.
func (s *Server) URL() string { return fmt.Sprintf("http://%s/metrics", s.ln.Addr()) }

// Close stops serving.
func (s *Server) Close() error { return s.hs.Close() }
