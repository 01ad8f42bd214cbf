package runtime

import (
	"fmt"
	"strings"
	"unicode"

	"go.starlark.net/resolve"
	"go.starlark.net/syntax"
)

// keywordChecker finds, in a resolved file, the keyword arguments of
// builtin calls that the builtin does not take (spawn("true", cwdd="/")):
// Starlark only finds them when the call runs. It judges a call only when
// its callee is statically a builtin of the table:
//
//   - a predeclared global or a member of a predeclared module (spawn,
//     git.worktree_create): a file that binds the name itself (spawn = f,
//     a parameter named spawn) uses its own, which is not judged;
//   - a method of a value whose type is known: the result of a builtin
//     whose signature names a type (host() -> Host, spawn() -> Process),
//     directly or through a variable bound once, by that assignment
//     (h = host(...); h.spawn(...); h.git.info(...); p.wait(...));
//   - the function given to defer, whose keyword arguments are its own.
//
// Anything else (a variable assigned twice, a parameter, a loaded name) is
// not judged: the check never refuses a call that could be right.
type keywordChecker struct {
	table *Table
	// sites maps a variable (its first binding identifier, shared by every
	// use, in nested functions too) to the expression of its only binding,
	// or nil when it is bound more than once or otherwise (a parameter, a
	// loop variable, a load, a def).
	sites map[*syntax.Ident]syntax.Expr
	seen  map[*syntax.Ident]bool
	// following guards against a variable defined through itself
	// (x = x.f()) while types are worked out.
	following map[*syntax.Ident]bool
	errs      []string
}

// checkKeywords returns "file:line:col: NAME: unexpected keyword argument"
// errors for f, a file that resolved without error.
func checkKeywords(f *syntax.File, table *Table) []string {
	k := &keywordChecker{
		table:     table,
		sites:     make(map[*syntax.Ident]syntax.Expr),
		seen:      make(map[*syntax.Ident]bool),
		following: make(map[*syntax.Ident]bool),
	}
	syntax.Walk(f, k.collectSites)
	syntax.Walk(f, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok {
			k.checkCall(call)
		}
		return true
	})
	return k.errs
}

// collectSites records every binding of a variable.
func (k *keywordChecker) collectSites(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.AssignStmt:
		if id, ok := n.LHS.(*syntax.Ident); ok && n.Op == syntax.EQ {
			k.bind(id, n.RHS)
		} else {
			k.bindTarget(n.LHS) // a, b = ...; x += ...
		}
	case *syntax.DefStmt:
		k.bind(n.Name, nil)
		k.bindParams(n.Params)
	case *syntax.LambdaExpr:
		k.bindParams(n.Params)
	case *syntax.ForStmt:
		k.bindTarget(n.Vars)
	case *syntax.ForClause:
		k.bindTarget(n.Vars)
	case *syntax.LoadStmt:
		for _, id := range n.To {
			k.bind(id, nil)
		}
	}
	return true
}

// bind records a binding of id to value (nil: not one a type follows from).
func (k *keywordChecker) bind(id *syntax.Ident, value syntax.Expr) {
	first := firstBinding(id)
	if first == nil {
		return
	}
	if k.seen[first] {
		value = nil // bound more than once
	}
	k.seen[first] = true
	k.sites[first] = value
}

// bindTarget records the variables of an assignment's or a loop's target
// (a, b = ...; for k, v in ...) as bound to something unknown. Elements
// and fields (d[k] = v, x.f = v) bind no variable.
func (k *keywordChecker) bindTarget(target syntax.Expr) {
	switch t := target.(type) {
	case *syntax.Ident:
		k.bind(t, nil)
	case *syntax.ParenExpr:
		k.bindTarget(t.X)
	case *syntax.TupleExpr:
		for _, x := range t.List {
			k.bindTarget(x)
		}
	case *syntax.ListExpr:
		for _, x := range t.List {
			k.bindTarget(x)
		}
	}
}

// bindParams records a function's parameters (x, x=default, *x, **x) as
// bound to something unknown.
func (k *keywordChecker) bindParams(params []syntax.Expr) {
	for _, p := range params {
		switch p := p.(type) {
		case *syntax.Ident:
			k.bind(p, nil)
		case *syntax.BinaryExpr:
			k.bindTarget(p.X)
		case *syntax.UnaryExpr:
			if p.X != nil {
				k.bindTarget(p.X)
			}
		}
	}
}

// firstBinding is the identifier that stands for id's variable, or nil
// when id is not a variable of the file (a predeclared or universal name).
func firstBinding(id *syntax.Ident) *syntax.Ident {
	b, ok := id.Binding.(*resolve.Binding)
	if !ok {
		return nil
	}
	return b.First
}

// predeclared reports whether id names the predeclared global of that name:
// the file binds no variable of its own by that name there.
func predeclared(id *syntax.Ident) bool {
	b, ok := id.Binding.(*resolve.Binding)
	return ok && b.Scope == resolve.Predeclared
}

// variable returns the value id was bound to once, or nil.
func (k *keywordChecker) variable(id *syntax.Ident) (syntax.Expr, func()) {
	first := firstBinding(id)
	if first == nil || k.following[first] {
		return nil, func() {}
	}
	k.following[first] = true
	return k.sites[first], func() { delete(k.following, first) }
}

// callee returns the table name of the builtin e calls, or "".
func (k *keywordChecker) callee(e syntax.Expr) string {
	switch e := e.(type) {
	case *syntax.Ident:
		if predeclared(e) {
			if _, ok := k.table.Signature(e.Name); ok {
				return e.Name
			}
			return ""
		}
		value, done := k.variable(e)
		defer done()
		if value == nil {
			return ""
		}
		return k.callee(value) // sp = spawn; sp(...)
	case *syntax.DotExpr:
		var name string
		switch owner := k.kind(e.X); {
		case owner == "":
			return ""
		case owner == "Host":
			name = e.Name.Name // h.spawn is spawn acting on h
			if entry, ok := k.table.Lookup(name); !ok || !entry.Host {
				return ""
			}
		default:
			name = owner + "." + e.Name.Name
		}
		if _, ok := k.table.Signature(name); ok {
			return name
		}
	case *syntax.ParenExpr:
		return k.callee(e.X)
	}
	return ""
}

// kind returns the module or type e's value statically is: "git" for the
// predeclared git, "Host" for host(...), "Process" for p after p =
// spawn(...); "" when unknown.
func (k *keywordChecker) kind(e syntax.Expr) string {
	switch e := e.(type) {
	case *syntax.Ident:
		if predeclared(e) {
			if len(k.table.Members(e.Name)) > 0 && !IsType(e.Name) {
				return e.Name // a module
			}
			return ""
		}
		value, done := k.variable(e)
		defer done()
		if value == nil {
			return ""
		}
		return k.kind(value)
	case *syntax.CallExpr:
		name := k.callee(e.Fn)
		if name == "" {
			return ""
		}
		sig, _ := k.table.Signature(name)
		if _, ok := k.table.Lookup(sig.Result); ok && IsType(sig.Result) {
			return sig.Result
		}
	case *syntax.DotExpr:
		// h.git: a module acting on the host h.
		if k.kind(e.X) != "Host" {
			return ""
		}
		if entry, ok := k.table.Lookup(e.Name.Name); ok && entry.Host && len(k.table.Members(e.Name.Name)) > 0 {
			return e.Name.Name
		}
	case *syntax.ParenExpr:
		return k.kind(e.X)
	}
	return ""
}

// checkCall judges the keyword arguments of one call.
func (k *keywordChecker) checkCall(call *syntax.CallExpr) {
	name := k.callee(call.Fn)
	if name == "" {
		return
	}
	args := call.Args
	if name == "defer" {
		// defer(fn, *args, **kwargs) calls fn with the keywords.
		if len(args) == 0 || isKeyword(args[0]) {
			return
		}
		if name = k.callee(args[0]); name == "" {
			return
		}
		args = args[1:]
	}
	sig, _ := k.table.Signature(name)
	for _, a := range args {
		if !isKeyword(a) {
			continue
		}
		id := a.(*syntax.BinaryExpr).X.(*syntax.Ident)
		if sig.Takes(id.Name) {
			continue
		}
		msg := fmt.Sprintf("%s: %s: unexpected keyword argument %q", id.NamePos, name, id.Name)
		if near := nearest(id.Name, sig.Params); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		k.errs = append(k.errs, msg)
	}
}

// isKeyword reports whether a call argument is name=value.
func isKeyword(arg syntax.Expr) bool {
	b, ok := arg.(*syntax.BinaryExpr)
	return ok && b.Op == syntax.EQ
}

// nearest returns the candidate closest to x, ignoring case and
// underscores, when at most half of x would have to change (as
// go.starlark.net's own "did you mean" does); "" when none is that close.
func nearest(x string, candidates []string) string {
	fold := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '_' {
				return -1
			}
			return unicode.ToLower(r)
		}, s)
	}
	best, bestD := "", (len(fold(x))+1)/2
	for _, c := range candidates {
		if d := levenshtein(fold(x), fold(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// levenshtein is the edit distance between a and b.
func levenshtein(a, b string) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		prev := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cur := row[j]
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			row[j] = min(row[j]+1, row[j-1]+1, prev+cost)
			prev = cur
		}
	}
	return row[len(b)]
}
