//go:build !purego

package vbase64

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// The copy decides as segmentio/asm did, through golang.org/x/sys/cpu.
func TestHasAVX2IsXSysCPUs(t *testing.T) {
	if !cpu.X86.HasAVX2 && !hasAVX2() {
		t.Log("this CPU has no AVX2: the vector code is not exercised here")
	}
	if got, want := hasAVX2(), cpu.X86.HasAVX2; got != want {
		t.Fatalf("hasAVX2() = %v, golang.org/x/sys/cpu says %v", got, want)
	}
	if e := Std(); hasAVX2() && (e.enc == nil || e.dec == nil) {
		t.Fatal("Std has no vector code on a CPU with AVX2")
	}
}
