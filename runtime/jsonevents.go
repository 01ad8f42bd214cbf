package runtime

import (
	"io"

	"github.com/seed5ad92d46/sous/runtime/event"
)

// JSONEvents is a sink that writes each event as the --json stream does,
// one JSON object per line on w, and nothing else (errors and prompts,
// which the stream leaves to stderr, are dropped). Another output of the
// run that speaks JSON (the web page's event stream) uses it, so there is
// one schema of events, not two.
func JSONEvents(w io.Writer) event.Sink {
	return &jsonSink{stdout: w, stderr: io.Discard}
}
