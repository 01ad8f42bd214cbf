package builtins

import (
	"fmt"
	"slices"
	"testing"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
)

// TestSignaturesNameWhatTheFunctionsTake: `sous check` refuses a keyword
// argument that a function's Sig does not name, so each Sig must name
// exactly the parameters its Func binds, in the same order. Each Func is
// called in a mode where bind lists its parameters and does nothing else.
func TestSignaturesNameWhatTheFunctionsTake(t *testing.T) {
	t.Parallel()
	tab := DefaultTable()
	receivers := map[string]starlark.Value{"Process": &Process{}, "Session": &Session{}, "Pending": &Pending{}}
	checked := 0
	for _, e := range tab.Entries() {
		sig, ok := tab.Signature(e.Name)
		if !ok {
			if e.Fn != nil {
				t.Errorf("%s: a function without a signature", e.Name)
			}
			continue
		}
		if sig.AnyKeyword {
			continue // **kwargs: nothing for check to refuse
		}
		owner, _ := e.Owner()
		got, err := listParams(e, receivers[owner])
		if err != nil {
			t.Errorf("%s: %v", e.Name, err)
			continue
		}
		if !slices.Equal(got, sig.Params) {
			t.Errorf("%s binds %v; its signature %q names %v", e.Name, got, e.Sig, sig.Params)
		}
		checked++
	}
	if checked < 40 {
		t.Errorf("only %d functions checked", checked)
	}
}

// listParams calls e's Func so that its bind lists the parameters.
func listParams(e *runtime.Entry, recv starlark.Value) (params []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked before binding its arguments: %v", r)
		}
	}()
	params = []string{}
	thread := new(starlark.Thread)
	thread.SetLocal(listParamsKey, &params)
	_, err = e.Fn(&runtime.Call{Name: e.Name, Thread: thread, Recv: recv})
	if err != errParamsListed {
		return nil, fmt.Errorf("returned %v before binding its arguments", err)
	}
	return params, nil
}
