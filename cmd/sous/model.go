package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// newCmdModel is the model group: a scripted model to run agent recipes
// against offline.
func newCmdModel(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Serve a scripted model, to run agent recipes offline",
		Long: `A scripted model answers Claude Code the way Anthropic's Messages API does,
with replies read from a JSON file: no network, no API key, no cost, the same
answers every time. Point a CLI at it with ANTHROPIC_BASE_URL, or run a recipe
with sous run --fake-model SCRIPT.json, which serves one for the run.

The script format is in docs/RECIPES.md, "Running agent recipes offline", and
in 'sous model serve --help'.`,
		Example: `  sous model serve --script recipes/agent-triage.fake.json
  sous run --fake-model recipes/agent-triage.fake.json recipes/agent-triage.star -a repo=.`,
	}
	cmd.AddCommand(newCmdModelServe(f, nil))
	return cmd
}

// ModelServeOptions are the flags of `sous model serve`.
type ModelServeOptions struct {
	IO     *IO
	Script string // the JSON script of replies
	Addr   string // host:port to listen on
	Log    string // a file for every request as JSON lines; "-": stdout
}

func newCmdModelServe(f *Factory, runF func(*ModelServeOptions) error) *cobra.Command {
	opts := &ModelServeOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "serve --script SCRIPT.json [--addr HOST:PORT] [--log FILE]",
		Short: "Serve Anthropic's Messages API from a script of replies",
		Long: `Serve answers POST /v1/messages (streamed, as Claude Code asks) with the replies
of SCRIPT.json, in order, until Ctrl-C or SIGTERM. It prints the two variables
that point a Claude Code CLI at it on stdout:

  ANTHROPIC_BASE_URL=http://127.0.0.1:PORT
  ANTHROPIC_API_KEY=sous-fake-model

(any key does: nothing checks it). Each scripted request is a line on stderr,
and when it stops, how many replies were used.

SCRIPT.json is a list of replies. Each has exactly one of:

  {"text": "done"}                                     ends the turn with text
  {"tool_use": {"name": "Bash", "input": {"command": "go test ./..."}}}
  {"structured_output": {"plan": "..."}}               the turn's output_schema value
  {"blocks": [{"text": "..."}, {"tool_use": {...}}]}   several blocks in one reply
  {"error": {"status": 529, "type": "overloaded_error", "message": "busy"}}

and may have "usage": {"input_tokens": N, "output_tokens": M} (default 10
and 5: the CLI prices them, so max_budget_usd can be exercised),
"stop_reason", "when": {"prompt_contains": "TEXT"} and "comment".

A turn is a loop of requests: after a tool_use reply the CLI runs the tool and
asks again with its result, which takes the next reply. Every conversation
shares the one list: each request takes the first reply not used yet whose
"when" matches the turn's prompt (a reply without "when" matches any), so
sessions running at once can each have their own. A request with no reply
left gets a text saying so. The CLI retries 429 and 5xx errors, each retry
taking the next reply. Requests that are not the conversation (no tools, or
not streamed: the CLI's titles and probes) get "ok" and take no reply.

--log FILE writes every request as one JSON line: n, method, path, side (not
scripted), reply (which reply answered, from 1), prompt and the body the
model was sent. --log - writes them to stdout.`,
		Example: `  sous model serve --script recipes/agent-triage.fake.json
  sous model serve --script s.json --addr 127.0.0.1:8011 --log requests.jsonl

  # in another terminal, with the two variables it printed:
  ANTHROPIC_BASE_URL=http://127.0.0.1:8011 ANTHROPIC_API_KEY=x claude -p "hi"
  ANTHROPIC_BASE_URL=http://127.0.0.1:8011 ANTHROPIC_API_KEY=x sous run recipes/agent-fix.star -a repo=. -a task="fix it"`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return modelServe(ctx, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Script, "script", "", "the JSON `FILE` of replies to serve (required)")
	fl.StringVar(&opts.Addr, "addr", "127.0.0.1:0", "the `HOST:PORT` to listen on (port 0: any free one)")
	fl.StringVar(&opts.Log, "log", "", "write every request to `FILE` as JSON lines (\"-\": stdout)")
	return cmd
}

func (o *ModelServeOptions) validate() error {
	if o.Script == "" {
		return usageErrorf("model serve: --script is required: the JSON file of replies to serve")
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return usageErrorf("--addr %q: want HOST:PORT, e.g. 127.0.0.1:0", o.Addr)
	}
	return nil
}

// modelServe serves the script until ctx ends (a signal), then reports how
// much of it was used.
func modelServe(ctx context.Context, opts *ModelServeOptions) error {
	script, err := fakemodel.ReadScript(opts.Script)
	if err != nil {
		return usageErrorf("--script: %v", err)
	}
	var logw io.Writer
	switch opts.Log {
	case "":
	case "-":
		logw = opts.IO.Out
	default:
		f, err := os.OpenFile(opts.Log, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return usageErrorf("--log: %v", err)
		}
		defer f.Close()
		logw = f
	}
	rep := newScriptReport(script, logw, opts.IO.ErrOut, "sous model serve: ")
	srv, err := fakemodel.Start(fakemodel.Options{Script: script, Addr: opts.Addr, OnRequest: rep.request})
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("model serve: --addr: %v", op) // listen tcp ...: address already in use
	}
	if err != nil {
		return fmt.Errorf("model serve: %v", err)
	}
	fmt.Fprintf(opts.IO.Out, "ANTHROPIC_BASE_URL=%s\nANTHROPIC_API_KEY=%s\n", srv.URL(), fakeAPIKey)
	fmt.Fprintf(opts.IO.ErrOut, "sous model serve: %d %s from %s at %s; give Claude Code the two variables above (any API key does). Ctrl-C stops.\n",
		len(script), plural(len(script), "reply", "replies"), opts.Script, srv.URL())
	<-ctx.Done()
	srv.Close()
	rep.summary(srv)
	return nil
}
