package runtime

import (
	"crypto/rand"
	"unsafe"

	"golang.org/x/sys/unix"
)

// randomBytes fills b from the getrandom(2) system call itself: the source
// crypto/rand reads, without what crypto/rand and the runtime's vDSO
// getrandom set up on their first use (a state mapping and a watchdog
// timer), which was about 2% of the time a one-line recipe takes to run
// (docs/PERFORMANCE.md, the start row). unix.Getrandom would take the vDSO.
func randomBytes(b []byte) {
	if len(b) == 0 {
		return
	}
	got, _, errno := unix.Syscall(unix.SYS_GETRANDOM, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0)
	if errno != 0 || int(got) != len(b) {
		rand.Read(b) // never fails (crypto/rand)
	}
}
