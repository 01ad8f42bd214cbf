package runtime

import (
	"fmt"
	"strings"

	"go.starlark.net/starlark"
)

const (
	// repeatsShown is how many of a run of identical frames (a function
	// calling itself from one place) a backtrace shows before saying how
	// many more there were, as Python does.
	repeatsShown = 3
	// framesShown bounds what remains (mutual recursion repeats no single
	// frame): that many of the outermost frames and as many of the
	// innermost, which hold the failing line.
	framesShown = 50
)

// backtrace is starlark's EvalError.Backtrace with runaway recursion folded:
// a 100,000-deep stack overflow printed 2.8 MB, every line but a few the
// same.
func backtrace(ee *starlark.EvalError) string {
	stack := ee.CallStack
	suffix := ""
	if last := len(stack) - 1; last >= 0 && stack[last].Pos.Filename() == "<builtin>" {
		suffix = " in " + stack[last].Name
		stack = stack[:last]
	}
	var lines []string
	for i := 0; i < len(stack); {
		line := fmt.Sprintf("  %s: in %s", stack[i].Pos, stack[i].Name)
		run := 1
		for i+run < len(stack) && stack[i+run].Pos == stack[i].Pos && stack[i+run].Name == stack[i].Name {
			run++
		}
		for k := 0; k < min(run, repeatsShown); k++ {
			lines = append(lines, line)
		}
		if more := run - repeatsShown; more > 0 {
			lines = append(lines, fmt.Sprintf("  [the line above repeated %d more times]", more))
		}
		i += run
	}
	if len(lines) > 2*framesShown {
		omitted := len(lines) - 2*framesShown
		lines = append(append(lines[:framesShown:framesShown], fmt.Sprintf("  [%d more lines]", omitted)), lines[len(lines)-framesShown:]...)
	}
	var b strings.Builder
	if len(lines) > 0 {
		b.WriteString("Traceback (most recent call last):\n")
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "Error%s: %s", suffix, ee.Msg)
	return b.String()
}
