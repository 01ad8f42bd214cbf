package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// relativeRecipe extracts and inspects with paths relative to the
// directory sous runs in.
const relativeRecipe = `
n = extract_tar("release.tar.gz", "out", modes="archive")
print(n, files.stat("out/.synced").exists, files.stat("release.tar.gz").exists)
print([e.path for e in files.list("out")], files.list("out/bin")[0].path)
print(files.read("out/bin/run").strip(), files.validate("out/bin").is_dir)
print(run("cat", ["run"], cwd="out/bin", echo=False).stdout.splitlines()[0])
`

// A recipe's relative paths are taken from the directory sous runs in, on
// the embedded daemon and on a socket daemon whose own directory is
// elsewhere (the test process's). extract_tar refused a relative dest, and
// files.* and a spawn's cwd on the socket daemon looked in the daemon's
// directory.
func TestRecipeRelativePaths(t *testing.T) {
	t.Parallel()
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	for _, tg := range []struct {
		name  string
		flags []string
	}{{"embedded", nil}, {"socket", []string{"--socket", sock}}} {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			archive := releaseArchive(t)
			if err := os.Rename(archive, filepath.Join(work, "release.tar.gz")); err != nil {
				t.Fatal(err)
			}
			recipe := filepath.Join(t.TempDir(), "main.star")
			if err := os.WriteFile(recipe, []byte(relativeRecipe), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(sousBinary(t), append(append([]string{"run"}, tg.flags...), recipe)...)
			cmd.Dir = work
			cmd.Env = append(cleanEnv(), "SOUS_TOKEN=tok")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("sous run: %v\n%s", err, out)
			}
			want := "1 True False\n" +
				`["out/bin"] out/bin/run` + "\n" +
				"#!/bin/sh\necho ran True\n" +
				"#!/bin/sh\n"
			if !strings.HasSuffix(string(out), want) {
				t.Errorf("output:\n%s\nwant it to end with:\n%s", out, want)
			}
			if out, err := exec.Command(filepath.Join(work, "out", "bin", "run")).Output(); err != nil || string(out) != "ran\n" {
				t.Errorf("out/bin/run in the working directory: %q, %v", out, err)
			}
		})
	}
}

// On a remote host a relative dest has no recipe directory to be taken
// from: the call fails before anything is sent (nothing listens on the
// target, so any connection attempt would fail differently).
func TestExtractTarRelativeDestRemote(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `extract_tar("/tmp/a.tar.gz", "out")`+"\n", "--remote", "ws://127.0.0.1:1")
	o.expect(t, 1, `extract_tar: dest: "out" is relative and host ws://127.0.0.1:1 is remote: give an absolute path`)
}

func TestExtractTarBuiltinOptions(t *testing.T) {
	t.Parallel()
	archive := releaseArchive(t)
	dir := t.TempDir()
	o, _ := runStar(t, `
print(extract_tar(args["a"], args["d"] + "/out", modes="archive", keep_archive=True), files.stat(args["a"]).exists)
print(run(args["d"] + "/out/bin/run", echo=False).stdout.strip(), files.stat(args["d"] + "/out/bin/run").mode)
print(extract_tar(args["a"], args["d"] + "/out"), files.stat(args["a"]).exists, files.stat(args["d"] + "/out/bin/run").mode)
`, "-a", "a="+archive, "-a", "d="+dir)
	o.expect(t, 0)
	if want := "1 True\nran -rwxr-xr-x\n1 False -rw-------\n"; !strings.HasPrefix(o.stderr, want) && umaskIs022(t) {
		t.Errorf("log:\n%s\nwant:\n%s", o.stderr, want)
	}

	o, _ = runStar(t, `extract_tar("/a.tar.gz", "/tmp/x", modes="all")`+"\n")
	o.expect(t, 1, `extract_tar: modes: want "owner" or "archive", got "all"`)
	o, _ = runStar(t, `extract_tar("/a.tar.gz", "/tmp/x", keep_archive="yes")`+"\n")
	o.expect(t, 1, "extract_tar: keep_archive: want bool, got string")
}

// On a daemon without files.extract_tar.options the call fails, naming the
// extension, before the archive or dest is touched.
func TestExtractTarBuiltinOptionsNeedTheFeature(t *testing.T) {
	t.Parallel()
	cfg := daemonConfig(t)
	cfg.DisableFeatures = []string{wire.FeatureExtractOptions}
	sock, _ := socketDaemon(t, "tok", cfg)
	tok := tokenFile(t, "tok")
	archive := releaseArchive(t)
	dest := filepath.Join(t.TempDir(), "out")
	for _, call := range []struct{ kw, what string }{
		{`modes="archive"`, `modes="archive"`},
		{`keep_archive=True`, `keep_archive=True`},
		{`modes="archive", keep_archive=True`, `modes="archive" and keep_archive=True`},
	} {
		o, _ := runStar(t, `extract_tar(args["a"], args["d"], `+call.kw+`)`+"\n", "--socket", sock, "--token-file", tok, "-a", "a="+archive, "-a", "d="+dest)
		o.expect(t, 1, "extract_tar: "+call.what+` needs the daemon extension "files.extract_tar.options", which host unix://`+sock+" does not advertise")
		if _, err := os.Stat(archive); err != nil {
			t.Fatalf("the refused call consumed the archive: %v", err)
		}
		if _, err := os.Stat(dest); err == nil {
			t.Fatal("the refused call made dest")
		}
	}
}

// umaskIs022 reports whether the modes a test expects are the usual ones.
func umaskIs022(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	return err == nil && strings.Contains(string(b), "Umask:\t0022")
}
