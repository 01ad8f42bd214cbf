package runtime

import (
	"bufio"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// failurePlace finds where in the recipe a run failed, for the summary
// and the GitHub annotation: the innermost frame of recipe code of a
// Starlark error (not the builtin it called), or the first position a
// compile error names; and the text of that line. Empty when the error
// has no place in the recipe (a daemon that went away, an interrupt).
func failurePlace(err error) (file string, line, col int, source string) {
	var ce *CompileError
	switch {
	case err == nil:
		return "", 0, 0, ""
	case errors.As(err, &ce):
		if len(ce.Errs) > 0 {
			if m := compilePos().FindStringSubmatch(ce.Errs[0]); m != nil {
				file = m[1]
				line, _ = strconv.Atoi(m[2])
				col, _ = strconv.Atoi(m[3])
			}
		}
	default:
		ee := innermostEvalError(err)
		if ee == nil {
			return "", 0, 0, ""
		}
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			pos := ee.CallStack[i].Pos
			if pos.Filename() != "<builtin>" && pos.Line > 0 {
				file, line, col = pos.Filename(), int(pos.Line), int(pos.Col)
				break
			}
		}
	}
	if file == "" {
		return "", 0, 0, ""
	}
	return file, line, col, sourceLine(file, line)
}

// compilePos is the position at the start of a compile error:
// "recipe.star:3:5: undefined: foo". Compiled on first use, not at init:
// every start of sous paid for it (docs/PERFORMANCE.md, the start row).
var compilePos = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(.+?):(\d+):(\d+): `) })

// sourceLine is line n of file, "" when it cannot be read.
func sourceLine(file string, n int) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for i := 1; sc.Scan(); i++ {
		if i == n {
			return strings.TrimSpace(sc.Text())
		}
	}
	return ""
}
