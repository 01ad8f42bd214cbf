package daemon

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// process.stdin requests sent back to back on one connection, without
// waiting for answers, are applied in the order sent: none is refused as a
// gap although they are handled concurrently, and the child reads the
// bytes in order. Requests for two processes interleave, and a short one
// (parsed by the connection's reader) follows long ones (parsed by their
// handlers). A real gap is still refused, and at once.
func TestStdinPipelinedInOrder(t *testing.T) {
	d := startDaemon(t, Config{})
	c := d.dial()
	dir := t.TempDir()
	var want [2][]byte
	for i := range want {
		c.result("process.spawn", fmt.Sprintf(`{"id":"p%d","command":"sh","args":["-c","cat > %s"]}`, i, filepath.Join(dir, strconv.Itoa(i))))
	}
	// All in one write, so that the reader finds them waiting and starts
	// their handlers back to back.
	var (
		ids   []int
		off   [2]int
		lines []byte
	)
	for k := range 60 {
		i := k / 3 % 2 // three in a row for each process
		n := 300 << 10 // a long line
		if k%3 == 2 {
			n = 100 // a short one, after two long ones for the same process
		}
		data := make([]byte, n)
		rand.Read(data)
		want[i] = append(want[i], data...)
		c.mu.Lock()
		c.nextID++
		id := c.nextID
		c.mu.Unlock()
		ids = append(ids, id)
		lines = append(lines, requestLine(id, "process.stdin", fmt.Sprintf(`{"id":"p%d","data":%q,"offset":%d}`, i, base64.StdEncoding.EncodeToString(data), off[i]))...)
		off[i] += n
	}
	c.send(string(lines))
	for k, id := range ids {
		resp := c.respFor(strconv.Itoa(id))
		if !bytes.Contains(resp, []byte(`"success":true`)) || bytes.Contains(resp, []byte(`duplicate`)) {
			t.Fatalf("request %d: %s", k, resp)
		}
	}
	c.wantError("process.stdin", fmt.Sprintf(`{"id":"p0","data":"eA==","offset":%d}`, off[0]+1), -32003, "stdin offset gap: offset ahead of applied bytes")
	for i := range want {
		c.result("process.stdin", fmt.Sprintf(`{"id":"p%d","data":"","offset":%d,"close":true}`, i, off[i]))
		c.waitExit("p" + strconv.Itoa(i))
		got, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[i]) {
			t.Errorf("p%d read %d bytes, not the %d sent in order", i, len(got), len(want[i]))
		}
	}
}
