package runtime

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Table is every name a recipe can use. It is immutable once built.
type Table struct {
	plugins []Plugin
	entries []*Entry
	byName  map[string]tableEntry
	members map[string][]*Entry // by owner, sorted by name
	// decoders are the plugins' Decoders, by kind.
	decoders map[string]Decoder
	// sigs are the functions' signatures, read on first use, by
	// tableEntry.sig; the slice itself is made by the first Signature
	// call: a run whose recipe calls no builtin by keyword never needs
	// it, and at about 18 KB it was the largest allocation of the
	// table, which is built at every start of sous.
	sigsOnce sync.Once
	sigs     []lazySignature
	nfuncs   int
}

// tableEntry is an entry and, for a function, where its signature is kept
// (sigs[sig-1]; 0 for an entry that is not a function).
type tableEntry struct {
	entry *Entry
	sig   int
}

// NewTable indexes the plugins' entries. A name defined twice, a member
// without its owner's heading, or an entry that is both a function and a
// value is an error: the table is the contract, so it must be exact.
func NewTable(plugins ...Plugin) (*Table, error) {
	// Sized up front: the table is built at every start of sous, and
	// growing its maps entry by entry showed in the start's profile.
	n := 0
	for _, p := range plugins {
		n += len(p.Entries)
	}
	t := &Table{plugins: plugins, entries: make([]*Entry, 0, n), byName: make(map[string]tableEntry, n), members: make(map[string][]*Entry),
		decoders: make(map[string]Decoder)}
	named := make(map[string]bool)
	members := make([]*Entry, 0, n)
	for _, p := range plugins {
		if named[p.Name] {
			return nil, fmt.Errorf("builtins: plugin %s is defined twice", p.Name)
		}
		named[p.Name] = true
		for kind, dec := range p.Decoders {
			if _, dup := t.decoders[kind]; dup {
				return nil, fmt.Errorf("builtins: decoder %s is defined twice (plugin %s)", kind, p.Name)
			}
			t.decoders[kind] = dec
		}
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
			te := tableEntry{entry: e}
			if e.Fn != nil {
				// The parameters are read on first use (lazySignature);
				// the rest of the Sig is checked here.
				if _, err := splitSignature(e.Name, e.Sig); err != nil {
					return nil, fmt.Errorf("builtins: %s: signature %q: %v", e.Name, e.Sig, err)
				}
				t.nfuncs++
				te.sig = t.nfuncs
			}
			t.byName[e.Name] = te
			t.entries = append(t.entries, e)
			if owner, _ := e.Owner(); owner != "" {
				members = append(members, e)
			}
		}
	}
	// Sorted by full name, each owner's members are one run (names that
	// share a prefix are neighbours once sorted), in the order of their
	// short names: one array for all of them, not one grown per owner.
	slices.SortFunc(members, func(a, b *Entry) int { return strings.Compare(a.Name, b.Name) })
	for len(members) > 0 {
		owner, _ := members[0].Owner()
		run := 1
		for run < len(members) && strings.HasPrefix(members[run].Name, owner) && members[run].Name[len(owner)] == '.' {
			run++
		}
		if _, ok := t.byName[owner]; !ok {
			return nil, fmt.Errorf("builtins: %s has members but no entry of its own", owner)
		}
		t.members[owner] = members[:run:run]
		members = members[run:]
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
	n, ok := t.byName[name]
	return n.entry, ok
}

// Signature returns what the Sig of the function name says about calling
// it; false when name is not a function (a value, an attribute, a heading,
// or Starlark's own). A parameter list Starlark cannot parse is a mistake
// in the table, which is fixed at compile time, so it panics as MustTable
// does; builtins' TestSignaturesNameWhatTheFunctionsTake reads every one.
func (t *Table) Signature(name string) (Signature, bool) {
	n, ok := t.byName[name]
	if !ok || n.sig == 0 {
		return Signature{}, false
	}
	t.sigsOnce.Do(func() { t.sigs = make([]lazySignature, t.nfuncs) })
	s, err := t.sigs[n.sig-1].get(name, n.entry.Sig)
	if err != nil {
		panic(fmt.Sprintf("builtins: %s: signature %q: %v", name, n.entry.Sig, err))
	}
	return s, true
}

// Members returns the entries of a module or type, sorted by name.
func (t *Table) Members(owner string) []*Entry { return t.members[owner] }

// IsPredeclared reports whether a recipe may use name as a global without
// defining it (Starlark's universe aside): what `sous check` resolves against.
func (t *Table) IsPredeclared(name string) bool {
	n, ok := t.byName[name]
	return ok && t.registered(n.entry)
}

// registered reports whether a global entry becomes a predeclared name.
// Starlark's own names (print, fail) and type headings are documentation.
func (t *Table) registered(e *Entry) bool {
	if owner, _ := e.Owner(); owner != "" || IsType(e.Name) {
		return false
	}
	return e.Fn != nil || e.Value != nil || len(t.members[e.Name]) > 0
}

// Start starts the plugins for the run env, whose Table is t: each
// plugin's OnStart makes its state for the run, then the run's globals are
// built, every one of them. A test that makes an Env by hand calls it; a
// run calls StartUsing.
func (t *Table) Start(env *Env) starlark.StringDict { return t.StartUsing(env, nil) }

// StartUsing is Start for a run whose files name only the globals in used
// (the bundle's predeclared: compile records them; nil: all). The others are not
// built: a builtin, or a module with a builtin per member, for every
// global of the table, though a one-line recipe reaches none, was a share
// of every start. No code of the run can reach one: Starlark resolves
// every global name of a file when it compiles it. The runtime calls it
// once per run, before any recipe code runs.
func (t *Table) StartUsing(env *Env, used map[string]bool) starlark.StringDict {
	t.startPlugins(env)
	return t.predeclared(env, used)
}

// startPlugins calls each plugin's OnStart and keeps the states.
func (t *Table) startPlugins(env *Env) {
	env.states = make(map[string]any)
	for _, p := range t.plugins {
		if p.OnStart == nil {
			continue
		}
		if s := p.OnStart(env); s != nil {
			env.states[p.Name] = s
			env.stateOrder = append(env.stateOrder, p.Name)
		}
	}
}

// predeclared builds the globals of a run: those in used, or all of them
// when used is nil.
func (t *Table) predeclared(env *Env, used map[string]bool) starlark.StringDict {
	def := env.DefaultHost()
	d := make(starlark.StringDict, len(used))
	for _, e := range t.entries {
		if used != nil && !used[e.Name] || !t.registered(e) {
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
		c := &Call{Env: env, Thread: thread, Name: e.Name, Args: args, Kwargs: kwargs, Host: host, Recv: recv}
		if e.Name == "spawn" && env.Output != nil {
			// Processes spawned one after another are decided together:
			// the hold's time limit waits while a spawn runs (hold.go).
			env.Output.SpawnStarts()
			defer env.Output.SpawnEnds()
		} else {
			env.settle()
		}
		if env.Journal != nil && e.Journal != JournalPure {
			// Every builtin call of a durable run goes through its
			// journal: recorded, or answered from it on resume.
			return env.Journal.call(c, e)
		}
		return e.Fn(c)
	})
}

// settle tells the output that the recipe moved on from the processes it
// spawned, at any builtin call but spawn's own: processes spawned one
// after another with only recipe code between them are decided together
// (Output.EchoBeside). It costs an atomic load when nothing is held.
func (env *Env) settle() {
	if env.Output != nil {
		env.Output.Settle()
	}
}

// Attr answers an attribute lookup on recv, a value of type owner, from
// the table, so that what `sous doc` lists is exactly what exists: a
// value's Attr method calls it. host is the host the value's methods act
// on (nil: none). It returns nil, nil for an unknown name, as
// starlark.HasAttrs wants.
func (t *Table) Attr(env *Env, owner string, recv starlark.Value, host *Host, name string) (starlark.Value, error) {
	n, ok := t.byName[owner+"."+name]
	if !ok {
		return nil, nil
	}
	e := n.entry
	switch {
	case e.Attr != nil:
		return e.Attr(recv), nil
	case e.Fn != nil:
		return t.builtin(env, e, host, recv), nil
	}
	return nil, nil
}

// AttrNames lists the attributes of type owner: a value's AttrNames
// method calls it.
func (t *Table) AttrNames(owner string) []string {
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
	n, ok := t.byName[name]
	e := n.entry
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
	slices.Sort(names)
	return names
}
