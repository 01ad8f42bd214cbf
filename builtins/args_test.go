package builtins

import (
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
)

func kw(name string, v starlark.Value) starlark.Tuple {
	return starlark.Tuple{starlark.String(name), v}
}

func TestBindMessages(t *testing.T) {
	t.Parallel()
	var (
		s       string
		n       int64
		b       bool
		d       time.Duration
		od      *time.Duration
		argv    []string
		env     map[string]*string
		payload []byte
	)
	params := []binding{
		req("cmd", command(&argv, nil)),
		opt("args", strList(&argv)),
		opt("cwd", optStr(&s)),
		opt("env", envDict(&env)),
		opt("n", integer(&n, 0)),
		opt("flag", boolean(&b)),
		opt("secs", seconds(&d)),
		opt("timeout", optSeconds(&od)),
		opt("data", data(&payload)),
	}
	envWithInt := starlark.NewDict(1)
	envWithInt.SetKey(starlark.String("A"), starlark.MakeInt(1))
	envWithIntKey := starlark.NewDict(1)
	envWithIntKey.SetKey(starlark.MakeInt(7), starlark.String("x"))
	tests := []struct {
		name   string
		args   starlark.Tuple
		kwargs []starlark.Tuple
		want   string
	}{
		{"wrong type", starlark.Tuple{starlark.String("ls")}, []starlark.Tuple{kw("cwd", starlark.MakeInt(1))}, "spawn: cwd: want string, got int"},
		{"command type", starlark.Tuple{starlark.MakeInt(1)}, nil, "spawn: cmd: want string or list of strings, got int"},
		{"list element", starlark.Tuple{starlark.NewList([]starlark.Value{starlark.String("a"), starlark.MakeInt(2)})}, nil, "spawn: cmd[1]: want string, got int"},
		{"env value", starlark.Tuple{starlark.String("ls")}, []starlark.Tuple{kw("env", envWithInt)}, `spawn: env["A"]: want string or None, got int`},
		{"env key", starlark.Tuple{starlark.String("ls")}, []starlark.Tuple{kw("env", envWithIntKey)}, "spawn: env key 7: want string, got int"},
		{"negative int", starlark.Tuple{starlark.String("ls")}, []starlark.Tuple{kw("n", starlark.MakeInt(-1))}, "spawn: n: want at least 0, got -1"},
		{"bool", starlark.Tuple{starlark.String("ls")}, []starlark.Tuple{kw("flag", starlark.String("yes"))}, "spawn: flag: want bool, got string"},
		{"seconds type", starlark.Tuple{starlark.String("ls")}, []starlark.Tuple{kw("secs", starlark.String("1s"))}, "spawn: secs: want seconds (int or float), got string"},
		{"negative seconds", starlark.Tuple{starlark.String("ls")}, []starlark.Tuple{kw("timeout", starlark.Float(-0.5))}, "spawn: timeout: want a number of seconds between 0 and 3153600000, got -0.5"},
		{"data", starlark.Tuple{starlark.String("ls")}, []starlark.Tuple{kw("data", starlark.MakeInt(3))}, "spawn: data: want string or bytes, got int"},
		{"keyword-only", starlark.Tuple{starlark.String("ls"), starlark.NewList(nil), starlark.String("/")}, nil, "spawn: got 3 positional arguments, want at most 2"},
		{"unknown keyword", starlark.Tuple{starlark.String("ls")}, []starlark.Tuple{kw("cwdd", starlark.None)}, `spawn: unexpected keyword argument "cwdd" (did you mean cwd?)`},
		{"missing", nil, nil, "spawn: missing argument for cmd"},
		{"string is not a list", starlark.Tuple{starlark.String("ls"), starlark.String("-l")}, nil, "spawn: args: want list of strings, got string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &runtime.Call{Name: "spawn", Args: tt.args, Kwargs: tt.kwargs}
			err := bind(c, 2, params...)
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestBindValues(t *testing.T) {
	t.Parallel()
	var (
		argv    []string
		cwd     = "default"
		env     map[string]*string
		timeout *time.Duration
		secs    time.Duration
	)
	env0 := starlark.NewDict(2)
	env0.SetKey(starlark.String("A"), starlark.String("1"))
	env0.SetKey(starlark.String("B"), starlark.None)
	c := &runtime.Call{Name: "run", Args: starlark.Tuple{starlark.NewList([]starlark.Value{starlark.String("echo"), starlark.String("hi")})},
		Kwargs: []starlark.Tuple{kw("cwd", starlark.None), kw("env", env0), kw("timeout", starlark.Float(1.5)), kw("secs", starlark.MakeInt(2))}}
	err := bind(c, 2, req("cmd", command(&argv, nil)), opt("cwd", optStr(&cwd)), opt("env", envDict(&env)),
		opt("timeout", optSeconds(&timeout)), opt("secs", seconds(&secs)))
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) != 2 || argv[1] != "hi" {
		t.Errorf("argv = %q", argv)
	}
	if cwd != "default" {
		t.Errorf("cwd=None changed the default to %q", cwd)
	}
	if env["A"] == nil || *env["A"] != "1" || env["B"] != nil || len(env) != 2 {
		t.Errorf("env = %v", env)
	}
	if timeout == nil || *timeout != 1500*time.Millisecond || secs != 2*time.Second {
		t.Errorf("timeout = %v, secs = %v", timeout, secs)
	}
}
