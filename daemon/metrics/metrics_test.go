package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed5ad92d46/sous/daemon"
)

// Every counter of daemon.Stats has a proper name and help here (the
// fallback only keeps a new one from being lost between two commits).
func TestEveryStatsFieldIsNamed(t *testing.T) {
	rt := reflect.TypeOf(daemon.Stats{})
	seen := make(map[string]bool)
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		if f.Type != reflect.TypeOf(atomic.Int64{}) {
			continue
		}
		m, ok := known[f.Name]
		if !ok {
			t.Errorf("daemon.Stats.%s has no entry in metrics.known: give it a name and help", f.Name)
			continue
		}
		if seen[m.name] {
			t.Errorf("metric name %s used twice", m.name)
		}
		seen[m.name] = true
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"RefusedSpawns": "refused_spawns", "Exits": "exits", "WSOpen": "ws_open", "TTYBytes": "tty_bytes"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHandlerReadsStatsAtScrapeTime(t *testing.T) {
	var st daemon.Stats
	srv := httptest.NewServer(Handler(&st))
	defer srv.Close()
	get := func() string {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if body := get(); !strings.Contains(body, "sous_daemon_spawns_total 0\n") {
		t.Fatalf("no zero spawns:\n%s", body)
	}
	st.Spawns.Add(3)
	st.StreamBytes.Add(1 << 40)
	st.ConnectionsOpen.Add(2)
	body := get()
	for _, want := range []string{
		"# TYPE sous_daemon_spawns_total counter\nsous_daemon_spawns_total 3\n",
		"sous_daemon_stream_bytes_total 1.099511627776e+12\n",
		"# TYPE sous_daemon_connections_open gauge\nsous_daemon_connections_open 2\n",
		"# HELP sous_daemon_refused_requests_total ",
		"go_goroutines ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if resp, err := http.Get(srv.URL + "/"); err != nil || resp.StatusCode != 404 {
		t.Errorf("/: %v %v", resp.StatusCode, err)
	}
}
