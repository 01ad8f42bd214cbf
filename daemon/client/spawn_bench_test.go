package client_test

import (
	"context"
	"os/exec"
	"strconv"
	"testing"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
)

// BenchmarkSpawnExit spawns /bin/true and waits for its exit frame, one at
// a time: through the embedded daemon and through one on a Unix socket
// (daemon and client both in this process, so that one CPU profile holds
// both sides), beside os/exec's Run of the same. x-os-exec is each path's
// time as a multiple of os/exec's, timed interleaved.
func BenchmarkSpawnExit(b *testing.B) {
	ctx := context.Background()
	_, emb := embeddedDaemon(b)
	sock, err := client.DialUnix(ctx, startDaemon(b, daemon.Config{}), testToken, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer sock.Close()
	i := 0
	spawn := func(c *client.Client) {
		i++
		p, err := c.Spawn(ctx, client.SpawnSpec{ID: "t" + strconv.Itoa(i%64), Command: "/bin/true"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(ctx); err != nil || code != 0 {
			b.Fatalf("wait: %d %v", code, err)
		}
	}
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"os-exec", func() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}},
		{"embedded", func() { spawn(emb) }},
		{"socket", func() { spawn(sock) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				c.run()
			}
		})
	}
}
