package runtime

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"

	"go.starlark.net/syntax"
)

// Signature is what an entry's Sig says about calling it: the names its
// parameters take as keywords and the type of its result. `sous check`
// reads it to find keyword arguments no parameter takes, so every Sig of a
// function must list exactly the parameters its Func binds (a test probes
// each one).
type Signature struct {
	Params []string // every named parameter, in order
	// AnyKeyword is set by a **kwargs parameter: any keyword is taken.
	AnyKeyword bool
	// Result is the first word after "->" ("Process" for "-> Process",
	// "list" for "-> list of strings"); "" when the Sig has no result.
	Result string
}

// Takes reports whether a call may pass name as a keyword argument.
func (s Signature) Takes(name string) bool {
	if s.AnyKeyword {
		return true
	}
	for _, p := range s.Params {
		if p == name {
			return true
		}
	}
	return false
}

// parseSignature reads a function's Sig, `name(params) -> result`. The
// parameter list is Starlark's own (defaults, "*", *args, **kwargs), so
// Starlark's parser reads it.
func parseSignature(name, sig string) (Signature, error) {
	shape, err := splitSignature(name, sig)
	if err != nil {
		return Signature{}, err
	}
	return shape.parse()
}

// signatureShape is a Sig cut into its parameter list and its result
// word, before Starlark's parser has read the parameters.
type signatureShape struct {
	name, params, result string
}

// splitSignature checks what can be checked of a Sig without Starlark's
// parser: the name, the closing parenthesis, the result. NewTable checks
// this much of every Sig; the parameters are read on first use (parse).
func splitSignature(name, sig string) (signatureShape, error) {
	// Not CutPrefix(sig, name+"("): NewTable calls this for every function
	// of the table at every start, and the concatenation allocated.
	rest, ok := strings.CutPrefix(sig, name)
	if ok {
		rest, ok = strings.CutPrefix(rest, "(")
	}
	if !ok {
		return signatureShape{}, fmt.Errorf("want %s(...)", name)
	}
	end := closingParen(rest)
	if end < 0 {
		return signatureShape{}, errors.New("no closing parenthesis")
	}
	shape := signatureShape{name: name, params: rest[:end]}
	after := strings.TrimSpace(rest[end+1:])
	if after == "" {
		return shape, nil
	}
	result, ok := strings.CutPrefix(after, "->")
	if shape.result = firstWord(result); !ok || shape.result == "" {
		return signatureShape{}, fmt.Errorf("want nothing or -> RESULT after the parameters, got %q", after)
	}
	return shape, nil
}

// firstWord is the first run of letters and underscores in s ("" when
// none): "Process" of " Process", "list" of " list of strings".
func firstWord(s string) string {
	isWord := func(r rune) bool { return unicode.IsLetter(r) || r == '_' }
	start := strings.IndexFunc(s, isWord)
	if start < 0 {
		return ""
	}
	if n := strings.IndexFunc(s[start:], func(r rune) bool { return !isWord(r) }); n >= 0 {
		return s[start : start+n]
	}
	return s[start:]
}

// parse reads the parameter list with Starlark's parser.
func (shape signatureShape) parse() (Signature, error) {
	f, err := syntax.Parse(shape.name, "def f("+shape.params+"): pass\n", 0)
	if err != nil {
		return Signature{}, err
	}
	s := Signature{Result: shape.result}
	for _, p := range f.Stmts[0].(*syntax.DefStmt).Params {
		switch p := p.(type) {
		case *syntax.Ident:
			s.Params = append(s.Params, p.Name)
		case *syntax.BinaryExpr: // name=default
			s.Params = append(s.Params, p.X.(*syntax.Ident).Name)
		case *syntax.UnaryExpr: // "*", *args or **kwargs
			if p.Op == syntax.STARSTAR {
				s.AnyKeyword = true
			}
		}
	}
	return s, nil
}

// lazySignature is a function's Signature, read from its Sig the first
// time something asks (sous check, a run's keyword check of a recipe that
// calls it). Reading all of them with Starlark's parser took about a tenth
// of `sous run`'s start (docs/PERFORMANCE.md, the start row), and a run
// reads only those its recipe calls. The Table is shared, so the first
// reader parses under the Once.
type lazySignature struct {
	once sync.Once
	sig  Signature
	err  error
}

// get reads the Sig of the function name, the first time it is called.
func (l *lazySignature) get(name, sig string) (Signature, error) {
	l.once.Do(func() { l.sig, l.err = parseSignature(name, sig) })
	return l.sig, l.err
}

// closingParen finds the parenthesis that closes an argument list whose
// opening one came just before s, skipping brackets and string literals
// (a default may be "(" or [1, 2]). It returns -1 when there is none.
func closingParen(s string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return -1
}
