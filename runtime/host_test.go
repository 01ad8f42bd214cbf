package runtime

import "testing"

// TestHostLocal: rules resolve symlinks only for hosts whose files are
// this machine's: the embedded daemon and Unix sockets.
func TestHostLocal(t *testing.T) {
	t.Parallel()
	for target, want := range map[string]bool{
		"embedded": true, "": true, "unix:///run/sous.sock": true,
		"ssh://build@host": false, "ws://127.0.0.1:8003": false, "wss://host/x": false, "bogus": false,
	} {
		if got := (&Host{target: target}).Local(); got != want {
			t.Errorf("Host %q local = %v, want %v", target, got, want)
		}
	}
	if (*Host)(nil).Local() {
		t.Error("a nil host is local")
	}
}
