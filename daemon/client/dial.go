package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// DialFunc opens a new byte stream to the daemon.
type DialFunc func(ctx context.Context) (io.ReadWriteCloser, error)

// Dial connects to a daemon through dial, sending token with every request.
func Dial(ctx context.Context, dial DialFunc, token string, opt Options) (*Client, error) {
	return dialLinks(ctx, token, func(ctx context.Context, recv receiver) (link, error) {
		rwc, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		return newStreamLink(rwc, token, recv, opt.answerLimit()), nil
	}, opt)
}

// ErrNoToken and ErrTokenRefused say why a daemon turned a client away: it
// gave no token, or not the daemon's. The messages that wrap them advise
// the CLI's ways to give one; a caller with other ways (a recipe's
// host(token=...)) tells its own.
var (
	ErrNoToken      = errors.New("the daemon requires a token and none was given")
	ErrTokenRefused = errors.New("daemon refused the token")
)

// dialLinks makes a client whose connections come from dial: the first one
// now, the next ones when a connection drops. Only the link differs between
// transports; reconnecting, reattaching and stdin offsets are the client's.
// A refusal when no token was given (token is the links') is ErrNoToken.
func dialLinks(ctx context.Context, token string, dial func(ctx context.Context, recv receiver) (link, error), opt Options) (*Client, error) {
	c, err := firstLink(ctx, dial, opt)
	if token == "" && errors.Is(err, ErrTokenRefused) {
		return nil, fmt.Errorf("%w: set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN", ErrNoToken)
	}
	return c, err
}

// firstLink is dialLinks before the token check: the first connection,
// proven by a ping.
func firstLink(ctx context.Context, dial func(ctx context.Context, recv receiver) (link, error), opt Options) (*Client, error) {
	c := newClient(opt)
	c.dial = dial
	l, err := c.dial(ctx, c)
	if err != nil {
		return nil, err
	}
	c.cur = l
	close(c.ready)
	// Prove the daemon answers (and the token is right) before handing out
	// the client: a wrong token should fail here, in one clear line.
	if err := c.Call(ctx, "server.ping", nil, nil); err != nil {
		c.Close()
		var we *wire.Error
		var nc *notConnectedError
		switch {
		case errors.As(err, &we) && we.Code == wire.CodeUnauthorized:
			return nil, fmt.Errorf("%w (set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN to the daemon's token): %w", ErrTokenRefused, err)
		case errors.As(err, &nc):
			return nil, nc
		}
		return nil, err
	}
	return c, nil
}

// notConnectedError is why a first connection broke before the daemon
// answered: ssh that could not log in or run the bridge (in ssh's own
// words), a bridge with no daemon behind it, a socket closed at once.
type notConnectedError struct{ cause error }

func (e *notConnectedError) Error() string {
	const closed = "the connection closed before the daemon answered"
	switch {
	case e.cause == io.ErrUnexpectedEOF || e.cause == io.EOF:
		return closed
	case errors.Is(e.cause, io.ErrUnexpectedEOF), isConnErr(e.cause):
		return closed + ": " + e.cause.Error()
	}
	return e.cause.Error() // ssh's message says it all
}

func (e *notConnectedError) Unwrap() error { return e.cause }

// DialUnix connects to a daemon's Unix socket.
func DialUnix(ctx context.Context, path, token string, opt Options) (*Client, error) {
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, fmt.Errorf("connect to daemon at %s: %w", path, err)
		}
		return conn, nil
	}
	c, err := Dial(ctx, dial, token, opt)
	var nc *notConnectedError
	if errors.As(err, &nc) {
		return nil, fmt.Errorf("connect to daemon at %s: %w", path, err)
	}
	return c, err
}
