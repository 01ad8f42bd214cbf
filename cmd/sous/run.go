package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/seed5ad92d46/sous/builtins"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/notify"
	"github.com/seed5ad92d46/sous/runtime/rules"
)

// RunOptions are the flags and the argument of `sous run`.
type RunOptions struct {
	IO      *IO
	Environ []string // the recipe's environment: what getenv reads
	// Getenv reads the environment sous runs in (the Factory's): NO_COLOR,
	// TERM, GITHUB_ACTIONS and the like.
	Getenv func(string) string
	Target *Target
	Recipe string
	Args   []string // key=value
	JSON   bool
	// Allow and Deny are approval rules for agents' permission requests and
	// privileged commands, asked after the recipe's own policies.
	Allow, Deny []string
	// Shard is --shard I/N: the run's part of a CI matrix ("" for all).
	Shard string
	// FakeModel is a script of model replies (--fake-model): the run's
	// agents talk to it, served in sous, instead of Anthropic's API.
	FakeModel string
	// Color is --color: auto, always or never.
	Color colorFlag
	// Quiet and Verbose: less or more human output (runview.go).
	Quiet, Verbose bool
	// Ask (--ask): a permission request no rule decided waits for a person
	// even without a terminal (sous approvals answers it); AskTimeout
	// (--ask-timeout) bounds that wait.
	Ask        bool
	AskTimeout time.Duration
	// UI is --ui ADDR: the run's web page (run_ui.go).
	UI string
	// MaxCost is --max-cost: the cap on what the run's agent sessions may
	// cost, in dollars (0: none).
	MaxCost costFlag
	// Notify are the --notify URLs; NotifyTimeout bounds each POST and the
	// wait for the last ones when the run ends.
	Notify        []string
	NotifyTimeout time.Duration
	// Journal is --journal DIR: the run is durable, its journal kept in
	// DIR (durable.go). Resume is the id of the run `sous resume`
	// continues from it ("": a new run).
	Journal string
	Resume  string
	// JournalSync is --journal-sync: when the journal reaches the disk.
	JournalSync journalSync
	// NoJournal is --no-journal: a run against a daemon that keeps
	// journals is not journaled.
	NoJournal bool
	// exits is the Factory's Exits: sous exits once the run returns.
	exits bool
}

func newCmdRun(f *Factory, runF func(*RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IO, Environ: f.Environ, Getenv: f.Getenv, Target: f.newTarget(), Color: "auto", JournalSync: journalSyncBatch,
		exits: f.Exits}
	cmd := &cobra.Command{
		Use:   "run RECIPE.star [-a key=value]... [flags]",
		Short: "Run a recipe",
		Long: `Run executes a Starlark recipe top to bottom. Its builtins act on the default
host: the daemon at --socket (or $SOUS_SOCKET) or --remote ssh://... or
ws://... (or $SOUS_REMOTE), else a daemon embedded in sous,
started only when the recipe first needs it and stopped, with every process it
still runs, when the recipe ends. The calls the recipe registered with defer()
run before that, however it ended; a second Ctrl-C abandons them.

The recipe and every file it loads are checked before anything runs. Exit codes:
0 the recipe finished, 1 it failed (or only a deferred call failed), 2 usage
error (bad flags, missing file, syntax or undefined name), 130 interrupted
(Ctrl-C).

With --json, stdout carries one JSON event per line (start first, end last) and
nothing else; errors still go to stderr.

On a terminal, a status area under the scrolling lines shows each running
process (id, elapsed time, last line), each agent session in a turn (the tool
it uses, its cost so far) and the permission requests waiting; it is gone when
the run ends, and a summary follows (status, duration, exit code, cost and
denials of each process and session, and the failure with its recipe line).
--color=auto|always|never colours the [id] prefixes (NO_COLOR turns auto off);
TERM=dumb gives the plain lines. Off a terminal the output is the plain lines,
with no escape code. --quiet shows only the recipe's print, failures and the
summary; --verbose adds a line as each process starts and ends and prints the
summary off a terminal too. With GITHUB_ACTIONS=true a failure is also an
::error line at the recipe's line, a denial a ::warning line, and the summary
is appended to $GITHUB_STEP_SUMMARY (docs/CI.md).

Permission requests of agent sessions (and privileged commands) go to the
session's policy, then the recipe's approvals(policy), then the --allow and
--deny rules (Claude Code syntax, e.g. "Bash(go test:*)", "Write(/src/**)";
deny wins), then a person, when one can answer: stdin is a terminal (a
prompt), --ask or --ui is given; otherwise they are denied at once, so a CI
job never hangs. A request waiting for a person has an id and is published to the
default daemon (a --socket or --remote daemon with the approval.queue feature),
where sous approvals lists and answers it from another shell; the first answer
wins, the terminal's or a remote one. --ask-timeout D denies what no one
answered within D. Every decision is logged on stderr (an approval event with
--json; a pending event, with the id, when a request starts waiting).

--ui ADDR serves the run's web page (docs/UI.md) and prints
"sous: ui at http://HOST:PORT/#token=TOKEN" on stderr: the processes with the
tail of their output, the agent sessions with their messages (text, tool uses
and results, cost), and the requests waiting for a person, with Allow and Deny
buttons (decided by "remote"). Its HTTP API (GET /api/state, GET /api/events,
POST /api/approvals/ID) takes "Authorization: Bearer TOKEN", a token made at
random for the run, and refuses other origins. :PORT and 127.0.0.1:0 (a free
port) bind loopback only. The page shows how the run ended until sous exits.

--shard I/N runs one part of a CI matrix of N jobs: parallel() starts only
the items whose index % N == I, and the recipe's shard global is
struct(index=I, count=N).

--max-cost USD caps what the run's agent sessions may cost, all sessions
together (the turns' cost_usd as the CLI reports it). Once the cap is reached
the running turns are interrupted, new turns are refused and the run fails
(exit code 1) saying what was spent; each session's CLI also gets
--max-budget-usd no higher than what remains. budget() tells the recipe what
was spent and the cap; the summary and the end event of --json show both.

--notify URL (repeatable) POSTs a JSON object to URL when a permission
request waits for a person (event "approval", with its id, session, tool and
summary) and when the run ends: event "end" when it finished, "failed" when it
did not (failed, interrupted or refused; end.status says which). One of the two
ends every run, never both. Every payload has event, time, run (id, host, pid,
started, args), recipe, and text, a line for a person. The POSTs run in the
background and never hold the run up: each gives up after --notify-timeout
(default 5s); at the end sous waits at most that long for the last ones, then
says on stderr what was not delivered. A notification that fails never fails
the run. Redirects are followed only with 307 or 308 to the same host.

Every run has an id, printed on stderr at start (sous: run RUN_ID; the --json
start event carries it too). A run against a standalone daemon (--socket,
--remote) whose features include run.journal is durable: every builtin call with
an effect or an answer from outside is journaled by that daemon, and if the
runner dies (killed, crashed, its machine or ssh session lost) sous resume
RUN_ID, with the same target, from any client of the daemon, continues the run
without doing again what was done (see sous resume --help; sous runs lists the
daemon's runs). On the embedded daemon, --journal DIR keeps the journal in DIR
(sous resume --journal DIR RUN_ID); --no-journal journals nothing. By default
the journal reaches the disk within 100 ms (what reached the journal survives
the runner's and the daemon's death at once; a machine crash may lose the last
100 ms); --journal-sync=always syncs it before every call with an effect.

--fake-model SCRIPT.json serves a scripted model in sous for the run and points
every agent session at it (ANTHROPIC_BASE_URL, a dummy ANTHROPIC_API_KEY): the
recipe runs offline, without an API key, the same way every time. Only with the
embedded daemon or a --socket daemon on this machine. The script's format: sous
model serve --help.`,
		Example: `  sous run recipes/hello.star
  sous run recipes/build-and-test.star -a module=./mymod
  sous run recipes/build-and-test.star -a module=. --quiet       # the prints, failures and summary only
  sous run recipes/build-and-test.star -a module=. --verbose 2>&1 | tee build.log
  NO_COLOR=1 sous run recipes/build-and-test.star -a module=.    # the status area, no colours
  sous run deploy.star --json -a env=staging --socket /run/sous.sock
  sous run recipes/agent-fix.star -a repo=. -a task="make the tests pass" --allow "Bash(go vet:*)" --deny "Bash(git push:*)"
  sous run --fake-model recipes/agent-triage.fake.json recipes/agent-triage.star -a repo=.
  sous run --socket /run/sous.sock --ask --ask-timeout 10m agent-fix.star   # answer with sous approvals
  sous run --ui 127.0.0.1:0 recipes/agent-fix.star -a repo=. -a task="fix the build"   # watch and answer in a browser`,
		Args: exactArgs(1, "run RECIPE.star [-a key=value]... [flags]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Recipe = args[0]
			if opts.Quiet && opts.Verbose {
				return usageErrorf("run: --quiet and --verbose: choose one")
			}
			if opts.AskTimeout < 0 {
				return usageErrorf("run: --ask-timeout: want a duration >= 0, got %s", opts.AskTimeout)
			}
			if opts.NoJournal && opts.Journal != "" {
				return usageErrorf("run: --journal and --no-journal: choose one")
			}
			if runF != nil {
				return runF(opts)
			}
			return runRecipe(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&opts.Args, "arg", "a", nil, "a recipe argument `key=value`, in the recipe's args dict (repeatable)")
	fl.StringVar(&opts.Journal, "journal", "", "journal the run in `DIR` so that sous resume continues it if its runner dies (the embedded daemon's way; a standalone daemon with run.journal keeps the journal itself; see sous resume --help)")
	fl.Var(&opts.JournalSync, "journal-sync", journalSyncUsage)
	fl.BoolVar(&opts.NoJournal, "no-journal", false, "do not journal the run, though its daemon would keep the journal (the run cannot be resumed)")
	registerRunFlags(fl, opts)
	opts.Target.register(cmd)
	return cmd
}

// registerRunFlags registers the flags `sous run` and `sous resume` share:
// how the run looks and is steered, not what it runs.
func registerRunFlags(fl *pflag.FlagSet, opts *RunOptions) {
	fl.BoolVar(&opts.JSON, "json", false, "write JSON events to stdout, one per line, instead of human output")
	fl.StringArrayVar(&opts.Allow, "allow", nil, "an approval `RULE` to allow, e.g. \"Bash(go test:*)\" (repeatable)")
	fl.StringArrayVar(&opts.Deny, "deny", nil, "an approval `RULE` to deny (repeatable)")
	fl.StringVar(&opts.Shard, "shard", "", "run only `I/N` of parallel()'s items, those whose index % N == I (0 <= I < N), for a CI matrix of N jobs")
	fl.StringVar(&opts.FakeModel, "fake-model", "", "agents talk to a model scripted by `SCRIPT.json`, served in sous for the run: offline, no API key (see sous model serve --help)")
	fl.Var(&opts.Color, "color", "colour the [id] prefixes, the status area and the summary: auto, always or never (NO_COLOR turns auto off)")
	fl.BoolVarP(&opts.Quiet, "quiet", "q", false, "show only the recipe's print, failures and the summary: no echo of processes, no status area")
	fl.Var(&opts.MaxCost, "max-cost", "cap what the run's agent sessions may cost, in dollars: once spent, running turns are interrupted, new ones refused and the run fails (see budget())")
	fl.StringArrayVar(&opts.Notify, "notify", nil, "POST a JSON notification to `URL` when a request waits for a person and when the run ends (repeatable; see --help)")
	durationVar(fl, &opts.NotifyTimeout, "notify-timeout", notify.DefaultTimeout, "give up on a --notify POST after `D`; the run waits at most this long for the last ones when it ends")
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "also say when each process starts and ends and each agent turn ends, and print the summary off a terminal too")
	fl.BoolVar(&opts.Ask, "ask", false, "a permission request no rule decided waits for a person even without a terminal: answer it with sous approvals")
	durationVar(fl, &opts.AskTimeout, "ask-timeout", 0, "deny a request no person answered within `D` (default: wait without bound)")
	fl.StringVar(&opts.UI, "ui", "", uiFlagUsage+"; requests no rule decided wait for an answer there")
}

// runRecipe is run's run function.
func runRecipe(opts *RunOptions) error {
	ctx, streams := context.Background(), opts.IO
	ropt := runtime.Options{Recipe: opts.Recipe, Stdout: streams.Out, Stderr: streams.ErrOut, JSON: opts.JSON}
	refuse := func(err error) error {
		if !opts.JSON {
			return err
		}
		return refuseJSON(ropt, err)
	}
	opts.Target.Notices = streams.ErrOut
	target, err := opts.Target.Client()
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return refuse(err)
		}
		return refuse(usageErrorf("--token-file: %v", err))
	}
	store, hostConn, closeStore, err := runJournalStore(opts, target)
	if err != nil {
		return refuse(err)
	}
	ropt.HostConn = hostConn
	// A journaled run says its id (sous runs and sous resume know it by
	// that); so does any run on a standalone daemon, where `sous
	// approvals` shows its requests under it. A plain run on the embedded
	// daemon keeps its stderr for the recipe (--json's start event
	// carries the id either way).
	ropt.AnnounceRun = !client.IsEmbedded(target.URL)
	defer closeStore() // after the run, which closed the journal
	if opts.Resume != "" {
		res, err := runtime.OpenResume(store, opts.Resume)
		if err != nil {
			return refuse(usageErrorf("resume: %v", err))
		}
		defer res.Close() // a no-op once the run took it over and closed it
		ropt.Recipe, ropt.Args, ropt.Dir, ropt.RunID = res.Recipe, res.Args, res.Dir, res.Run
		ropt.Journal = &runtime.JournalOptions{Store: store, Resumed: res}
	} else {
		args, err := parseRecipeArgs(opts.Args)
		if err != nil {
			return refuse(err)
		}
		ropt.Args = args
		if store != nil {
			ropt.Journal = &runtime.JournalOptions{Store: store}
		}
	}
	ropt.MaxCost = float64(opts.MaxCost)
	if ropt.Notify, err = notifyOptions(opts); err != nil {
		return refuse(err)
	}
	if ropt.Shard, err = parseShard(opts.Shard); err != nil {
		return refuse(err)
	}
	var approvals rules.Set
	if approvals.Allow, err = rules.ParseList("--allow", opts.Allow); err != nil {
		return refuse(usageErrorf("%v", err))
	}
	if approvals.Deny, err = rules.ParseList("--deny", opts.Deny); err != nil {
		return refuse(usageErrorf("%v", err))
	}
	var prompt io.Reader
	if streams.IsStdinTTY() {
		prompt = streams.In
	}
	ctx, cleanup, armed, stop, interrupt := interruptible(ctx, !opts.exits)
	defer stop()
	ropt.Cleanup = cleanup
	readerGone := func() { interrupt(&runtime.Interrupt{Signal: syscall.SIGPIPE, Code: 128 + int(syscall.SIGPIPE)}) }
	ropt.Stdout, ropt.Stderr = watchReader(streams.Out, readerGone), watchReader(streams.ErrOut, readerGone)
	ropt.Host, ropt.Env, ropt.Table, ropt.Approvals, ropt.Prompt = target, opts.Environ, builtins.DefaultTable(), approvals, prompt
	ropt.Ask, ropt.AskTimeout = opts.Ask, opts.AskTimeout
	if opts.UI != "" {
		ui, err := startRunUI(opts.UI, opts.Recipe, &ropt, ropt.Stderr)
		if err != nil {
			return refuse(err)
		}
		defer ui.stop() // after the run: the page has its end, then sous exits
	}
	if opts.FakeModel != "" {
		model, err := startRunModel(opts.FakeModel, target.URL)
		if err != nil {
			return refuse(err)
		}
		defer model.stop(streams.ErrOut)
		model.apply(&ropt)
	}
	var stopView func()
	ropt.View, stopView = runView(opts, ropt.Stdout, ropt.Stderr, opts.Getenv, opts.Environ)
	defer stopView()
	armed() // a Ctrl-C from the recipe's first line on ends the run as one
	err = runtime.Run(ctx, ropt)
	var ee *runtime.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.Code} // reported by the runtime already
	}
	return err
}

// scanRunArgs reads a `sous run` command line (args[0] is "run") by the run
// command's own flags, for when cobra stopped at a bad flag before it
// could: whether --json is on (--json, --json=1, =t, =true...) and the
// recipe, the first argument that is not a flag or a flag's value.
func scanRunArgs(flags *pflag.FlagSet, args []string) (json bool, recipe string) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if recipe == "" && i+1 < len(args) {
				recipe = args[i+1]
			}
			break
		}
		if len(a) < 2 || a[0] != '-' {
			if recipe == "" {
				recipe = a
			}
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f *pflag.Flag
		if strings.HasPrefix(a, "--") {
			f = flags.Lookup(name)
		} else if len(name) == 1 {
			f = flags.ShorthandLookup(name)
		}
		switch {
		case f == nil: // unknown: whether a value follows cannot be known
		case f.Name == "json":
			json = true
			if hasValue {
				json, _ = strconv.ParseBool(value)
			}
		case f.Value.Type() != "bool" && !hasValue:
			i++ // its value
		}
	}
	return json, recipe
}

// refuseRunJSON reports a `sous run --json` flag error that cobra found.
func refuseRunJSON(streams *IO, recipe string, err error) error {
	return refuseJSON(runtime.Options{Recipe: recipe, Stdout: streams.Out, Stderr: streams.ErrOut, JSON: true}, err)
}

// refuseJSON reports a usage error found before the recipe could run in
// the event stream, which still starts and ends (RECIPES.md: start is
// always the first line and end the last), and exits 2.
func refuseJSON(ropt runtime.Options, err error) error {
	runtime.Refuse(ropt, err)
	return &exitError{code: runtime.CodeUsage} // reported already
}

// parseRecipeArgs turns -a key=value flags into the args dict. A key given
// twice keeps its last value, as with environment variables.
func parseRecipeArgs(flags []string) (map[string]string, error) {
	args := make(map[string]string, len(flags))
	for _, kv := range flags {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("-a %q: want key=value", kv)
		}
		args[k] = v
	}
	return args, nil
}

// interruptible returns a context that a SIGINT or SIGTERM cancels, with
// the signal as its cause, so the run stops its thread and processes and
// exits 128+signal; and the context of the recipe's deferred calls, which
// a second signal cancels: a second Ctrl-C abandons the cleanup. After the
// second signal the default handling is back: a third kills sous at once.
// interrupt cancels the first context the same way for a cause that is not
// a signal sous received (its output's reader went away).
//
// The signals are asked for on a goroutine of their own, and armed waits
// until they are: the caller calls it before the recipe's first line, and
// builds the table and reads the flags meanwhile. signal.Notify makes a
// round trip per signal to the runtime's signal goroutine, which runs on a
// thread of its own, and starts that thread and the one that waits for
// signals: about a tenth of the start of `sous run` when done in line
// (docs/PERFORMANCE.md, "The start of `sous run`").
//
// stop gives the signals back (signal.Stop) when release is set. A
// process that exits once the run returns leaves them asked for: Stop
// makes the same round trip per signal again, and a signal that comes
// after the run's end then leaves sous to exit with the run's code rather
// than die of the signal, which is what the run's end already reported.
func interruptible(parent context.Context, release bool) (ctx, cleanup context.Context, armed, stop func(), interrupt func(*runtime.Interrupt)) {
	ctx, cancel := context.WithCancelCause(parent)
	cleanup, abandon := context.WithCancel(context.WithoutCancel(parent))
	sigs := make(chan os.Signal, 2)
	notified := make(chan struct{})
	var stopHangups func()
	go func() {
		// SIGHUP too: a closed terminal or ssh session must stop the
		// run's processes as Ctrl-C does, not leave them running; but
		// not under nohup (notifyStops).
		_, stopHangups = notifyStops(sigs)
		close(notified)
	}()
	armed = func() { <-notified }
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			code := runtime.CodeInterrupted
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			cancel(&runtime.Interrupt{Signal: sig, Code: code})
		case <-done:
			return
		}
		select {
		case <-sigs:
			signal.Stop(sigs)
			abandon()
		case <-done:
		}
	}()
	return ctx, cleanup, armed, func() {
			if release {
				armed() // else Stop could come first and leave the signals asked for
				signal.Stop(sigs)
				stopHangups()
			}
			close(done)
			cancel(nil)
			abandon()
		}, func(in *runtime.Interrupt) {
			cancel(in)
		}
}
