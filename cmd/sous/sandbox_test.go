package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

func TestRecipeSandbox(t *testing.T) {
	t.Parallel()
	if err := sandbox.Supported(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	o, dir := runStar(t, `
dir = args["dir"]
run(["mkdir", dir + "/ws"])
outside = "touch %s/outside 2>/dev/null && echo wrote || echo refused" % dir

p = spawn(["sh", "-c", outside + "; touch %s/ws/p 2>/dev/null && echo wrote || echo refused" % dir], sandbox="read-only", echo=False)
print("spawn read-only:", p.wait().stdout.strip().replace("\n", " "))

r = run(["sh", "-c", "touch ws/run && " + outside], cwd=dir, sandbox={"write": ["ws"]}, echo=False)
print("run:", r.stdout.strip(), files.stat(dir + "/ws/run").exists)

r = sh(outside + "; touch %s/ws/sh && echo ok" % dir, sandbox={"write": [dir + "/ws"], "network": True}, echo=False)
print("sh:", r.stdout.strip().replace("\n", " "))

r = pipeline([["sh", "-c", "echo x; " + outside], ["cat"]], sandbox={"write": []}, echo=False)
print("pipeline:", r.status, r.stdout.strip().replace("\n", " "))

run(["touch", dir + "/ran"], sandbox={"write": [dir + "/missing"]}, check=False, echo=False)
`)
	o.expect(t, 1, "main.star:18:", "run: cannot start `touch "+dir+"/ran`: sandbox: write root \""+dir+"/missing\": no such file or directory")
	want := "spawn read-only: refused refused\nrun: refused True\nsh: refused ok\npipeline: ok x refused\n"
	if !strings.HasPrefix(o.stderr, want) {
		t.Errorf("printed:\n%s\nwant:\n%s", o.stderr, want)
	}
	for _, name := range []string{"outside", "ran"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s exists: a sandboxed command ran or wrote outside its roots", name)
		}
	}
}

// TestSandboxArgumentErrors pins the messages of bad sandbox values.
func TestSandboxArgumentErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{`spawn("ls", sandbox=3)`, `spawn: sandbox: want None, "read-only" or a dict with write and network, got int`},
		{`spawn("ls", sandbox="rw")`, `spawn: sandbox: want None, "read-only" or a dict with write and network, got "rw"`},
		{`run("ls", sandbox=["/tmp"])`, `run: sandbox: want None, "read-only" or a dict with write and network, got list`},
		{`sh("ls", sandbox={"write": "/tmp"})`, `sh: sandbox["write"]: want list of strings, got string`},
		{`sh("ls", sandbox={"write": ["/tmp", 1]})`, `sh: sandbox["write"][1]: want string, got int`},
		{`sh("ls", sandbox={"write": [""]})`, `sh: sandbox["write"][0]: empty path`},
		{`run("ls", sandbox={"network": "no"})`, `run: sandbox["network"]: want bool, got string`},
		{`pipeline([["ls"]], sandbox={"net": False})`, `pipeline: sandbox: unknown key "net" (want write and network)`},
		{`pipeline([["ls"]], sandbox={1: False})`, `pipeline: sandbox key 1: want string, got int`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			o, _ := runStar(t, tt.src+"\n")
			o.expect(t, 1, "main.star:1:", tt.want)
		})
	}
}

// A daemon that does not advertise process.spawn.sandbox (a kernel without
// Landlock, an older daemon) gets no sandboxed spawn at all: the recipe
// fails naming the extension, and nothing runs.
func TestRecipeSandboxWithoutTheFeature(t *testing.T) {
	t.Parallel()
	cfg := daemonConfig(t)
	cfg.DisableFeatures = []string{wire.FeatureSpawnSandbox}
	sock, _ := socketDaemon(t, "tok", cfg)
	dir := t.TempDir()
	o, _ := runStar(t, `run(["touch", "`+dir+`/ran"], sandbox="read-only")
`, "--socket", sock, "--token-file", tokenFile(t, "tok"))
	o.expect(t, 1, "main.star:1:", "run: cannot start `touch "+dir+"/ran`: a sandboxed process needs the daemon extension \"process.spawn.sandbox\", which this daemon does not advertise")
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the command ran")
	}
}
