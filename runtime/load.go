package runtime

import (
	"fmt"

	"go.starlark.net/starlark"
)

// loader runs the files a recipe loads, once each. compile has read,
// resolved and checked them for cycles already, so loading never touches
// the file system and cannot meet a cycle.
type loader struct {
	b           *bundle
	predeclared starlark.StringDict
	done        map[*unit]starlark.StringDict // frozen globals of files run
}

// load is the thread's Load: module is relative to the file whose load
// statement is running, the innermost frame of the thread.
func (l *loader) load(thread *starlark.Thread, module string) (starlark.StringDict, error) {
	from := thread.CallFrame(0).Pos.Filename()
	u, ok := l.b.units[from]
	if !ok {
		return nil, fmt.Errorf("load %s: %s was not compiled", module, from)
	}
	dep, ok := u.loads[module]
	if !ok {
		return nil, fmt.Errorf("load %s: not found among the loads of %s", module, from)
	}
	if g, ok := l.done[dep]; ok {
		return g, nil
	}
	// The loaded file runs on the recipe's own thread, so an interrupt or
	// a failure inside it stops the run like any other.
	g, err := dep.prog.Init(thread, l.predeclared)
	if err != nil {
		return nil, err
	}
	g.Freeze()
	l.done[dep] = g
	return g, nil
}
