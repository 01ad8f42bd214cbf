package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	st.FramePumps.Add(5)
	st.MirroredBytes.Add(7)
	body := get()
	for _, want := range []string{
		"# TYPE sous_daemon_spawns_total counter\nsous_daemon_spawns_total 3\n",
		"sous_daemon_stream_bytes_total 1.099511627776e+12\n",
		"# TYPE sous_daemon_connections_open gauge\nsous_daemon_connections_open 2\n",
		"# HELP sous_daemon_refused_requests_total ",
		"# TYPE sous_daemon_frame_pumps_total counter\nsous_daemon_frame_pumps_total 5\n",
		"# TYPE sous_daemon_mirrored_bytes_total counter\nsous_daemon_mirrored_bytes_total 7\n",
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

// The standard gauges read true values of this process, and every line
// of a scrape is a HELP, a TYPE or a sample line of the text format.
func TestScrapeIsWellFormedAndTrue(t *testing.T) {
	var st daemon.Stats
	srv := httptest.NewServer(Handler(&st))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != contentType {
		t.Errorf("Content-Type %q", ct)
	}
	b, _ := io.ReadAll(resp.Body)
	line := regexp.MustCompile(`^(# HELP [a-z_:][a-z0-9_:]* .*|# TYPE [a-z_:][a-z0-9_:]* (counter|gauge|untyped)|[a-z_:][a-z0-9_:]*(\{[a-z_]+="[^"\\]*"\})? [-+0-9.e]+)$`)
	samples := make(map[string]float64)
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if !line.MatchString(l) {
			t.Errorf("not a line of the text format: %q", l)
			continue
		}
		if !strings.HasPrefix(l, "#") {
			name, num, _ := strings.Cut(l, " ")
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				t.Errorf("%q: %v", l, err)
			}
			samples[name] = v
		}
	}
	now := float64(time.Now().Unix())
	for name, ok := range map[string]func(float64) bool{
		"go_goroutines":                                func(v float64) bool { return v >= 2 },
		"go_threads":                                   func(v float64) bool { return v >= 1 },
		"go_memstats_heap_alloc_bytes":                 func(v float64) bool { return v > 0 },
		"process_resident_memory_bytes":                func(v float64) bool { return v > 1<<20 && v < 1<<32 },
		"process_open_fds":                             func(v float64) bool { return v >= 3 },
		"process_max_fds":                              func(v float64) bool { return v >= 3 },
		"process_cpu_seconds_total":                    func(v float64) bool { return v >= 0 && v < 3600 },
		"process_start_time_seconds":                   func(v float64) bool { return v > now-3600 && v <= now+1 },
		`go_info{version="` + runtime.Version() + `"}`: func(v float64) bool { return v == 1 },
	} {
		v, found := samples[name]
		if !found || !ok(v) {
			t.Errorf("%s = %v (found %v)", name, v, found)
		}
	}
}

func TestEscaping(t *testing.T) {
	var e exposition
	e.labelled("m", "a \\ b\nc", typeGauge, map[string]string{"v": "q\"\\\n"}, 0.5)
	want := "# HELP m a \\\\ b\\nc\n# TYPE m gauge\nm{v=\"q\\\"\\\\\\n\"} 0.5\n"
	if got := string(e.buf); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
