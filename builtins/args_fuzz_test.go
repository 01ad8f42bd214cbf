package builtins

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// valueGen decodes fuzz bytes into Starlark values of every kind a recipe
// can pass: None, bools, small and huge ints, floats (NaN, infinities),
// strings and bytes with invalid UTF-8, lists, tuples, dicts with keys of
// any hashable type, sets, huge ranges, builtins, nested a few levels deep.
type valueGen struct{ b []byte }

func (g *valueGen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *valueGen) bytes(n int) []byte {
	n = min(n, len(g.b))
	out := g.b[:n]
	g.b = g.b[n:]
	return out
}

func (g *valueGen) u64() uint64 {
	var buf [8]byte
	copy(buf[:], g.bytes(8))
	return binary.LittleEndian.Uint64(buf[:])
}

func (g *valueGen) value(depth int) starlark.Value {
	op := g.byte()
	if depth > 3 {
		op %= 7 // scalars only
	}
	switch op % 14 {
	case 0:
		return starlark.None
	case 1:
		return starlark.Bool(g.byte()&1 == 1)
	case 2:
		return starlark.MakeInt(int(int8(g.byte())))
	case 3:
		return starlark.MakeInt64(int64(g.u64()))
	case 4: // beyond int64
		return starlark.MakeInt64(int64(g.u64())).Mul(starlark.MakeInt64(int64(g.u64()) | 1)).Mul(starlark.MakeInt(1 << 40))
	case 5:
		return starlark.Float(math.Float64frombits(g.u64()))
	case 6:
		if g.byte()&1 == 0 {
			return starlark.String(g.bytes(int(g.byte() % 24)))
		}
		return starlark.Bytes(g.bytes(int(g.byte() % 24)))
	case 7, 8:
		n := int(g.byte() % 5)
		elems := make([]starlark.Value, n)
		for i := range elems {
			elems[i] = g.value(depth + 1)
		}
		if op%14 == 7 {
			return starlark.NewList(elems)
		}
		return starlark.Tuple(elems)
	case 9:
		d := starlark.NewDict(2)
		for range int(g.byte() % 4) {
			d.SetKey(g.value(depth+1), g.value(depth+1)) // unhashable keys are refused: fine
		}
		return d
	case 10:
		s := starlark.NewSet(2)
		for range int(g.byte() % 3) {
			s.Insert(g.value(depth + 1))
		}
		return s
	case 11: // a range far too long to materialise
		r, err := starlark.Call(&starlark.Thread{}, starlark.Universe["range"], starlark.Tuple{starlark.MakeInt64(int64(g.u64() >> 1))}, nil)
		if err != nil {
			return starlark.None
		}
		return r
	case 12:
		return starlark.Universe["len"]
	default:
		return starlark.String([]string{"TERM", "KILL", "stdout", "stderr", "", " ", "ls", "/tmp", "A=B"}[g.byte()%9])
	}
}

// FuzzBind passes random values, positionally and by keyword (known and
// unknown names), to bind with every argument binder. It must never panic or
// allocate beyond reason, and every error must start with the builtin's
// name, the way recipes see them ("spawn: cwd: want string, got int").
func FuzzBind(f *testing.F) {
	f.Add([]byte{6, 0, 2, 'l', 's'}, byte(1), byte(3))
	f.Add([]byte{11, 255, 255, 255, 255, 255, 255, 255, 127}, byte(2), byte(0))
	f.Add([]byte{7, 3, 6, 0, 1, 'a', 2, 5, 9, 2, 6, 0, 1, 'k', 3}, byte(1), byte(4))
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 248, 127}, byte(0), byte(12))
	f.Fuzz(func(t *testing.T, in []byte, npos, nkw byte) {
		g := &valueGen{b: in}
		var (
			s, s2    string
			b        bool
			n        int64
			on       *int64
			d        time.Duration
			od       *time.Duration
			list     []string
			cmd      []string
			env      map[string]*string
			sdict    map[string]string
			payload  []byte
			opayload []byte
			v        starlark.Value
			sig      string
			stages   [][]string
			stream   wire.Stream
			aw       []Awaitable
		)
		params := []binding{
			req("cmd", command(&cmd, nil)),
			opt("args", strList(&list)),
			opt("name", str(&s)),
			opt("cwd", optStr(&s2)),
			opt("flag", boolean(&b)),
			opt("n", integer(&n, 0)),
			opt("from_seq", optInteger(&on, 1)),
			opt("secs", seconds(&d)),
			opt("timeout", optSeconds(&od)),
			opt("env", envDict(&env)),
			opt("labels", strDict(&sdict)),
			opt("data", data(&payload)),
			opt("stdin", optData(&opayload)),
			opt("any", value(&v)),
			opt("signal", signalName(&sig)),
			opt("stages", stageLists(&stages)),
			opt("stream", streamArg(&stream)),
			opt("procs", awaitables(&aw)),
		}
		names := []string{"cmd", "args", "name", "cwd", "flag", "n", "from_seq", "secs", "timeout", "env", "labels",
			"data", "stdin", "any", "signal", "stages", "stream", "procs", "nope", ""}
		var args starlark.Tuple
		for range int(npos % 4) {
			args = append(args, g.value(0))
		}
		var kwargs []starlark.Tuple
		for range int(nkw % 8) {
			kwargs = append(kwargs, starlark.Tuple{starlark.String(names[int(g.byte())%len(names)]), g.value(0)})
		}
		c := &runtime.Call{Name: "fuzzed", Args: args, Kwargs: kwargs}
		err := bind(c, 2, params...)
		if err != nil && !strings.HasPrefix(err.Error(), "fuzzed: ") {
			t.Fatalf("error does not name the builtin: %q", err)
		}
	})
}
