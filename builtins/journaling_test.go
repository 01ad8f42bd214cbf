package builtins

import (
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/runtime"
)

// TestJournalingOfEveryBuiltin holds each builtin function to what a
// durable run's journal must do with it: a call with an effect or an
// answer from outside is journaled and replayed; a host pool stays
// JournalLive (a resume refuses it); only calls
// with neither are pure. A new files.* or git.* builtin must say which.
func TestJournalingOfEveryBuiltin(t *testing.T) {
	replayed := map[string]runtime.Journaling{
		"run": runtime.JournalEffect, "sh": runtime.JournalEffect, "pipeline": runtime.JournalEffect,
		"extract_tar": runtime.JournalEffect, "getenv": runtime.JournalAnswer, "dotenv": runtime.JournalAnswer,
		"sleep": runtime.JournalAnswer,
	}
	// A host pool stays live: which host a task lands on depends on
	// timing.
	live := []string{"hosts"}
	// A session is taken over too (sdk_durable.go): sdk.session,
	// Session.send, Session.start, Pending.wait, the settings and
	// Session.close; sdk.send, a whole session in one call, is kept as its
	// Turn.
	for _, name := range []string{"sdk.session", "Session.send", "Session.start", "Pending.wait", "Session.interrupt",
		"Session.set_model", "Session.set_permission_mode", "Session.control", "Session.rewind_files", "Session.close", "sdk.send"} {
		replayed[name] = runtime.JournalEffect
	}
	// A process is taken over by a resume (process_durable.go): its
	// calls are replayed, those that act with Rejoin, so that a runner
	// that died in one does not stop the resume.
	for name, want := range map[string]runtime.Journaling{
		"spawn": runtime.JournalEffect, "reattach": runtime.JournalAnswer, "Process.write": runtime.JournalEffect,
		"Process.close_stdin": runtime.JournalEffect, "Process.kill": runtime.JournalEffect,
		"Process.wait": runtime.JournalAnswer, "Process.read_line": runtime.JournalAnswer,
		"Process.output": runtime.JournalAnswer, "Process.lines": runtime.JournalPure,
	} {
		replayed[name] = want
	}
	for _, e := range DefaultTable().Entries() {
		if e.Fn == nil {
			continue
		}
		if want, ok := replayed[e.Name]; ok && e.Journal != want {
			t.Errorf("%s: journaling %d, want %d", e.Name, e.Journal, want)
		}
		if (strings.HasPrefix(e.Name, "Process.") || strings.HasPrefix(e.Name, "Session.") || strings.HasPrefix(e.Name, "Pending.")) &&
			e.Journal == runtime.JournalEffect && !e.Rejoin {
			t.Errorf("%s acts on a process: a resume must be able to take it over (Rejoin)", e.Name)
		}
		if strings.HasPrefix(e.Name, "files.") || strings.HasPrefix(e.Name, "git.") {
			if e.Journal != runtime.JournalEffect && e.Journal != runtime.JournalAnswer {
				t.Errorf("%s: a files.* or git.* builtin must be JournalEffect or JournalAnswer", e.Name)
			}
		}
		for _, p := range live {
			if strings.HasPrefix(e.Name, p) && e.Journal != runtime.JournalLive {
				t.Errorf("%s returns or acts on a live object: it must stay JournalLive", e.Name)
			}
		}
	}
}
