//go:build unix

package runtime

import (
	"io/fs"
	"syscall"

	"github.com/seed5ad92d46/sous/internal/eintr"
)

// readSource reads a recipe file as os.ReadFile does, with the same
// errors, but without an *os.File: os.Open hands every file it opens to
// the runtime's network poller, and the first one starts the poller (an
// epoll instance, an eventfd, and a poll in the scheduler's every look
// for work from then on), which a run that starts no process and opens no
// socket needs for nothing else (docs/PERFORMANCE.md, "The start of `sous
// run`").
func readSource(path string) ([]byte, error) {
	var fd int
	err := eintr.Retry(func() (err error) {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	size := 512 // os.ReadFile's least first buffer
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) == nil && int(st.Size)+1 > size {
		size = int(st.Size) + 1 // +1: the read that finds the end
	}
	data := make([]byte, 0, size)
	for {
		var n int
		err := eintr.Retry(func() (err error) {
			n, err = syscall.Read(fd, data[len(data):cap(data)])
			return err
		})
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return data, nil
		}
		data = data[:len(data)+n]
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}
