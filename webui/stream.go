package webui

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Bounds and pace of a page's event stream.
const (
	// ClientBuffer is how many bytes of events may wait for one page; a
	// page that falls further behind is dropped (it reconnects and starts
	// again from the state), so that it never holds up the run.
	ClientBuffer = 1 << 20
	// keepAlive is how often an idle stream sends a comment, so that
	// proxies and the page see it is alive.
	keepAlive = 15 * time.Second
	// writeTimeout bounds one write to a page.
	writeTimeout = 30 * time.Second
)

// subscriber is one page's event stream: a bounded queue the hub fills
// without waiting and the stream's own goroutine empties.
type subscriber struct {
	mu      sync.Mutex
	queue   [][]byte
	size    int
	wake    chan struct{} // a send when the queue gets something
	done    chan struct{} // closed when the stream is to end
	dropped bool          // it ends because it fell behind
	ended   bool
}

func newSubscriber() *subscriber {
	return &subscriber{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues msg; false when that would pass ClientBuffer.
func (s *subscriber) push(msg []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return true
	}
	if s.size+len(msg) > ClientBuffer {
		return false
	}
	s.queue = append(s.queue, msg)
	s.size += len(msg)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// take empties the queue.
func (s *subscriber) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue, s.size = nil, 0
	return q
}

// finish ends the stream: at once when dropped, else after what is
// queued.
func (s *subscriber) finish(dropped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended, s.dropped = true, dropped
	if dropped {
		s.queue, s.size = nil, 0
	}
	close(s.done)
}

// broadcastLines sends each line of the --json encoding as one event to
// every page (h.mu held).
func (h *Hub) broadcastLines(lines []byte) {
	if len(lines) == 0 {
		return
	}
	frame := h.frame[:0]
	for len(lines) > 0 {
		line := lines
		if i := indexNewline(lines); i >= 0 {
			line, lines = lines[:i], lines[i+1:]
		} else {
			lines = nil
		}
		if len(line) == 0 {
			continue
		}
		frame = append(frame, "data: "...)
		frame = append(frame, line...)
		frame = append(frame, "\n\n"...)
	}
	h.frame = frame
	// One copy shared by every page's queue: the queues keep it after
	// h.frame is reused.
	h.broadcast(append([]byte(nil), frame...))
}

func indexNewline(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}

// broadcast queues one frame for every page, dropping those that fell
// behind (h.mu held).
func (h *Hub) broadcast(frame []byte) {
	for s := range h.subs {
		if !s.push(frame) {
			s.finish(true)
			delete(h.subs, s)
		}
	}
}

// broadcastApprovals sends the pending requests as an approvals event
// (h.mu held). The --json stream says when a request is decided; a page
// also needs to know when one starts to wait and what it is, so it gets
// the list, whole, each time it changes.
func (h *Hub) broadcastApprovals(at time.Time) {
	if len(h.subs) == 0 {
		return
	}
	h.broadcast(eventFrame("approvals", at, "approvals", append([]Approval{}, h.approvals...)))
}

// eventFrame is one event of the page's own (state, approvals) as an SSE
// frame: {"event": NAME, "time": ..., KEY: VALUE}.
func eventFrame(name string, at time.Time, key string, value any) []byte {
	b, err := json.Marshal(map[string]any{"event": name, "time": at.Format(timeFormat), key: value})
	if err != nil {
		// Only the hub's own values reach here; they always encode.
		panic(err)
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// timeFormat is the --json stream's: RFC 3339 with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// subscribe registers a page's stream and returns it with the state event
// it starts with: taken under the same lock, so the page misses no event
// and sees none twice.
func (h *Hub) subscribe() (*subscriber, []byte) {
	h.mu.Lock()
	s := newSubscriber()
	now, snap := h.now(), h.snapshotLocked()
	if h.closed {
		s.finish(false)
	} else {
		h.subs[s] = struct{}{}
	}
	h.mu.Unlock()
	// The snapshot is a copy (what it shares, no event changes): it is
	// encoded without holding up the run.
	return s, eventFrame("state", now, "state", snap)
}

func (h *Hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, s)
	s.finish(false)
}

// serveEvents is GET /api/events: the state event, then every event as it
// happens, and a comment every keepAlive.
func (h *Hub) serveEvents(w http.ResponseWriter, r *http.Request) {
	sub, first := h.subscribe()
	defer h.unsubscribe(sub)
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(chunks ...[]byte) bool {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		for _, c := range chunks {
			if _, err := w.Write(c); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	if !write(first) {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-sub.wake:
			if !write(sub.take()...) {
				return
			}
		case <-tick.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case <-sub.done:
			if !sub.dropped {
				write(sub.take()...)
			}
			return
		case <-r.Context().Done():
			return
		}
	}
}
