package webui

import (
	"fmt"
	"net"
	"strconv"
)

// ListenAddr turns a --ui value into the address to listen on. HOST:PORT
// is taken as it is ("0.0.0.0:8080" serves every interface, on purpose);
// a bare ":PORT" means loopback, 127.0.0.1:PORT, so that a page which
// answers permission requests is never reachable from the network unless
// a host was named. Port 0 picks a free port.
func ListenAddr(value string) (string, error) {
	host, port, err := net.SplitHostPort(value)
	if err != nil {
		return "", fmt.Errorf("--ui %q: want HOST:PORT or :PORT (e.g. 127.0.0.1:0): %v", value, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("--ui %q: the port must be a number from 0 to 65535", value)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}
