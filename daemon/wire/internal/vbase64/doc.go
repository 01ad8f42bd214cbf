// Package vbase64 is segmentio/asm v1.2.1's base64 (MIT No Attribution,
// LICENSE in this directory): encoding/base64's standard alphabet with
// padding, vectorized with AVX2 on amd64 and NEON on arm64, the standard
// library doing short inputs, the tail of long ones, and other CPUs. The
// assembly is copied unchanged; Std and the CPU check are what differ.
//
// Why a copy: segmentio/asm finds its CPU's features through
// golang.org/x/sys/cpu, whose package init runs cpuid (it traps to the
// hypervisor on the machines measured: about 40-60 µs), and builds its
// encodings at init too. Every start of sous paid for that, a one-line
// recipe that never encodes a byte included. Here the encoding, and the
// AVX2 check with it, is made on first use.
package vbase64

import "sync"

const encodeStd = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// Std is the standard base64 encoding, with padding, made on first use.
var Std = sync.OnceValue(func() *Encoding { return newEncoding(encodeStd) })
