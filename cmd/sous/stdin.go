package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// feedStdin gives a command sous follows (not --tty) sous's stdin: nothing
// to do when the daemon passed it on as the command's own, or when it is a
// terminal, which sous exec does not forward without --tty (the spawn
// closed the command's stdin: client.SpawnSpec.StdinClosed); forwarded
// when it is a pipe or file the daemon could not take.
func feedStdin(ctx context.Context, p *client.Proc, streams *IO) {
	switch {
	case p.StdinPassed():
		// The child reads sous's stdin itself, as with a shell's
		// redirection: nothing to forward.
	case streams.IsStdinTTY():
		// Not forwarded: closed by the spawn.
	default:
		go forwardStdin(ctx, p, streams.In, streams.ErrOut)
	}
}

// forwardStdin copies r to the process's stdin, with offsets, then closes it
// (the process.stdin path: a terminal, a socket, or a link that cannot pass
// descriptors).
func forwardStdin(ctx context.Context, p *client.Proc, r io.Reader, errOut io.Writer) {
	const (
		readSize  = 256 << 10
		readAhead = 8       // reads waiting to be written
		batchSize = 2 << 20 // at most what one Write takes
	)
	type piece struct {
		b   []byte
		err error
	}
	pieces, free := make(chan piece, readAhead), make(chan []byte, readAhead)
	// Reading goes on while a Write waits for its answers, and the next
	// Write takes whatever came meanwhile: over a link with a round trip,
	// the requests of one Write are in flight together (client.Proc.Write),
	// where a Write per read waited a round trip each.
	go func() {
		for {
			var buf []byte
			select {
			case buf = <-free:
			default:
				buf = make([]byte, readSize)
			}
			n, err := r.Read(buf[:readSize])
			select {
			case pieces <- piece{buf[:n], err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// A buffer goes back for the reader to fill again, unless enough wait
	// there already (the reader may be done).
	recycle := func(b []byte) {
		select {
		case free <- b:
		default:
		}
	}
	batch := make([]byte, 0, batchSize)
	for {
		var pc piece
		select {
		case pc = <-pieces:
		case <-ctx.Done():
			return
		}
		batch = append(batch[:0], pc.b...)
		recycle(pc.b)
		err := pc.err
	gather:
		for err == nil && len(batch) < batchSize-readSize {
			select {
			case more := <-pieces:
				batch = append(batch, more.b...)
				recycle(more.b)
				err = more.err
			default:
				break gather
			}
		}
		if len(batch) > 0 {
			if _, werr := p.Write(ctx, batch); werr != nil {
				if !errors.Is(werr, context.Canceled) && !isNotRunning(werr) {
					fmt.Fprintln(errOut, "sous: stdin:", werr)
				}
				return
			}
		}
		if err != nil {
			if cerr := p.CloseStdin(ctx); cerr != nil && !isNotRunning(cerr) {
				fmt.Fprintln(errOut, "sous: stdin:", cerr)
			}
			return
		}
	}
}
