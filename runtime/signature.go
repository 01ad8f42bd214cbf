package runtime

import (
	"errors"
	"fmt"
	"strings"
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
	rest, ok := strings.CutPrefix(sig, name+"(")
	if !ok {
		return Signature{}, fmt.Errorf("want %s(...)", name)
	}
	end := closingParen(rest)
	if end < 0 {
		return Signature{}, errors.New("no closing parenthesis")
	}
	f, err := syntax.Parse(name, "def f("+rest[:end]+"): pass\n", 0)
	if err != nil {
		return Signature{}, err
	}
	var s Signature
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
	after := strings.TrimSpace(rest[end+1:])
	if after == "" {
		return s, nil
	}
	result, ok := strings.CutPrefix(after, "->")
	words := strings.FieldsFunc(result, func(r rune) bool { return !unicode.IsLetter(r) && r != '_' })
	if !ok || len(words) == 0 {
		return Signature{}, fmt.Errorf("want nothing or -> RESULT after the parameters, got %q", after)
	}
	s.Result = words[0]
	return s, nil
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
