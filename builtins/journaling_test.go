package builtins

import (
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/runtime"
)

// TestJournalingOfEveryBuiltin holds each builtin function to what a
// durable run's journal must do with it: a call with an effect or an
// answer from outside is journaled and replayed; a call whose answer is a
// live object stays JournalLive (a resume refuses it); only calls with
// neither are pure. A new files.* or git.* builtin must say which.
func TestJournalingOfEveryBuiltin(t *testing.T) {
	replayed := map[string]runtime.Journaling{
		"run": runtime.JournalEffect, "sh": runtime.JournalEffect, "pipeline": runtime.JournalEffect,
		"extract_tar": runtime.JournalEffect, "getenv": runtime.JournalAnswer, "dotenv": runtime.JournalAnswer,
		"sleep": runtime.JournalAnswer,
	}
	live := []string{"spawn", "reattach", "sdk.", "Process.", "Session.", "Pending."}
	for _, e := range DefaultTable().Entries() {
		if e.Fn == nil {
			continue
		}
		if want, ok := replayed[e.Name]; ok && e.Journal != want {
			t.Errorf("%s: journaling %d, want %d", e.Name, e.Journal, want)
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
