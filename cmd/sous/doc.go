package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/builtins"
	"github.com/seed5ad92d46/sous/runtime"
)

// DocOptions are the argument of `sous doc`.
type DocOptions struct {
	IO    *IO
	Index bool   // no NAME: list every name
	Name  string // the NAME to describe
}

func newCmdDoc(f *Factory, runF func(*DocOptions) error) *cobra.Command {
	opts := &DocOptions{IO: f.IO}
	return &cobra.Command{
		Use:   "doc [NAME]",
		Short: "Print the reference of the recipe builtins",
		Long: `Doc prints every name a recipe can use, with its signature; with a NAME
(a global, a module, a type, or a member such as files.read or Process.wait;
a member's own name, such as lines, where only one module or type has it),
the full description. It is generated from the table the runtime registers the
builtins from, so it lists exactly what exists.`,
		Example: `  sous doc
  sous doc spawn
  sous doc Process
  sous doc files.read
  sous doc lines`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("%s takes at most one NAME\nRun '%s --help' for usage.", cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		// Shell completion offers every name the reference has.
		ValidArgsFunction: func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, e := range builtins.DefaultTable().Entries() {
				if strings.HasPrefix(e.Name, prefix) {
					names = append(names, e.Name)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Index = len(args) == 0
			if !opts.Index {
				opts.Name = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return docRun(opts)
		},
	}
}

func docRun(opts *DocOptions) error {
	streams := opts.IO
	t := builtins.DefaultTable()
	if opts.Index {
		writeIndex(streams.Out, t)
		return nil
	}
	return writeEntry(streams.Out, t, opts.Name)
}

// writeIndex lists every name by kind: globals, then modules and types
// with their members.
func writeIndex(w io.Writer, t *runtime.Table) {
	fmt.Fprintln(w, "Recipe builtins (sous doc NAME for one of them)")
	fmt.Fprintln(w, "\nGlobals:")
	var groups []*runtime.Entry
	for _, e := range t.Entries() {
		if owner, _ := e.Owner(); owner != "" {
			continue
		}
		if len(t.Members(e.Name)) > 0 || runtime.IsType(e.Name) {
			groups = append(groups, e)
			continue
		}
		fmt.Fprintf(w, "  %s\n", e.Sig)
	}
	sort.SliceStable(groups, func(i, j int) bool { return runtime.IsType(groups[j].Name) && !runtime.IsType(groups[i].Name) })
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.Name)
		for _, m := range t.Members(g.Name) {
			fmt.Fprintf(w, "  %s\n", m.Sig)
		}
		if g.Name == "Host" {
			fmt.Fprintf(w, "  h.NAME for NAME in: %s\n", strings.Join(t.HostNames(), ", "))
		}
	}
}

// writeEntry prints one name in full; a module or type lists its members.
func writeEntry(w io.Writer, t *runtime.Table, name string) error {
	e, ok := t.Lookup(name)
	if !ok {
		// h.spawn is spawn acting on h.
		if short, isHost := strings.CutPrefix(name, "Host."); isHost {
			if e, ok = t.Lookup(short); ok && e.Host {
				fmt.Fprintf(w, "Host.%s: %s, acting on the host.\n\n", short, short)
			} else {
				ok = false
			}
		}
	}
	if !ok {
		// lines is Process.lines when no other owner has a member so named:
		// a person asks for the method by the name a recipe calls it with.
		if m := memberNamed(t, name); m != nil {
			e, ok = m, true
			fmt.Fprintf(w, "%s: %s\n\n", name, m.Name)
		}
	}
	if !ok {
		return usageErrorf("no builtin named %q%s (sous doc lists them all)", name, suggest(t, name))
	}
	fmt.Fprintln(w, e.Sig)
	fmt.Fprintln(w)
	writeWrapped(w, e.Doc, "    ", 80)
	if e.Host {
		fmt.Fprintln(w, "\n    Acts on the default host; h."+e.Name+" acts on the Host h.")
	}
	if ms := t.Members(e.Name); len(ms) > 0 {
		fmt.Fprintln(w)
		for _, m := range ms {
			fmt.Fprintf(w, "%s\n", m.Sig)
			writeWrapped(w, m.Doc, "    ", 80)
		}
	}
	if e.Name == "Host" {
		fmt.Fprintf(w, "\nMethods and modules: %s\n", strings.Join(t.HostNames(), ", "))
	}
	return nil
}

// memberNamed is the one member of a module or type whose own name is
// name (Process.lines for "lines"); nil when there is none, or several
// (Process.wait and Pending.wait for "wait"), or name has a dot.
func memberNamed(t *runtime.Table, name string) *runtime.Entry {
	if strings.Contains(name, ".") {
		return nil
	}
	var found *runtime.Entry
	for _, e := range t.Entries() {
		if owner, short := e.Owner(); owner != "" && short == name {
			if found != nil {
				return nil
			}
			found = e
		}
	}
	return found
}

// suggest offers the names that contain name's last part.
func suggest(t *runtime.Table, name string) string {
	last := name[strings.LastIndex(name, ".")+1:]
	var near []string
	for _, e := range t.Entries() {
		if last != "" && strings.Contains(strings.ToLower(e.Name), strings.ToLower(last)) {
			near = append(near, e.Name)
		}
	}
	if len(near) == 0 || len(near) > 5 {
		return ""
	}
	return "; did you mean " + strings.Join(near, ", ") + "?"
}

// writeWrapped writes text as indented lines of at most width columns.
func writeWrapped(w io.Writer, text, indent string, width int) {
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	if len(line) > len(indent) {
		fmt.Fprintln(w, line)
	}
}
