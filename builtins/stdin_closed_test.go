package builtins

import "testing"

// On the embedded daemon: run, sh and pipeline without stdin= give the
// command a stdin closed by its spawn (it reads end-of-file and ends);
// with stdin= the data is written; spawn leaves the stdin open for the
// recipe to write and close later.
func TestCommandsWithoutStdinReadEOF(t *testing.T) {
	t.Parallel()
	f := newFixture(t).withEmbeddedDaemon()
	f.run(`
print("run", repr(run("cat", echo=False).stdout))
print("sh", repr(sh("read x || echo eof; test -p /dev/stdin && echo fifo", echo=False).stdout))
print("pipeline", repr(pipeline([["cat"], ["tr", "a-z", "A-Z"]], echo=False).stdout))
print("fed", repr(run("cat", stdin="fed", echo=False).stdout))
p = spawn("cat", echo=False)
p.write("later")
p.close_stdin()
print("spawn", repr(p.wait().stdout))
`).expect(t, 0, `run ""`, `sh "eof\nfifo\n"`, `pipeline ""`, `fed "fed"`, `spawn "later"`)
}
