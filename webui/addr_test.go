package webui

import "testing"

// TestListenAddr: a bare :PORT is loopback; a named host is kept; anything
// else is refused saying what is wanted.
func TestListenAddr(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{in: "127.0.0.1:0", want: "127.0.0.1:0"},
		{in: ":8080", want: "127.0.0.1:8080"},
		{in: "localhost:1", want: "localhost:1"},
		{in: "[::1]:9", want: "[::1]:9"},
		{in: "0.0.0.0:8080", want: "0.0.0.0:8080"},
		{in: "8080", err: `--ui "8080": want HOST:PORT or :PORT (e.g. 127.0.0.1:0): address 8080: missing port in address`},
		{in: "", err: `--ui "": want HOST:PORT or :PORT (e.g. 127.0.0.1:0): missing port in address`},
		{in: ":http", err: `--ui ":http": the port must be a number from 0 to 65535`},
		{in: ":70000", err: `--ui ":70000": the port must be a number from 0 to 65535`},
	} {
		got, err := ListenAddr(c.in)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%q: error %v, want %s", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestBearer: only the exact token, after "Bearer ", matches.
func TestBearer(t *testing.T) {
	for header, want := range map[string]bool{"Bearer tok": true, "Bearer tok ": true, "Bearer to": false, "Bearer tokk": false,
		"bearer tok": false, "tok": false, "": false, "Bearer ": false} {
		if got := bearerMatches(header, "tok"); got != want {
			t.Errorf("%q: %v", header, got)
		}
	}
	if bearerMatches("Bearer ", "") {
		t.Error("an empty token matched")
	}
}
