package runtime

import (
	"fmt"

	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/view"
)

// View is how the run shows itself to people. Its zero value is the plain
// output sous always wrote: lines, no colours, no summary.
type View struct {
	// Quiet leaves out the processes' echo and the approval and hook
	// lines: what remains is the recipe's print, failures and, where it
	// shows, the summary.
	Quiet bool
	// Verbose adds a line as each process starts and ends and as each
	// agent turn ends.
	Verbose bool
	// ColorStdout and ColorStderr colour the "[id] " prefixes of the lines
	// on each stream.
	ColorStdout, ColorStderr bool
	// Terminal, when set, keeps a live status area on the terminal that
	// stderr is (view.Terminal). Quiet turns it off.
	Terminal *view.TerminalOptions
	// Summary writes the final summary on stderr when the run ends
	// (coloured when ColorStderr).
	Summary bool
	// GitHub, when set, writes GitHub Actions annotations and appends the
	// step summary; in --json mode too.
	GitHub *GitHub
}

// GitHub configures the GitHub Actions output.
type GitHub struct {
	SummaryPath string // $GITHUB_STEP_SUMMARY
	Workspace   string // $GITHUB_WORKSPACE
}

// subscribeSinks subscribes the outputs opt asks for to bus, in the order
// they must see each event: the status area first (it hides before a
// prompt is written), then the lines or the JSON stream, then the summary
// (after the area is gone) and the GitHub output.
func subscribeSinks(bus *event.Bus, opt Options) {
	var screen view.Screen = view.Plain{Stdout: opt.Stdout, Stderr: opt.Stderr}
	v := opt.View
	if opt.JSON {
		bus.Subscribe(&jsonSink{stdout: opt.Stdout, stderr: opt.Stderr, state: bus.State()})
	} else {
		if v.Terminal != nil && !v.Quiet {
			t := view.NewTerminal(bus, *v.Terminal)
			bus.Subscribe(t)
			screen = t
		}
		bus.Subscribe(&humanSink{screen: screen, state: bus.State(), quiet: v.Quiet, verbose: v.Verbose,
			color: [2]bool{v.ColorStdout, v.ColorStderr}})
		if v.Summary {
			s := &view.Summary{Screen: screen, State: bus.State(), Color: v.ColorStderr}
			if v.Terminal != nil && v.Terminal.Size != nil {
				size := v.Terminal.Size
				s.Width = func() int { cols, _ := size(); return cols }
			}
			bus.Subscribe(s)
		}
	}
	if v.GitHub != nil {
		bus.Subscribe(&view.GitHub{Screen: screen, State: bus.State(), SummaryPath: v.GitHub.SummaryPath,
			Workspace: v.GitHub.Workspace, Errorf: func(format string, args ...any) {
				opt.Stderr.Write([]byte(fmt.Sprintf(format, args...) + "\n"))
			}})
	}
}
