package metrics

import (
	"bytes"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/procstat"
)

// collectGo adds the Go runtime's gauges, named as client_golang's Go
// collector names them so that existing dashboards read them. They are
// read with runtime.ReadMemStats, which stops the world for a moment at
// each scrape, rather than with runtime/metrics: that package's init
// builds its table of every metric (about 50 µs and 15 KB) in every sous
// process, and most never serve a scrape (docs/PERFORMANCE.md, "The start
// of `sous run`"). The figures are the same ones: heap objects' bytes are
// HeapAlloc, the total from the system Sys, the cycles NumGC.
func collectGo(e *exposition) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	e.sample("go_goroutines", "Number of goroutines that currently exist.", typeGauge, float64(runtime.NumGoroutine()))
	e.sample("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and still in use.", typeGauge, float64(ms.HeapAlloc))
	e.sample("go_memstats_sys_bytes", "Number of bytes obtained from the system.", typeGauge, float64(ms.Sys))
	e.sample("go_gc_cycles_total", "Number of completed GC cycles.", typeCounter, float64(ms.NumGC))
	e.sample("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.", typeGauge, float64(runtime.GOMAXPROCS(0)))
	// What pprof.Lookup("threadcreate").Count() reads.
	threads, _ := runtime.ThreadCreateProfile(nil)
	e.sample("go_threads", "Number of OS threads created.", typeGauge, float64(threads))
	e.labelled("go_info", "Information about the Go environment.", typeGauge,
		map[string]string{"version": runtime.Version()}, 1)
}

// collectProcess adds the process_* gauges of client_golang's process
// collector, read from /proc/self; what cannot be read is left out.
func collectProcess(e *exposition) {
	if st, ok := readStat(); ok {
		e.sample("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", typeCounter,
			float64(st.utime+st.stime)/clockTicks)
		e.sample("process_virtual_memory_bytes", "Virtual memory size in bytes.", typeGauge, float64(st.vsize))
		e.sample("process_resident_memory_bytes", "Resident memory size in bytes.", typeGauge,
			float64(st.rss*int64(os.Getpagesize())))
		if boot, ok := bootTime(); ok {
			e.sample("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", typeGauge,
				float64(boot)+float64(st.starttime)/clockTicks)
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		e.sample("process_open_fds", "Number of open file descriptors.", typeGauge, float64(len(fds)))
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		e.sample("process_max_fds", "Maximum number of open file descriptors.", typeGauge, float64(lim.Cur))
	}
}

// clockTicks is USER_HZ, the unit of /proc's times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

type procStat struct {
	utime, stime, starttime uint64
	vsize                   uint64
	rss                     int64
}

// readStat reads this process's times and sizes from /proc/self/stat.
func readStat() (procStat, bool) {
	s, err := procstat.Read(0)
	if err != nil || s.Field(24) == "" {
		return procStat{}, false
	}
	num := func(n int) uint64 { v, _ := s.Int(n); return uint64(v) }
	rss, _ := s.Int(24)
	return procStat{utime: num(14), stime: num(15), starttime: num(22), vsize: num(23), rss: rss}, true
}

// bootTime is when the machine booted, in seconds since the epoch (the
// btime line of /proc/stat).
func bootTime() (uint64, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
