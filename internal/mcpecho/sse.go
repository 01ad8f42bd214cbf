package mcpecho

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// sseServer serves MCP's older HTTP+SSE transport (the "sse" type of
// --mcp-config): a GET opens a stream of server-sent events whose first,
// "endpoint", names the URL to POST messages to; each POST is accepted
// with 202 and its response comes back on the stream as a "message" event.
type sseServer struct {
	tag string

	mu      sync.Mutex
	streams map[string]chan []byte
	next    int
}

// SSEHandler serves the HTTP+SSE transport: GET any path opens a stream,
// POST /messages?session=ID carries a message of that stream's session.
// tag prefixes the echoes as MCPECHO_TAG does.
func SSEHandler(tag string) http.Handler {
	return &sseServer{tag: tag, streams: make(map[string]chan []byte)}
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet:
		s.stream(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/messages":
		s.post(w, r)
	default:
		http.Error(w, "mcpecho: GET a stream or POST /messages", http.StatusNotFound)
	}
}

func (s *sseServer) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "mcpecho: streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch := make(chan []byte, 16)
	s.mu.Lock()
	s.next++
	id := strconv.Itoa(s.next)
	s.streams[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.streams, id)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "event: endpoint\ndata: /messages?session=%s\n\n", id)
	flusher.Flush()
	for {
		select {
		case msg := <-ch:
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
			flusher.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func (s *sseServer) post(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ch := s.streams[r.URL.Query().Get("session")]
	s.mu.Unlock()
	if ch == nil {
		http.Error(w, "mcpecho: no such session", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	if a := answer(body, s.tag); a != nil {
		b, _ := json.Marshal(a)
		select {
		case ch <- b:
		case <-r.Context().Done():
		}
	}
}
