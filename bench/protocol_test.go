package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The rows of this file are the paths where a child's output crosses the
// socket as frames, which is what ssh, WebSocket,
// recipes' spawn and lines(), agent sessions and any other protocol client
// take. The exec-socket row passes `sous exec`'s pipe to the daemon instead,
// so its bytes never cross the socket. The client asks every daemon that
// offers it for binary frames (connection.binaryFrames: a JSON header line
// with "dataBytes", then the raw bytes), so these rows measure those;
// before it they were base64 in JSON lines.

// socketFrames times `sous exec --socket` into /dev/null and into a file:
// the daemon writes the child's output to exec's stdout itself
// (process.spawn.mirror.files), and exec gets its frames marked, without
// data. (Before that extension every byte came over the socket as a frame
// and exec wrote it out: the protocol client's row measures that path.)
// Each through a daemon with the default flags (replay
// past the 4 MiB memory window spilled to disk) and one with
// --replay-disk-limit 0, against the pipe, `head -c` writing the same file
// itself and the disk's direct write, all timed back to back in each repeat.
func (e *env) socketFrames(t *testing.T) row {
	size := strconv.FormatInt(e.bytes, 10)
	d := e.startDaemon(t)
	nd := e.startDaemon(t, "--replay-disk-limit", "0")
	tok := "SOUS_TOKEN=" + d.token
	out := filepath.Join(e.dir, "out")
	pipe := "head -c " + size + " /dev/zero | cat > /dev/null"
	exec := func(sock, to string) string {
		return e.bin + " exec --socket " + sock + " -- head -c " + size + " /dev/zero > " + to
	}
	diskFile := filepath.Join(e.dir, "disk")
	disk := directWrite(diskFile, size)
	// What the file costs by itself: head writing it, no sous between.
	fileAlone := "head -c " + size + " /dev/zero > " + out
	var null, nullNoSpill, file, fileNoSpill, alone, direct, spill []float64
	var pipeTimes, nullTimes []time.Duration
	for range e.repeats {
		tpd, tnd := timeShell(t, pipe), timeShell(t, exec(d.socket, "/dev/null"), tok)
		pipeTimes, nullTimes = append(pipeTimes, tpd), append(nullTimes, tnd)
		tp, tn := tpd.Seconds(), tnd.Seconds()
		tnn := timeShell(t, exec(nd.socket, "/dev/null"), tok).Seconds()
		tf := timeWrite(t, exec(d.socket, out), out, tok).Seconds()
		tfn := timeWrite(t, exec(nd.socket, out), out, tok).Seconds()
		td := timeWrite(t, disk, diskFile).Seconds()
		alone = append(alone, tp/timeWrite(t, fileAlone, out).Seconds())
		null, nullNoSpill = append(null, tp/tn), append(nullNoSpill, tp/tnn)
		file, fileNoSpill = append(file, tp/tf), append(fileNoSpill, tp/tfn)
		direct = append(direct, tp/td)
		spill = append(spill, tn/tnn)
	}
	ratio := min(medianFloat(null), medianFloat(file))
	return row{
		figure:   "`sous exec --socket` streaming " + human(e.bytes) + " into /dev/null and into a file: the daemon writes the output to exec's stdout itself (`process.spawn.mirror.files`), exec's frames marked without data",
		baseline: "`head -c` into a pipe",
		target:   ">= 0.5 of the pipe; spilling at most 15% over `--replay-disk-limit 0`",
		result: fmt.Sprintf("/dev/null %.2fx (%.0f MB/s; the pipe %.0f MB/s), a file %.2fx (default flags); with `--replay-disk-limit 0`: %.2fx, %.2fx; "+
			"the spill's cost into /dev/null: %.2fx the time without it; `head -c` writing the file itself: %.2fx; "+
			"the disk alone (`dd oflag=direct`): %.2fx",
			medianFloat(null), rate(e.bytes, nullTimes), rate(e.bytes, pipeTimes), medianFloat(file), medianFloat(nullNoSpill), medianFloat(fileNoSpill),
			medianFloat(spill), medianFloat(alone), medianFloat(direct)),
		ok: ratio >= 0.5 && medianFloat(spill) <= 1.15,
	}
}

// protocolClient times a Go protocol client (daemon/client over the Unix
// socket) that spawns `head -c N /dev/zero` and decodes every frame, through
// a daemon with the default flags and one with --replay-disk-limit 0,
// against the pipe, back to back in each repeat.
func (e *env) protocolClient(t *testing.T) row {
	size := strconv.FormatInt(e.bytes, 10)
	pipe := "head -c " + size + " /dev/zero | cat > /dev/null"
	d := e.startDaemon(t)
	nd := e.startDaemon(t, "--replay-disk-limit", "0")
	var dflt, noSpill []float64
	var times, pipeTimes []time.Duration
	for i := range e.repeats {
		tp := timeShell(t, pipe)
		pipeTimes = append(pipeTimes, tp)
		td := e.readSpawn(t, d, "p"+strconv.Itoa(i), size)
		tn := e.readSpawn(t, nd, "p"+strconv.Itoa(i), size)
		dflt, noSpill = append(dflt, tp.Seconds()/td.Seconds()), append(noSpill, tp.Seconds()/tn.Seconds())
		times = append(times, td)
	}
	ratio := medianFloat(dflt)
	return row{
		figure:   "a Go protocol client (`daemon/client`) reading a child's " + human(e.bytes) + " over the Unix socket as binary frames (a JSON header line, then the raw bytes), every frame parsed",
		baseline: "`head -c` into a pipe",
		target:   ">= 0.5 of the pipe",
		result: fmt.Sprintf("%.2fx (%.0f MB/s, default flags; the pipe %.0f MB/s); with `--replay-disk-limit 0`: %.2fx",
			ratio, rate(e.bytes, times), rate(e.bytes, pipeTimes), medianFloat(noSpill)),
		ok: ratio >= 0.5,
	}
}

// readSpawn spawns `head -c size /dev/zero` through d with a client of its
// own, counts the bytes of every frame and returns the time from dialling
// to the exit frame.
func (e *env) readSpawn(t *testing.T, d *daemonProc, id, size string) time.Duration {
	ctx := context.Background()
	start := time.Now()
	c, err := client.DialUnix(ctx, d.socket, d.token, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got int64
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: id, Command: "head", Args: []string{"-c", size, "/dev/zero"}},
		func(f *wire.Frame) {
			if f.Stream == wire.Stdout {
				got += int64(len(f.Data))
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("spawn: exit %d, %v", code, err)
	}
	el := time.Since(start)
	if strconv.FormatInt(got, 10) != size {
		t.Fatalf("read %d bytes, want %s", got, size)
	}
	return el
}
