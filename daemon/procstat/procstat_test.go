package procstat

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// A command name with spaces and parentheses does not shift the fields.
func TestReadCountsFromTheLastParenthesis(t *testing.T) {
	dir := t.TempDir()
	name := dir + "/a b) (c"
	if err := os.Symlink("/bin/sleep", name); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	s, err := Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Field(3); st != "S" && st != "R" && st != "D" {
		t.Errorf("state %q", st)
	}
	if ppid, ok := s.Int(4); !ok || int(ppid) != os.Getpid() {
		t.Errorf("ppid %d %v, want %d", ppid, ok, os.Getpid())
	}
	self, err := Read(0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := syscall.Getpgid(0)
	if err != nil {
		t.Fatal(err)
	}
	if pgrp, ok := self.Int(5); !ok || int(pgrp) != want {
		t.Errorf("pgrp %d %v, want %d", pgrp, ok, want)
	}
	if s.Field(99) != "" || s.Field(1) != "" {
		t.Error("out-of-range fields are not empty")
	}
}
