package daemon

import (
	"bytes"
	"encoding/base64"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// TestTokenCompareIsConstantTime reviews the implementation instead of
// timing it (a timing test would be flaky on a shared machine): the token
// check hashes both sides with SHA-256 and compares the fixed-length digests
// with crypto/subtle, the daemon's hash is computed once, and no code of the
// package compares a token or an auth field with == or !=.
func TestTokenCompareIsConstantTime(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	pkgFiles, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	src := func(n ast.Node) string {
		var b bytes.Buffer
		printer.Fprint(&b, fset, n)
		return b.String()
	}
	var sawAuthorized bool
	for _, name := range pkgFiles {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.FuncDecl:
				if x.Name.Name != "authorized" || x.Body == nil {
					return true
				}
				sawAuthorized = true
				body := src(x.Body)
				for _, want := range []string{"sha256.Sum256(", "subtle.ConstantTimeCompare(h[:], s.tokenHash[:])"} {
					if !strings.Contains(body, want) {
						t.Errorf("%s: authorized does not use %s:\n%s", fset.Position(x.Pos()), want, body)
					}
				}
			case *ast.BinaryExpr:
				if x.Op != token.EQL && x.Op != token.NEQ {
					return true
				}
				l, r := strings.ToLower(src(x.X)), strings.ToLower(src(x.Y))
				secret := func(s string) bool {
					return strings.Contains(s, "token") || strings.Contains(s, ".auth") || strings.Contains(s, "bearer")
				}
				trivial := func(s string) bool { return s == `""` || s == "nil" }
				if strings.HasPrefix(l, "subtle.constanttimecompare(") {
					return true // comparing its 0/1 result
				}
				if (secret(l) || secret(r)) && !trivial(l) && !trivial(r) {
					t.Errorf("%s: %s compares a secret with %s, which can return early: use authorized()", fset.Position(x.Pos()), src(x), x.Op)
				}
			}
			return true
		})
	}
	if !sawAuthorized {
		t.Fatal("no authorized function found: update this review test")
	}
	// The digest is computed once, at New, from the configured token.
	srv, err := New(Config{Token: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !srv.authorized("a") || srv.authorized("") || srv.authorized("a ") || srv.authorized("A") {
		t.Error("authorized accepts the wrong tokens or refuses the right one")
	}
}

// TestTokensNeverLogged captures everything the daemon logs (debug level,
// text and JSON) through a session that sends wrong tokens, the right one,
// spawns, writes stdin, reattaches, kills and refuses a shutdown: neither
// the daemon's token nor any wrong token a client sent appears in the logs.
// (Neither does output written to stdin or by the child.)
func TestTokensNeverLogged(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			var logs testutil.SyncBuffer
			opts := &slog.HandlerOptions{Level: slog.LevelDebug}
			var h slog.Handler = slog.NewTextHandler(&logs, opts)
			if format == "json" {
				h = slog.NewJSONHandler(&logs, opts)
			}
			const secretOut = "child-output-secret-42"
			d := startDaemon(t, Config{Logger: slog.New(h), Dir: t.TempDir()})
			c := d.dial()
			wrong := []string{"wrong-token-Zq9", testToken + "x", testToken[:4]}
			for i, w := range wrong {
				c.send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(100+i) + `,"method":"server.ping","auth":"` + w + `"}` + "\n")
			}
			c.send(`{"jsonrpc":"2.0","id":9,"method":"server.shutdown","auth":"` + wrong[0] + `"}` + "\n")
			c.result("server.ping", "")
			c.result("process.spawn", shParams("p1", "cat; echo "+secretOut+" >&2"))
			c.result("process.stdin", mustJSON(map[string]any{"id": "p1", "data": base64.StdEncoding.EncodeToString([]byte("stdin-secret-17\n")), "offset": 0, "close": true}))
			c.waitExit("p1")
			c.result("process.reattach", `{"id":"p1","fromSeq":0}`)
			c.result("process.killAndWait", `{"id":"p1"}`)
			c.result("files.stat", `{"path":"/"}`)
			log := logs.String()
			if !strings.Contains(log, "Unauthorized request") || !strings.Contains(log, "spawn") {
				t.Fatalf("the logs lack the refused requests or the spawn; is the logger wired?\n%s", log)
			}
			for _, secret := range append([]string{testToken, "stdin-secret-17", secretOut}, wrong...) {
				if strings.Contains(log, secret) {
					t.Errorf("the daemon logged %q:\n%s", secret, log)
				}
			}
			if _, err := os.Stat(d.sock); err != nil {
				t.Errorf("a wrong-token shutdown stopped the daemon: %v", err)
			}
		})
	}
}
