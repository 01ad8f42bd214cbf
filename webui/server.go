package webui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seed5ad92d46/sous/daemon/netlimit"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

//go:embed assets
var assets embed.FS

// AnswerFunc decides a pending request. A request decided already gives a
// *wire.Error with wire.CodeApprovalDecided whose message says by whom; an
// unknown id, wire.CodeApprovalUnknown.
type AnswerFunc func(ctx context.Context, a wire.AskAnswer) error

// MaxConnections bounds the connections the server holds at once (pages,
// their event streams, API clients, peers that connect and say nothing);
// one more is closed as soon as accepted. A browser needs a few; a
// script that answers a hundred requests at once, a hundred.
const MaxConnections = 256

// Server serves one page and its API.
type Server struct {
	hub    *Hub
	token  string
	answer AnswerFunc
	ln     net.Listener
	http   *http.Server
	// hosts are the Host headers accepted: the loopback names of the
	// port, when the server listens on loopback (nil: any).
	hosts map[string]bool
	url   string
}

// Listen starts serving hub's page at addr (ListenAddr's result) with
// token; answer decides the requests the page answers.
func Listen(addr, token string, hub *Hub, answer AnswerFunc) (*Server, error) {
	if token == "" {
		return nil, errors.New("web page: an empty token would let anyone in")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--ui %s: %w", addr, err)
	}
	host, _, _ := net.SplitHostPort(addr)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	s := &Server{hub: hub, token: token, answer: answer, ln: ln,
		url: "http://" + net.JoinHostPort(host, port) + "/#token=" + url.QueryEscape(token)}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		// A page elsewhere whose name resolves to 127.0.0.1 (DNS
		// rebinding) sends its own name as Host: refused.
		s.hosts = map[string]bool{}
		for _, h := range []string{"127.0.0.1", "localhost", "::1", host} {
			s.hosts[net.JoinHostPort(h, port)] = true
		}
	}
	s.http = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	go s.http.Serve(netlimit.New(ln, MaxConnections, netlimit.Counters{}))
	return s, nil
}

// URL is the page's address with the token in its fragment, which the
// browser keeps to itself: http://HOST:PORT/#token=TOKEN.
func (s *Server) URL() string { return s.url }

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close ends the event streams (after what they have queued) and stops
// the server.
func (s *Server) Close() error {
	s.hub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		return s.http.Close()
	}
	return nil
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.Handle("GET /app.js", files)
	mux.Handle("GET /app.css", files)
	mux.Handle("GET /api/state", s.api(s.serveState))
	mux.Handle("GET /api/events", s.api(s.hub.serveEvents))
	mux.Handle("POST /api/approvals/{id}", s.api(s.serveAnswer))
	mux.Handle("/api/", s.api(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API: "+r.Method+" "+r.URL.Path)
	}))
	return s.secure(mux)
}

// secure sets the headers every answer carries and refuses a Host that is
// not the server's own.
func (s *Server) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Scripts and styles come from the embedded files only: text a
		// process printed can never run, even if it reached the markup.
		h.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if s.hosts != nil && !s.hosts[strings.ToLower(r.Host)] {
			writeError(w, http.StatusMisdirectedRequest, "this server answers to its loopback address only, not "+r.Host)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// api guards the API: a request from another origin is refused (403),
// one without the token too (401).
func (s *Server) api(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if origin := r.Header.Get("Origin"); origin != "" && origin != "http://"+r.Host {
			writeError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
		default: // cross-site, or same-site: another port of the same host is another origin
			writeError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		if !bearerMatches(r.Header.Get("Authorization"), s.token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sous"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong token: open the URL sous printed (http://HOST:PORT/#token=...)")
			return
		}
		next(w, r)
	})
}

func (s *Server) serveState(w http.ResponseWriter, _ *http.Request) {
	s.hub.mu.Lock()
	st := s.hub.snapshotLocked()
	s.hub.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
}

// answerBody is POST /api/approvals/ID's body.
type answerBody struct {
	Decision string `json:"decision"`
	Message  string `json:"message"`
}

// serveAnswer decides a pending request: 200, 409 when it was decided
// already (the body says by whom), 404 when unknown.
func (s *Server) serveAnswer(w http.ResponseWriter, r *http.Request) {
	var body answerBody
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "want {\"decision\": \"allow\"|\"deny\", \"message\": \"...\"}: "+err.Error())
		return
	}
	if body.Decision != wire.DecisionAllow && body.Decision != wire.DecisionDeny {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("decision must be %q or %q, not %q", wire.DecisionAllow, wire.DecisionDeny, body.Decision))
		return
	}
	id := r.PathValue("id")
	err := s.answer(r.Context(), wire.AskAnswer{ID: id, Decision: body.Decision, Message: body.Message, By: "remote"})
	var we *wire.Error
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "decision": body.Decision})
	case errors.As(err, &we) && we.Code == wire.CodeApprovalDecided:
		writeError(w, http.StatusConflict, we.Message)
	case errors.As(err, &we) && we.Code == wire.CodeApprovalUnknown:
		writeError(w, http.StatusNotFound, we.Message)
	case errors.As(err, &we) && we.Code == wire.CodeInvalidParams:
		writeError(w, http.StatusBadRequest, we.Message)
	default:
		writeError(w, http.StatusBadGateway, "answering "+id+": "+err.Error())
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
