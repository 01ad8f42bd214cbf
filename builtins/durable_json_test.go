package builtins

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// checkKeptResultJSON fails t unless appendJSON makes json.Marshal's bytes.
func checkKeptResultJSON(t *testing.T, k keptResult) {
	t.Helper()
	testutil.EncodesAsMarshal(t, k, func(dst []byte) []byte { return k.appendJSON(dst) })
}

func TestKeptResultJSONMatchesEncodingJSON(t *testing.T) {
	for _, k := range []keptResult{
		{},
		{Status: "ok", Duration: 1500 * time.Microsecond},
		{Status: "failed", ExitCode: -1, Stdout: []byte("out\n"), Stderr: []byte("\x00\xff<&>"), StdoutTruncated: true,
			StderrTruncated: true, Duration: -5, Timeout: time.Second, Signal: 9,
			Stages: []keptStage{{ExitCode: 1}, {ExitCode: 0, Stderr: []byte("e")}}},
		{Status: "\u2028\"", Stdout: []byte{}, Stages: []keptStage{}},
	} {
		checkKeptResultJSON(t, k)
	}
	// A Result gives the journal its JSON, which keepValue keeps as it is,
	// rather than a struct for encoding/json's reflection.
	if _, data, err := (&Result{status: "ok", stdout: "hi\n"}).Record(); err != nil {
		t.Fatal(err)
	} else if _, ok := data.(json.RawMessage); !ok {
		t.Errorf("Result.Record gives a %T, not its JSON", data)
	}
}

// FuzzKeptResultJSON: whatever a Result holds, the hand-written encoder
// writes what encoding/json writes, and its output reads back the same
// (the status is text sous writes; invalid UTF-8 reads back as U+FFFD).
func FuzzKeptResultJSON(f *testing.F) {
	f.Add("ok", 0, []byte("hi\n"), []byte(nil), false, int64(1234), 0, 0)
	f.Add("timeout", 137, []byte{0xff}, []byte("<>"), true, int64(-1), 2, 15)
	f.Fuzz(func(t *testing.T, status string, code int, stdout, stderr []byte, truncated bool, d int64, stages, signal int) {
		k := keptResult{Status: status, ExitCode: code, Stdout: stdout, Stderr: stderr, StdoutTruncated: truncated,
			StderrTruncated: !truncated && len(stderr) > 3, Duration: time.Duration(d), Timeout: time.Duration(d >> 2), Signal: signal}
		for i := range stages % 4 {
			k.Stages = append(k.Stages, keptStage{ExitCode: code + i, Stderr: stderr[:len(stderr)*i/4]})
		}
		checkKeptResultJSON(t, k)
		var back keptResult
		if err := json.Unmarshal(k.appendJSON(nil), &back); err != nil {
			t.Fatal(err)
		}
		if string(back.Stdout) != string(k.Stdout) || back.Duration != k.Duration || len(back.Stages) != len(k.Stages) {
			t.Fatalf("read back %+v, was %+v", back, k)
		}
	})
}
