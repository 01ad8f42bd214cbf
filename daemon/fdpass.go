package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/proc"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// A client on a Unix socket may pass descriptors with a request line
// (SCM_RIGHTS): process.spawn's mirror (process.spawn.mirror and its .stdin
// and .direct). The
// kernel hands them over with a read that ends within the bytes of the
// sendmsg that carried them, never past them, and a client sends the line in
// one sendmsg (its first one, should the line take two): so the last byte of
// that read belongs to the line, and the descriptors to whichever line holds
// that byte. Nothing else binds descriptors to requests.

// maxPendingFDs bounds the descriptors held for lines not yet complete: a
// client that sends descriptors with every byte of a long line cannot make
// the daemon hold more. A spawn passes three at most.
const maxPendingFDs = 4

// fdReader reads a Unix socket connection, keeping the descriptors that
// arrive with its bytes, each marked with the stream offset of the last
// byte read with it.
type fdReader struct {
	uc      *net.UnixConn
	oob     []byte
	off     int64 // bytes read so far
	pending []markedFD
}

type markedFD struct {
	fd   int
	mark int64
}

func newFDReader(uc *net.UnixConn) *fdReader {
	// Room for maxPendingFDs at once; the kernel closes what does not fit
	// (and says MSG_CTRUNC, which changes nothing here).
	return &fdReader{uc: uc, oob: make([]byte, unix.CmsgSpace(4*maxPendingFDs))}
}

func (r *fdReader) Read(b []byte) (int, error) {
	n, oobn, _, _, err := r.uc.ReadMsgUnix(b, r.oob) // MSG_CMSG_CLOEXEC on Linux
	switch {
	case n < 0: // recvmsg's -1 with an error
		n = 0
	case n == 0 && err == nil && len(b) > 0:
		err = io.EOF // ReadMsgUnix reports the peer's close as an empty read
	}
	r.off += int64(n)
	if oobn > 0 {
		r.keep(r.oob[:oobn], r.off-1)
	}
	return n, err
}

// keep takes the descriptors in a control message, closing those beyond
// maxPendingFDs.
func (r *fdReader) keep(oob []byte, mark int64) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if len(r.pending) >= maxPendingFDs {
				unix.Close(fd)
				continue
			}
			r.pending = append(r.pending, markedFD{fd, mark})
		}
	}
}

// take returns, as files the caller owns, the descriptors that came with
// the line spanning stream offsets [start, end), and closes those of earlier
// lines, which no request claimed.
func (r *fdReader) take(start, end int64) []*os.File {
	var files []*os.File
	r.pending = slices.DeleteFunc(r.pending, func(m markedFD) bool {
		switch {
		case m.mark < start:
			unix.Close(m.fd)
		case m.mark < end:
			files = append(files, os.NewFile(uintptr(m.fd), "passed"))
		default:
			return false // a later line's
		}
		return true
	})
	return files
}

// closeAll closes the descriptors no line took.
func (r *fdReader) closeAll() {
	for _, m := range r.pending {
		unix.Close(m.fd)
	}
	r.pending = nil
}

// filePasser is a transport that carries descriptors with requests (a Unix
// socket): passed returns those that came with the line next last returned;
// the caller owns them.
type filePasser interface {
	passed() []*os.File
}

// passedFiles are the descriptors that came with one request, for its
// handler to claim; what it does not claim is closed once the request is
// handled.
type passedFiles struct {
	files []*os.File
}

type passedFilesKey struct{}

// withPassedFiles attaches the request's files to its context, and returns
// the function that closes what the handler did not claim.
func withPassedFiles(ctx context.Context, files []*os.File) (context.Context, func()) {
	if len(files) == 0 {
		return ctx, func() {}
	}
	pf := &passedFiles{files: files}
	return context.WithValue(ctx, passedFilesKey{}, pf), pf.closeUnclaimed
}

// claimPassedFiles hands the request's descriptors to the caller.
func claimPassedFiles(ctx context.Context) []*os.File {
	pf, _ := ctx.Value(passedFilesKey{}).(*passedFiles)
	if pf == nil {
		return nil
	}
	files := pf.files
	pf.files = nil
	return files
}

func (pf *passedFiles) closeUnclaimed() {
	closeFiles(pf.files)
	pf.files = nil
}

// mirrorKinds says which kinds of passed descriptor a spawn may use: a
// stdin (process.spawn.mirror.stdin), output that is the child's own
// (process.spawn.mirror.direct), output files the daemon writes
// (process.spawn.mirror.files).
type mirrorKinds struct{ stdin, direct, files bool }

// passedMirror builds a spawn's mirror from the descriptors passed with its
// request, one per name in streams: a pipe for "stdout" and "stderr" (with
// direct, a pipe or regular file open for writing; with files, also a
// regular file open for writing or the null device), a pipe or regular
// file open for reading for "stdin". The caller owns the result's files
// (closeMirror).
func passedMirror(ctx context.Context, streams []string, direct bool, kinds mirrorKinds) (mirror.Spec, error) {
	files := claimPassedFiles(ctx)
	m, err := mirrorOf(files, streams, direct, kinds)
	if err != nil {
		closeFiles(files)
		return mirror.Spec{}, err
	}
	return m, nil
}

func mirrorOf(files []*os.File, streams []string, direct bool, kinds mirrorKinds) (mirror.Spec, error) {
	m := mirror.Spec{Direct: direct && kinds.direct}
	if len(streams) > 3 {
		return mirror.Spec{}, wire.InvalidParams("mirror: at most stdout, stderr and stdin")
	}
	if len(files) != len(streams) {
		return mirror.Spec{}, wire.InvalidParams(fmt.Sprintf("mirror: %d streams named but %d descriptors passed with the request "+
			"(they travel as SCM_RIGHTS over a Unix socket)", len(streams), len(files)))
	}
	for i, name := range streams {
		var slot **os.File
		switch name {
		case "stdout":
			slot = &m.Stdout
		case "stderr":
			slot = &m.Stderr
		case "stdin":
			if kinds.stdin {
				slot = &m.Stdin
				break
			}
			fallthrough
		default:
			want := "stdout or stderr"
			if kinds.stdin {
				want = "stdout, stderr or stdin"
			}
			return mirror.Spec{}, wire.InvalidParams(fmt.Sprintf("mirror: unknown stream %q (want %s)", name, want))
		}
		if *slot != nil {
			return mirror.Spec{}, wire.InvalidParams(fmt.Sprintf("mirror: %s named twice", name))
		}
		switch {
		case name == "stdin":
			if !passableFile(files[i], unix.O_WRONLY) {
				return mirror.Spec{}, wire.InvalidParams("mirror: the descriptor for stdin is not a pipe or regular file open for reading")
			}
		case m.Direct:
			if !passableFile(files[i], unix.O_RDONLY) {
				return mirror.Spec{}, wire.InvalidParams(fmt.Sprintf("mirror: the descriptor for %s is not a pipe or regular file open for writing", name))
			}
		case mirror.IsPipe(files[i]):
		case !kinds.files:
			return mirror.Spec{}, wire.InvalidParams(fmt.Sprintf("mirror: the descriptor for %s is not a pipe", name))
		case !mirror.IsFileOrNull(files[i]) || !openNot(files[i], unix.O_RDONLY):
			return mirror.Spec{}, wire.InvalidParams(fmt.Sprintf("mirror: the descriptor for %s is not a pipe, a regular file open for writing or the null device", name))
		}
		*slot = files[i]
	}
	return m, nil
}

// closeMirrorWhenDone closes a passed mirror's files once p's output is all
// read, or once the session ends first: the spawner is gone then, and the
// pipe's reader must see its end when the spawner's own copy closes, not
// when the child exits. A tee into a closed mirror fails, and the rest of
// the output is read unmirrored.
func closeMirrorWhenDone(se *Session, p *proc.Process, m mirror.Spec) {
	select {
	case <-p.Done():
	case <-se.ctx.Done():
	}
	closeMirror(m)
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func closeMirror(m mirror.Spec) {
	closeFiles([]*os.File{m.Stdout, m.Stderr, m.Stdin}) // Close on a nil *os.File is a no-op error
}

// passableFile reports whether f can be one of a child's stdio descriptors
// as it is (mirror.IsPipeOrRegular), not open with the access mode wrongMode
// (O_WRONLY for a stdin, O_RDONLY for an output).
func passableFile(f *os.File, wrongMode int) bool {
	return mirror.IsPipeOrRegular(f) && openNot(f, wrongMode)
}

// openNot reports whether f is open with an access mode other than
// wrongMode.
func openNot(f *os.File, wrongMode int) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	flags := -1
	_ = rc.Control(func(fd uintptr) { flags, _ = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	return flags >= 0 && flags&unix.O_ACCMODE != wrongMode
}
