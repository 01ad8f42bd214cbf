package builtins

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Func implements a builtin function or method.
type Func func(c *Call) (starlark.Value, error)

// Call is one invocation of a builtin.
type Call struct {
	Env    *Env
	Thread *starlark.Thread
	Name   string // the builtin's qualified name; every error starts with it
	Args   starlark.Tuple
	Kwargs []starlark.Tuple
	Host   *Host          // the host a host-bound builtin acts on
	Recv   starlark.Value // the receiver of a method

	// listParams, set only by a test, makes bind list the parameters it
	// was given instead of binding them: how the test checks that each
	// Sig names exactly what its Func takes (signature_test.go).
	listParams *[]string
}

// errorf returns an error prefixed with the builtin's name.
func (c *Call) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", c.Name, fmt.Sprintf(format, args...))
}

// Entry documents one name and, unless it is documentation only, implements
// it. The name says what it is:
//
//   - "spawn": a global; a function (Fn) or a value made per run (Value).
//     A global with neither is Starlark's own (print, fail, load) or the
//     heading of a module or a type.
//   - "files.stat": a member of the module "files". Modules are built from
//     their members.
//   - "Process.wait": a method (Fn) or attribute (Attr) of the type
//     "Process". Types are capitalised.
type Entry struct {
	Name string
	Sig  string // how it is called: "spawn(cmd, args=[], *, ...) -> Process"
	Doc  string
	// Host marks builtins that act on a daemon: the global acts on the
	// default host, and the same name is a method of every Host value
	// (h.spawn, h.files).
	Host  bool
	Fn    Func
	Attr  func(recv starlark.Value) starlark.Value
	Value func(env *Env) starlark.Value
}

// Owner is the module or type an entry belongs to ("" for a global), and
// Short is its name within it.
func (e *Entry) Owner() (owner, short string) {
	if i := strings.IndexByte(e.Name, '.'); i >= 0 {
		return e.Name[:i], e.Name[i+1:]
	}
	return "", e.Name
}

// IsType reports whether the name is a type's (Process, Result, Host).
func IsType(name string) bool {
	r := []rune(name)
	return len(r) > 0 && unicode.IsUpper(r[0])
}

// Plugin is a group of builtins.
type Plugin struct {
	Name    string
	Entries []Entry
}

// Table is every name a recipe can use. It is immutable once built.
type Table struct {
	entries []*Entry
	byName  map[string]*Entry
	members map[string][]*Entry  // by owner, sorted by name
	sigs    map[string]Signature // of the functions (entries with Fn), by name
}

// NewTable indexes the plugins' entries. A name defined twice, a member
// without its owner's heading, or an entry that is both a function and a
// value is an error: the table is the contract, so it must be exact.
func NewTable(plugins ...Plugin) (*Table, error) {
	t := &Table{byName: make(map[string]*Entry), members: make(map[string][]*Entry), sigs: make(map[string]Signature)}
	for _, p := range plugins {
		for i := range p.Entries {
			e := &p.Entries[i]
			if _, dup := t.byName[e.Name]; dup {
				return nil, fmt.Errorf("builtins: %s is defined twice (plugin %s)", e.Name, p.Name)
			}
			kinds := 0
			for _, set := range []bool{e.Fn != nil, e.Attr != nil, e.Value != nil} {
				if set {
					kinds++
				}
			}
			if kinds > 1 {
				return nil, fmt.Errorf("builtins: %s has more than one of Fn, Attr and Value", e.Name)
			}
			if e.Sig == "" || e.Doc == "" {
				return nil, fmt.Errorf("builtins: %s has no signature or no doc", e.Name)
			}
			if e.Fn != nil {
				sig, err := parseSignature(e.Name, e.Sig)
				if err != nil {
					return nil, fmt.Errorf("builtins: %s: signature %q: %v", e.Name, e.Sig, err)
				}
				t.sigs[e.Name] = sig
			}
			t.byName[e.Name] = e
			t.entries = append(t.entries, e)
			if owner, _ := e.Owner(); owner != "" {
				t.members[owner] = append(t.members[owner], e)
			}
		}
	}
	for owner, ms := range t.members {
		if _, ok := t.byName[owner]; !ok {
			return nil, fmt.Errorf("builtins: %s has members but no entry of its own", owner)
		}
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	}
	return t, nil
}

// MustTable is NewTable for tables fixed at compile time, where an error is
// a programming mistake.
func MustTable(plugins ...Plugin) *Table {
	t, err := NewTable(plugins...)
	if err != nil {
		panic(err)
	}
	return t
}

// Entries returns every entry in plugin order.
func (t *Table) Entries() []*Entry { return t.entries }

// Lookup finds an entry by its full name.
func (t *Table) Lookup(name string) (*Entry, bool) {
	e, ok := t.byName[name]
	return e, ok
}

// Signature returns what the Sig of the function name says about calling
// it; false when name is not a function (a value, an attribute, a heading,
// or Starlark's own).
func (t *Table) Signature(name string) (Signature, bool) {
	s, ok := t.sigs[name]
	return s, ok
}

// Members returns the entries of a module or type, sorted by name.
func (t *Table) Members(owner string) []*Entry { return t.members[owner] }

// IsPredeclared reports whether a recipe may use name as a global without
// defining it (Starlark's universe aside): what `sous check` resolves against.
func (t *Table) IsPredeclared(name string) bool {
	e, ok := t.byName[name]
	return ok && t.registered(e)
}

// registered reports whether a global entry becomes a predeclared name.
// Starlark's own names (print, fail) and type headings are documentation.
func (t *Table) registered(e *Entry) bool {
	if owner, _ := e.Owner(); owner != "" || IsType(e.Name) {
		return false
	}
	return e.Fn != nil || e.Value != nil || len(t.members[e.Name]) > 0
}

// Predeclared builds the globals of a run.
func (t *Table) Predeclared(env *Env) starlark.StringDict {
	def := env.DefaultHost()
	d := make(starlark.StringDict)
	for _, e := range t.entries {
		if !t.registered(e) {
			continue
		}
		d[e.Name] = t.global(env, e, def)
	}
	return d
}

// global makes the value of a global entry, bound to host when it acts on one.
func (t *Table) global(env *Env, e *Entry, host *Host) starlark.Value {
	switch {
	case e.Fn != nil:
		return t.builtin(env, e, host, nil)
	case e.Value != nil:
		return e.Value(env)
	}
	members := make(starlark.StringDict)
	for _, m := range t.members[e.Name] {
		_, short := m.Owner()
		members[short] = t.builtin(env, m, host, nil)
	}
	return &starlarkstruct.Module{Name: e.Name, Members: members}
}

func (t *Table) builtin(env *Env, e *Entry, host *Host, recv starlark.Value) *starlark.Builtin {
	return starlark.NewBuiltin(e.Name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		return e.Fn(&Call{Env: env, Thread: thread, Name: e.Name, Args: args, Kwargs: kwargs, Host: host, Recv: recv})
	})
}

// attr answers an attribute lookup on a value of type owner from the
// table, so that what `sous doc` lists is exactly what exists. It returns
// nil, nil for an unknown name, as starlark.HasAttrs wants.
func (t *Table) attr(env *Env, owner string, recv starlark.Value, host *Host, name string) (starlark.Value, error) {
	e, ok := t.byName[owner+"."+name]
	if !ok {
		return nil, nil
	}
	switch {
	case e.Attr != nil:
		return e.Attr(recv), nil
	case e.Fn != nil:
		return t.builtin(env, e, host, recv), nil
	}
	return nil, nil
}

// attrNames lists the attributes of type owner.
func (t *Table) attrNames(owner string) []string {
	ms := t.members[owner]
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		_, short := m.Owner()
		names = append(names, short)
	}
	return names
}

// hostAttr answers h.NAME: the host-bound global NAME, acting on h.
func (t *Table) hostAttr(h *Host, name string) starlark.Value {
	e, ok := t.byName[name]
	if !ok || !e.Host || !t.registered(e) {
		return nil
	}
	return t.global(h.env, e, h)
}

// HostNames lists the attributes of Host values: the host-bound globals.
func (t *Table) HostNames() []string {
	var names []string
	for _, e := range t.entries {
		if e.Host && t.registered(e) {
			names = append(names, e.Name)
		}
	}
	sort.Strings(names)
	return names
}

// method adapts a method of receiver type T to a Func.
func method[T starlark.Value](fn func(c *Call, recv T) (starlark.Value, error)) Func {
	return func(c *Call) (starlark.Value, error) { return fn(c, c.Recv.(T)) }
}

// attr adapts an attribute getter of receiver type T.
func attr[T starlark.Value](fn func(recv T) starlark.Value) func(starlark.Value) starlark.Value {
	return func(v starlark.Value) starlark.Value { return fn(v.(T)) }
}
