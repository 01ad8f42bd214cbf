package agent

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// minSDKURLRejecting is the first CLI version known to refuse --sdk-url for
// hosts other than Anthropic's.
var minSDKURLRejecting = [3]int{2, 1, 121}

// versionRE finds a CLI version number. Compiled on first use, not at
// init: every start of sous paid for it (docs/PERFORMANCE.md, the start
// row).
var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`) })

// explainStartFailure turns a failed start into an error that says what to
// do when the cause is a CLI that refuses local --sdk-url endpoints.
func (t *wsTransport) explainStartFailure(err error) error {
	stderr := t.stderr.String()
	if strings.Contains(stderr, "--sdk-url rejected") || strings.Contains(stderr, "not an approved Anthropic endpoint") {
		return fmt.Errorf("%w (Claude Code %s refuses it; versions from about 2.1.121 accept only Anthropic's hosts): use transport=\"stdio\": %v", ErrSDKURLRejected, cliVersion(t.l), err)
	}
	select {
	case <-t.connected:
		return err
	default:
	}
	// The CLI never connected. Its version tells whether it would have.
	v := cliVersion(t.l)
	if m := versionRE().FindStringSubmatch(v); m != nil {
		var got [3]int
		for i := range got {
			got[i], _ = strconv.Atoi(m[i+1])
		}
		if compareVersion(got, minSDKURLRejecting) >= 0 {
			return fmt.Errorf("%w (Claude Code %s; versions from about 2.1.121 accept only Anthropic's hosts): use transport=\"stdio\": %v", ErrSDKURLRejected, v, err)
		}
	}
	return fmt.Errorf("the CLI never connected to %s: %w", t.url, err)
}

func compareVersion(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// cliVersion runs the CLI with --version on the daemon ("unknown version"
// when that fails too).
func cliVersion(l launch) string {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var mu sync.Mutex
	var out bytes.Buffer
	args := append(append([]string(nil), l.cli[1:]...), "--version")
	spec := spawnSpec(l, "claude-version-"+uuid.NewString(), args, nil)
	p, err := l.client.Spawn(ctx, spec, func(f *wire.Frame) {
		if f.Stream != wire.Stdout {
			return
		}
		mu.Lock()
		if out.Len() < 4096 {
			out.Write(f.Data)
		}
		mu.Unlock()
	})
	if err != nil {
		return "unknown version"
	}
	if _, err := p.Wait(ctx); err != nil {
		p.KillAndWait(context.Background(), "KILL", time.Second, true)
		return "unknown version"
	}
	mu.Lock()
	defer mu.Unlock()
	// "2.1.330 (Claude Code)": the number is what matters.
	if v := versionRE().FindString(out.String()); v != "" {
		return v
	}
	return "unknown version"
}
