package streamlog

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// The large write buffers of a sustained spill ask for transparent huge
// pages (where the kernel offers them at all), and are page aligned, as
// direct writes need, and whole.
func TestStreamWriteBufferAsksForHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skip("no transparent huge pages here")
	}
	b := writeBuffer(streamWriteSize)
	defer freeBuffer(b)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b[:1])))
	if len(b) != 0 || cap(b) != streamWriteSize || addr%blockSize != 0 {
		t.Fatalf("buffer len %d cap %d at %#x", len(b), cap(b), addr)
	}
	b = b[:cap(b)]
	for i := range b {
		b[i] = byte(i)
	}
	if got := smapsField(t, addr, "THPeligible:"); got != "1" {
		t.Fatalf("THPeligible %q, want 1", got)
	}
}

// smapsField returns a field of the mapping holding addr in
// /proc/self/smaps.
func smapsField(t *testing.T, addr uintptr, field string) string {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			in = lo <= addr && addr < hi
			continue
		}
		if v, ok := strings.CutPrefix(line, field); ok && in {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s for %#x in /proc/self/smaps", field, addr)
	return ""
}
