package mirror

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

func TestKinds(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	dev, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, tc := range []struct {
		name            string
		f               *os.File
		pipe, pipeOrReg bool
	}{{"pipe", w, true, true}, {"regular file", file, false, true}, {"device", dev, false, false}} {
		if got := IsPipe(tc.f); got != tc.pipe {
			t.Errorf("IsPipe(%s) = %v", tc.name, got)
		}
		if got := IsPipeOrRegular(tc.f); got != tc.pipeOrReg {
			t.Errorf("IsPipeOrRegular(%s) = %v", tc.name, got)
		}
	}
}

func TestTeesAndChildOwn(t *testing.T) {
	in, out, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	defer out.Close()
	errOut, err := os.Create(filepath.Join(t.TempDir(), "err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errOut.Close()
	for _, tc := range []struct {
		name      string
		m         Spec
		tees      bool
		teeOut    *os.File
		teeErr    *os.File
		childOwns []*os.File
	}{
		{"none", Spec{}, false, nil, nil, nil},
		{"tee stdout", Spec{Stdout: out}, true, out, nil, nil},
		{"tee both, stdin passed", Spec{Stdout: out, Stderr: errOut, Stdin: in}, true, out, errOut, []*os.File{in}},
		{"direct", Spec{Stdout: out, Stderr: errOut, Direct: true}, false, nil, nil, []*os.File{out, errOut}},
		{"stdin only", Spec{Stdin: in}, false, nil, nil, []*os.File{in}},
	} {
		if got := tc.m.Tees(); got != tc.tees {
			t.Errorf("%s: Tees() = %v", tc.name, got)
		}
		if got := tc.m.TeeOf(wire.Stdout); got != tc.teeOut {
			t.Errorf("%s: TeeOf(stdout) = %v", tc.name, got)
		}
		if got := tc.m.TeeOf(wire.Stderr); got != tc.teeErr {
			t.Errorf("%s: TeeOf(stderr) = %v", tc.name, got)
		}
		if got := tc.m.ChildOwn(); !slices.Equal(got, tc.childOwns) {
			t.Errorf("%s: ChildOwn() = %v, want %v", tc.name, got, tc.childOwns)
		}
	}
}
