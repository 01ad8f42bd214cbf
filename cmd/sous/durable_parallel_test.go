package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parallelRecipe runs three processes through parallel() two at a time,
// each appending to a counter file of its own, then a command after them.
const parallelRecipe = `d = args["dir"]
rs = parallel([1, 2, 3], lambda i: spawn("sh", ["-c", "echo %d >> %s/count/p%d; sleep 0.%d" % (i, d, i, 4 - i)]), limit = 2)
sh("echo done >> %s/count/done" % d)
print("codes", [r.exit_code for r in rs])
`

// TestDurableParallelResumes kills the runner of parallelRecipe after each
// record of its journal, on a socket daemon and on the embedded one, and
// resumes: the resume follows the processes parallel() had started (a
// handle rebuilt from the journal never ended before: the resume hung, and
// its interrupt crashed on the handle's missing process). On the socket
// daemon each process ran once; on the embedded one a process that died
// with the runner runs again, never more than twice.
func TestDurableParallelResumes(t *testing.T) {
	target, _ := journalDaemon(t, true)
	for _, onSocket := range []bool{true, false} {
		for point := 2; point <= 9; point++ {
			t.Run(fmt.Sprintf("killed at record %d, socket %t", point, onSocket), func(t *testing.T) {
				var extra []string
				if onSocket {
					extra = target
				}
				dir := durableDir(t, parallelRecipe)
				o, killed := durableRun(t, dir, []string{fmt.Sprintf("SOUS_FAULT_JOURNAL=%d", point)},
					append([]string{"run", "--journal", "j", "main.star", "-a", "dir=" + dir}, extra...)...)
				if !killed {
					t.Fatalf("not killed at %d: exit %d\n%s", point, o.code, o.stderr)
				}
				id := runIDOf(t, o)
				o, _ = durableRun(t, dir, nil, append([]string{"resume", "--journal", "j", id}, extra...)...)
				o.expect(t, 0, "codes [0, 0, 0]")
				for i, name := range []string{"p1", "p2", "p3", "done"} {
					data, _ := os.ReadFile(filepath.Join(dir, "count", name))
					line := "done\n"
					if name != "done" {
						line = fmt.Sprintf("%d\n", i+1)
					}
					n := strings.Count(string(data), line)
					if n != len(data)/len(line) || n < 1 || n > 2 || (onSocket || name == "done") && n != 1 {
						t.Errorf("count/%s is %q\n%s", name, data, o.stderr)
					}
				}
			})
		}
	}
}
