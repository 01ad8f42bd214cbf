package testutil

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Webhook is a local HTTP server that keeps the JSON objects POSTed to it,
// as a chat or CI webhook would receive --notify's notifications.
type Webhook struct {
	*httptest.Server
	mu       sync.Mutex
	payloads []map[string]any
	headers  []http.Header
}

// NewWebhook starts one, closed when the test ends. before, when set, sees
// each request first; when it returns false the request is not kept (it
// answered the request itself, or held it).
func NewWebhook(tb testing.TB, before func(w http.ResponseWriter, r *http.Request) bool) *Webhook {
	tb.Helper()
	h := &Webhook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if before != nil && !before(w, r) {
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		if r.Method != http.MethodPost || json.Unmarshal(body, &m) != nil {
			tb.Errorf("%s %s with %q, want a POST of a JSON object", r.Method, r.URL, body)
			return
		}
		h.mu.Lock()
		h.payloads = append(h.payloads, m)
		h.headers = append(h.headers, r.Header.Clone())
		h.mu.Unlock()
	}))
	tb.Cleanup(h.Close)
	return h
}

// Payloads returns the objects received so far, in order.
func (h *Webhook) Payloads() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.payloads...)
}

// Headers returns the headers of the requests kept, in order.
func (h *Webhook) Headers() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.headers...)
}
