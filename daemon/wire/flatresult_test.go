package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzFlatResults: the one-pass readers of the small answers read what
// encoding/json reads, into a struct that held values before, and refuse
// what it refuses. They are called as a client calls them, without
// encoding/json's check of the input first.
func FuzzFlatResults(f *testing.F) {
	for _, s := range []string{
		`{"success":true,"pid":4242,"startTime":1764228601.123456}`, `{"success":false}`, `{}`,
		`{"success":true,"applied":1048576}`, `{"success":true,"applied":3,"duplicate":true}`, `{"count":12}`,
		`{"count":-3}`, `{"count":012}`, `{"count":+1}`, `{"count":1.5}`, `{"count":}`, `{"count": 7}`,
		`{"count":99999999999999999999}`, `{"count":1,"x":2}`, `{"count":1,"count":2}`, `{"COUNT":4}`,
		`{"pid":null}`, `{"startTime":1e400}`, `{"startTime":-0.5E+3}`, `{"startTime":0x10}`, `{"startTime":inf}`,
		`{"success":true,}`, `{,}`, `{"success":tru}`, `{"pid":"7"}`, `{"a":"x,y","pid":1}`, `[1]`, `{"success":true}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFlat(t, b, SpawnResult{Pid: 9, StartTime: 1.5}, func(v *SpawnResult) error { return v.UnmarshalJSON(b) },
			func(v *SpawnResult) error { type fields SpawnResult; return json.Unmarshal(b, (*fields)(v)) })
		checkFlat(t, b, StdinResult{Applied: 7, Duplicate: true}, func(v *StdinResult) error { return v.UnmarshalJSON(b) },
			func(v *StdinResult) error { type fields StdinResult; return json.Unmarshal(b, (*fields)(v)) })
		checkFlat(t, b, RunAppendResult{Count: 5}, func(v *RunAppendResult) error { return v.UnmarshalJSON(b) },
			func(v *RunAppendResult) error { type fields RunAppendResult; return json.Unmarshal(b, (*fields)(v)) })
	})
}

// checkFlat fails t unless fast and std leave a copy of start alike, and
// fail alike.
func checkFlat[T any](t *testing.T, b []byte, start T, fast, std func(*T) error) {
	t.Helper()
	got, want := start, start
	gerr, werr := fast(&got), std(&want)
	if (gerr != nil) != (werr != nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: read %+v (%v), encoding/json %+v (%v)", b, got, gerr, want, werr)
	}
}

// TestFlatResultsTakeTheShortPath: the layouts a daemon writes are read in
// one pass, which allocates nothing but the result (it escapes through the
// fallback); encoding/json, which the readers fall back to, allocates more.
func TestFlatResultsTakeTheShortPath(t *testing.T) {
	for _, c := range []struct {
		answer    string
		read, std func([]byte) error
	}{
		{`{"success":true,"pid":4242,"startTime":1764228601.123456}`,
			func(b []byte) error { var r SpawnResult; return r.UnmarshalJSON(b) },
			func(b []byte) error { type fields SpawnResult; var r fields; return json.Unmarshal(b, &r) }},
		{`{"success":true,"applied":1048576}`,
			func(b []byte) error { var r StdinResult; return r.UnmarshalJSON(b) },
			func(b []byte) error { type fields StdinResult; var r fields; return json.Unmarshal(b, &r) }},
		{`{"count":3}`,
			func(b []byte) error { var r RunAppendResult; return r.UnmarshalJSON(b) },
			func(b []byte) error { type fields RunAppendResult; var r fields; return json.Unmarshal(b, &r) }},
	} {
		b := []byte(c.answer)
		if err := c.read(b); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		fast := testing.AllocsPerRun(50, func() { c.read(b) })
		std := testing.AllocsPerRun(50, func() { c.std(b) })
		if fast > 1 || fast >= std {
			t.Errorf("%s: %.0f allocations a read, encoding/json %.0f: not the one-pass reader", b, fast, std)
		}
	}
}
