package builtins

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A command's description in messages stays short whatever its arguments,
// and is cut on a character boundary.
func TestDescribeCutsLongCommands(t *testing.T) {
	if got := describe([]string{"echo", "hi there"}); got != "`echo 'hi there'`" {
		t.Errorf("short: %s", got)
	}
	long := describe([]string{"sh", "-c", "exit 3", strings.Repeat("é", 100000)})
	if len(long) > maxDescribe+40 || !strings.Contains(long, "more bytes)") || !utf8.ValidString(long) {
		t.Errorf("long command described in %d bytes: %.80s...", len(long), long)
	}
}
