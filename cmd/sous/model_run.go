package main

import (
	"fmt"
	"io"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/envlist"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// runModel is the scripted model of a `sous run --fake-model` run, served
// in sous for the run's length.
type runModel struct {
	script string
	srv    *fakemodel.Server
}

// startRunModel reads the script and serves it, for a run whose default
// host is target: only a daemon on this machine starts CLIs that can reach
// the model's loopback address.
func startRunModel(script, target string) (*runModel, error) {
	if kind, _, _ := client.Kind(target); kind != "embedded" && kind != "unix" {
		return nil, usageErrorf("--fake-model: the scripted model listens on this machine's loopback, which the CLIs %s starts could not reach; "+
			"run on the embedded daemon or a --socket daemon on this machine", target)
	}
	replies, err := fakemodel.ReadScript(script)
	if err != nil {
		return nil, usageErrorf("--fake-model: %v", err)
	}
	srv, err := fakemodel.Start(fakemodel.Options{Script: replies})
	if err != nil {
		return nil, fmt.Errorf("--fake-model: %v", err)
	}
	return &runModel{script: script, srv: srv}, nil
}

// vars is what every Claude Code CLI of the run gets: the model's URL, a
// key (the CLI wants one; nothing checks it), and nothing that would send
// it elsewhere (a gateway token, Bedrock or Vertex) or to the network for
// other reasons (updates, telemetry). Empty values unset.
func (m *runModel) vars() map[string]string {
	return map[string]string{
		"ANTHROPIC_BASE_URL":                       m.srv.URL(),
		"ANTHROPIC_API_KEY":                        fakeAPIKey,
		"ANTHROPIC_AUTH_TOKEN":                     "",
		"CLAUDE_CODE_USE_BEDROCK":                  "",
		"CLAUDE_CODE_USE_VERTEX":                   "",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
}

// apply points the run at the model: the runner's environment (what
// getenv reads and the embedded daemon's processes inherit) and every
// agent session's (which reaches a socket daemon's CLIs too). A nil
// environment is left for the runtime to default.
func (m *runModel) apply(ropt *runtime.Options) {
	vars := m.vars()
	if ropt.Env != nil {
		overrides := make(map[string]*string, len(vars))
		for k, v := range vars {
			if v != "" {
				overrides[k] = &v
			} else {
				overrides[k] = nil
			}
		}
		ropt.Env = envlist.Merge(ropt.Env, overrides)
	}
	ropt.AgentEnv = &runtime.AgentEnv{Vars: vars, Source: "--fake-model"}
}

// stop ends the model and says on w what of the script went unused or
// was missing.
func (m *runModel) stop(w io.Writer) {
	m.srv.Close()
	for _, l := range leftovers(m.srv, m.script) {
		fmt.Fprintln(w, "sous: --fake-model: "+l)
	}
}
