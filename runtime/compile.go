package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// fileOptions is the recipe dialect of RECIPES.md.
var fileOptions = syntax.FileOptions{
	Set:             true,
	While:           true,
	TopLevelControl: true,
	GlobalReassign:  true,
	Recursion:       true,
}

// unit is one recipe file, parsed and resolved.
type unit struct {
	name    string       // the path shown in messages: as given, or joined to the loader's
	file    *syntax.File // parsed, and resolved as far as it could be; nil when it did not parse
	prog    *starlark.Program
	loads   map[string]*unit // by the module string of each load statement
	globals map[string]bool  // the names the file defines at top level
}

// bundle is a recipe and every file it loads, compiled before anything
// runs: syntax errors, undefined names, missing loaded files, names a file
// loads that the other does not define, and load cycles are all found here, so `sous check` finds what `sous run` would,
// and a run with such an error starts nothing.
type bundle struct {
	root  *unit
	units map[string]*unit // by display name, for the loader
	order []*unit          // in the order they were compiled, for messages
	// predeclared names the globals of the Table its files use: the run
	// builds only those (Table.StartUsing).
	predeclared map[string]bool
}

// CompileError lists what is wrong with a recipe before it runs, one
// "file:line:col: message" per entry.
type CompileError struct {
	Errs []string
}

func (e *CompileError) Error() string { return strings.Join(e.Errs, "\n") }

// compile parses and resolves path and, depth first, every file it loads.
// With a *CompileError it still returns what it compiled, when it could
// read path, so that a check can look further into the files that did.
func compile(path string, isPredeclared func(string) bool) (*bundle, error) {
	b := &bundle{units: make(map[string]*unit), predeclared: make(map[string]bool)}
	c := &compiler{
		// The resolver asks once per file for each name no scope of the
		// file defines: a yes is a global the run must build.
		isPredeclared: func(name string) bool {
			if !isPredeclared(name) {
				return false
			}
			b.predeclared[name] = true
			return true
		},
		byAbs: make(map[string]*unit),
		b:     b,
		errs:  &CompileError{},
	}
	src, err := readSource(path)
	if err != nil {
		return nil, &CompileError{Errs: []string{fmt.Sprintf("%s: cannot read recipe: %v", path, reason(err))}}
	}
	c.b.root = c.unit(path, src)
	if len(c.errs.Errs) > 0 {
		return c.b, c.errs
	}
	return c.b, nil
}

type compiler struct {
	isPredeclared func(string) bool
	byAbs         map[string]*unit
	stack         []string // display names of the files being compiled, for cycles
	b             *bundle
	errs          *CompileError
}

// unit compiles one file whose source is src.
func (c *compiler) unit(name string, src []byte) *unit {
	abs, err := filepath.Abs(name)
	if err != nil {
		c.errs.Errs = append(c.errs.Errs, fmt.Sprintf("%s: %v", name, err))
		return nil
	}
	u := &unit{name: name, loads: make(map[string]*unit)}
	c.byAbs[abs] = u
	c.b.units[name] = u
	c.b.order = append(c.b.order, u)
	f, prog, err := starlark.SourceProgramOptions(&fileOptions, name, src, c.isPredeclared)
	u.file = f
	if err != nil {
		c.report(err)
		if f == nil {
			return u // it did not parse: its loads are unknown
		}
		// It parsed but does not resolve (an undefined name): the files it
		// loads are still checked below, so one pass shows every file's
		// errors. Without globals, its own loaders skip their name checks.
	} else {
		u.prog = prog
		u.globals = make(map[string]bool)
		if m, ok := f.Module.(*resolve.Module); ok {
			for _, b := range m.Globals {
				u.globals[b.First.Name] = true
			}
		}
	}
	c.stack = append(c.stack, name)
	defer func() { c.stack = c.stack[:len(c.stack)-1] }()
	for _, stmt := range f.Stmts {
		load, ok := stmt.(*syntax.LoadStmt)
		if !ok {
			continue
		}
		module := load.ModuleName()
		dep, seen := u.loads[module]
		if !seen {
			if dep = c.load(name, module, load.Module.TokenPos); dep != nil {
				u.loads[module] = dep
			}
		}
		// A loaded name the other file does not define would otherwise
		// fail only once the loading file runs, after the loaded one ran.
		if dep == nil || dep.globals == nil {
			continue // reported already (missing, cycle, or broken itself)
		}
		for _, from := range load.From {
			if !dep.globals[from.Name] {
				c.errs.Errs = append(c.errs.Errs, fmt.Sprintf("%s: load: name %s not found in module %s", from.NamePos, from.Name, module))
			}
		}
	}
	return u
}

// load resolves a load statement of file from relative to it.
func (c *compiler) load(from, module string, pos syntax.Position) *unit {
	name := module
	if !filepath.IsAbs(module) {
		name = filepath.Join(filepath.Dir(from), module)
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		c.errs.Errs = append(c.errs.Errs, fmt.Sprintf("%s: cannot load %s: %v", pos, module, err))
		return nil
	}
	if u, ok := c.byAbs[abs]; ok {
		if cycle := c.cycle(u.name); cycle != "" {
			c.errs.Errs = append(c.errs.Errs, fmt.Sprintf("%s: Circular load: %s", pos, cycle))
			return nil
		}
		return u
	}
	src, err := readSource(name)
	if err != nil {
		c.errs.Errs = append(c.errs.Errs, fmt.Sprintf("%s: cannot load %s: %s: %v", pos, module, name, reason(err)))
		return nil
	}
	return c.unit(name, src)
}

// cycle returns "a.star -> b.star -> a.star" when name is being compiled
// (a load of it closes a cycle), else "".
func (c *compiler) cycle(name string) string {
	for i, s := range c.stack {
		if s == name {
			return strings.Join(append(append([]string(nil), c.stack[i:]...), name), " -> ")
		}
	}
	return ""
}

// report adds a parse or resolve error, one entry per message.
func (c *compiler) report(err error) {
	var list resolve.ErrorList
	var se syntax.Error
	switch {
	case errors.As(err, &list):
		for _, e := range list {
			c.errs.Errs = append(c.errs.Errs, fmt.Sprintf("%s: %s", e.Pos, e.Msg))
		}
	case errors.As(err, &se):
		c.errs.Errs = append(c.errs.Errs, fmt.Sprintf("%s: %s", se.Pos, se.Msg))
	default:
		c.errs.Errs = append(c.errs.Errs, err.Error())
	}
}

// reason is why a file could not be read ("no such file or directory"),
// without the operation and path of a *PathError: the message names the
// file already.
func reason(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
