package runlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The states of a run as its journal tells them.
const (
	StateRunning   = "running"   // its runner holds the journal's lock
	StateFinished  = "finished"  // the journal has its end
	StateResumable = "resumable" // its runner died; sous resume continues it
	StateStuck     = "stopped"   // its runner died, but it made a live call (sdk.send, Session.start...): not resumable yet
)

// Summary is what `sous runs` says of one journal.
type Summary = wire.RunSummary

// List summarises the journals in dir, oldest first. A file that is not a
// journal is skipped; one being written is read as far as it is whole.
func List(dir string) ([]Summary, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.journal"))
	if err != nil {
		return nil, err
	}
	var out []Summary
	for _, p := range paths {
		s, err := summarise(p)
		if err != nil {
			continue
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, nil
}

func summarise(path string) (Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return Summary{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return Summary{}, err
	}
	recs, _, err := Decode(data)
	if err != nil {
		return Summary{}, err
	}
	head := recs[0]
	s := Summary{Run: strings.TrimSuffix(filepath.Base(path), ".journal"), Recipe: head.Recipe,
		Started: head.At, State: StateResumable}
	for _, r := range recs[1:] {
		switch r.Kind {
		case KindCall:
			s.Steps++
			if r.Call == CallLive && s.Why == "" {
				s.Why = fmt.Sprintf("line %d called %s", r.Line, r.Fn)
			}
		case KindEnd:
			s.State, s.Status, s.ExitCode = StateFinished, r.Status, r.Code
		}
	}
	if s.State == StateFinished {
		s.Why = ""
		return s, nil
	}
	// A shared lock is refused while the runner holds its exclusive one.
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		s.State, s.Why = StateRunning, ""
	case err != nil:
		return s, err
	case s.Why != "":
		s.State = StateStuck
	}
	return s, nil
}
