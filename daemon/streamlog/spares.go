package streamlog

import (
	"os"
	"sync"
	"time"
)

// Spares keeps the files of spill segments that logs dropped, for the next
// segment of any log to write over (Options.Spares), instead of closing
// them.
//
// Closing a dropped segment's file (unlinked since it was made) frees its
// blocks, and on a filesystem mounted with discard, as this project's
// machines' root is, each free is a discard that the disk works through at the
// next journal commit, beside the spill that made the room. A daemon at its
// replay disk total frees as much as it spills: streaming 1 GiB through a
// socket daemon read 1.12-1.17x the time without a spill while nothing was
// reclaimed, and 1.46-1.57x while every new segment had old ones dropped
// for it (docs/PERFORMANCE.md, "Spill files written over"). A file written
// over keeps its blocks: no discard, and no allocation for the new data.
//
// A kept file holds disk beyond what the logs account for (OnDisk): at
// most max files, each for at most idle, then it is closed. Its old
// records stay on disk until written over; only the daemon reads them,
// and a segment reads no further than it wrote. Safe for concurrent use;
// the nil Spares keeps nothing.
type Spares struct {
	max  int
	idle time.Duration

	mu     sync.Mutex
	files  []spare // oldest first
	timer  *time.Timer
	closed bool
}

type spare struct {
	w, r *os.File // the segment's writer's and readers' descriptors
	at   time.Time
}

// NewSpares returns Spares that keep up to max files, each for up to idle.
func NewSpares(max int, idle time.Duration) *Spares {
	return &Spares{max: max, idle: idle}
}

// put keeps a dropped segment's descriptors, or closes them when the
// Spares are full or closed.
func (sp *Spares) put(w, r *os.File) {
	if sp == nil {
		closeBoth(w, r)
		return
	}
	sp.mu.Lock()
	if sp.closed || len(sp.files) >= sp.max {
		sp.mu.Unlock()
		closeBoth(w, r)
		return
	}
	sp.files = append(sp.files, spare{w: w, r: r, at: time.Now()})
	if sp.timer == nil {
		sp.timer = time.AfterFunc(sp.idle, sp.expire)
	}
	sp.mu.Unlock()
}

// take returns the file kept last, if any: the oldest stay at the front,
// where expire closes them.
func (sp *Spares) take() (w, r *os.File, ok bool) {
	if sp == nil {
		return nil, nil, false
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n := len(sp.files)
	if n == 0 {
		return nil, nil, false
	}
	s := sp.files[n-1]
	sp.files[n-1] = spare{}
	sp.files = sp.files[:n-1]
	return s.w, s.r, true
}

// held is the number of files kept now.
func (sp *Spares) held() int {
	if sp == nil {
		return 0
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.files)
}

// expire closes the files kept for idle or longer, and waits for the next
// one to be due.
func (sp *Spares) expire() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.timer = nil
	now := time.Now()
	n := 0
	for n < len(sp.files) && now.Sub(sp.files[n].at) >= sp.idle {
		closeBoth(sp.files[n].w, sp.files[n].r)
		n++
	}
	clear(sp.files[:n])
	sp.files = sp.files[n:]
	if len(sp.files) > 0 && !sp.closed {
		sp.timer = time.AfterFunc(sp.files[0].at.Add(sp.idle).Sub(now), sp.expire)
	}
}

// Close closes every file kept; files put afterwards are closed at once.
func (sp *Spares) Close() {
	if sp == nil {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.closed = true
	if sp.timer != nil {
		sp.timer.Stop()
		sp.timer = nil
	}
	for _, s := range sp.files {
		closeBoth(s.w, s.r)
	}
	sp.files = nil
}

func closeBoth(w, r *os.File) {
	w.Close()
	r.Close()
}
