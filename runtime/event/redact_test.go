package event

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// outputOf collects what a bus's sinks see: the data of every output
// event, per process and stream, and every event.
type outputOf struct {
	data   map[streamKey]*bytes.Buffer
	events []Event
}

func collect(b *Bus) *outputOf {
	o := &outputOf{data: map[streamKey]*bytes.Buffer{}}
	b.Subscribe(SinkFunc(func(_ time.Time, e Event) {
		if out, ok := e.(*Output); ok {
			k := streamKey{out.ID, out.Stream}
			if o.data[k] == nil {
				o.data[k] = &bytes.Buffer{}
			}
			o.data[k].Write(out.Data)
			c := *out
			c.Data = bytes.Clone(out.Data)
			e = &c
		}
		o.events = append(o.events, e)
	}))
	return o
}

func (o *outputOf) stream(id string, s wire.Stream) string {
	if b := o.data[streamKey{id, s}]; b != nil {
		return b.String()
	}
	return ""
}

// TestRedactSplitSecret: a secret written in two chunks, cut anywhere, is
// replaced; the lines around it are left as they are, and the event that
// follows a held-back piece says it goes on a line already started.
func TestRedactSplitSecret(t *testing.T) {
	const secret = "tok-3f9a2c"
	whole := "before\nthe token is " + secret + " ok\nafter\n"
	for cut := 0; cut <= len(whole); cut++ {
		b := New(nil)
		o := collect(b)
		b.Redact(secret)
		b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: []byte(whole[:cut])})
		b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: []byte(whole[cut:])})
		b.Publish(&EchoEnd{ID: "a"})
		want := "before\nthe token is *** ok\nafter\n"
		if got := o.stream("a", wire.Stdout); got != want {
			t.Fatalf("cut at %d: got %q, want %q", cut, got, want)
		}
	}
}

// TestRedactHeldPieceFlags: when the bus holds back the start of a
// secret, the event that ends the line says MidLine, and the end of a
// stream lets out what was held (a Last event ends the line).
func TestRedactHeldPieceFlags(t *testing.T) {
	b := New(nil)
	o := collect(b)
	b.Redact("secret-value")
	b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: []byte("x secr")})
	b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: []byte("ets\n"), MidLine: true})
	b.Publish(&Output{ID: "a", Stream: wire.Stderr, Data: []byte("tail secret-va")})
	b.Publish(&EchoEnd{ID: "a"})
	var outs []*Output
	for _, e := range o.events {
		if out, ok := e.(*Output); ok {
			outs = append(outs, out)
		}
	}
	want := []Output{
		{ID: "a", Stream: wire.Stdout, Data: []byte("x ")},
		{ID: "a", Stream: wire.Stdout, Data: []byte("secrets\n"), MidLine: true},
		{ID: "a", Stream: wire.Stderr, Data: []byte("tail ")},
		{ID: "a", Stream: wire.Stderr, Data: []byte("secret-va"), MidLine: true, Last: true},
	}
	if len(outs) != len(want) {
		t.Fatalf("got %d output events, want %d: %+v", len(outs), len(want), outs)
	}
	for i, w := range want {
		g := outs[i]
		if g.Stream != w.Stream || string(g.Data) != string(w.Data) || g.MidLine != w.MidLine || g.Last != w.Last {
			t.Errorf("event %d: got %+v (%q), want %+v (%q)", i, *g, g.Data, w, w.Data)
		}
	}
	if _, ok := o.events[len(o.events)-1].(*EchoEnd); !ok {
		t.Errorf("the held piece went out after EchoEnd: %+v", o.events)
	}
}

// TestRedactEvents: every event with the recipe's text in it goes out
// redacted (JSON messages stay JSON), and the publisher's event is not
// changed.
func TestRedactEvents(t *testing.T) {
	const secret = `s3cr"et`
	b := New(nil)
	o := collect(b)
	if b.Redact("abc") {
		t.Error("a 3-byte value was registered")
	}
	if !b.Redact(secret) {
		t.Fatal("Redact refused the secret")
	}
	msg, _ := json.Marshal(map[string]any{"type": "assistant", "text": "use " + secret})
	log := &Log{Text: "the token " + secret}
	b.Publish(log)
	b.Publish(&Error{Text: "Error: fail: " + secret})
	b.Publish(&Failure{Text: "defer: " + secret})
	b.Publish(&Spawn{ID: "p", Command: []string{"curl", "-H", "Authorization: " + secret}})
	b.Publish(&Agent{Session: "s", Dir: "in", Message: msg})
	b.Publish(&Agent{Session: "s", Dir: "in", Message: json.RawMessage(`{"n": s3cr"et}`)})
	b.Publish(&Approval{Tool: "Bash", Summary: "echo " + secret, Message: secret})
	input := map[string]any{"command": "echo " + secret, "env": []any{secret, 1}}
	b.Publish(&Pending{Approval{ID: "a1", Tool: "Bash", Summary: "echo", Description: "print " + secret, Input: input}})
	b.Publish(&Hook{Event: "Stop", Summary: secret, Output: msg})
	b.Publish(&End{Status: "failed", Error: "fail: " + secret, Source: "fail(" + secret + ")"})
	if log.Text != "the token "+secret || input["command"] != "echo "+secret {
		t.Errorf("the publisher's event changed: %q", log.Text)
	}
	all, err := json.Marshal(o.events)
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{secret, `s3cr\"et`, `s3cr\\\"et`, "s3cr\\u0022et"} {
		if strings.Contains(string(all), form) {
			t.Errorf("%q is in the events: %s", form, all)
		}
	}
	if n := strings.Count(string(all), Marker); n < 15 {
		t.Errorf("%d markers in the events, want at least 15: %s", n, all)
	}
	if a := o.events[4].(*Agent); !json.Valid(a.Message) {
		t.Errorf("agent message is no longer JSON: %s", a.Message)
	}
	if a := o.events[5].(*Agent); string(a.Message) != `"***"` {
		t.Errorf("a message the marker breaks: got %s, want the JSON string %q", a.Message, Marker)
	}
	if b.State().End.Error != "fail: ***" {
		t.Errorf("State has %q", b.State().End.Error)
	}
}

// TestRedactLeftmostLongest: overlapping secrets are replaced once, the
// one that starts first (the longest of those starting together).
func TestRedactLeftmostLongest(t *testing.T) {
	var s secrets
	s.add("abcdef")
	s.add("cdefgh")
	s.add("abcd")
	for in, want := range map[string]string{
		"xabcdefghx": "x***ghx",
		"abcdx":      "***x",
		"cdefghabcd": "******",
		"abc":        "abc",
	} {
		if got := s.String(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// FuzzRedactStream: data cut at random places and published chunk by
// chunk comes out as redacting all of it at once gives: no secret in it,
// everything else as it was.
func FuzzRedactStream(f *testing.F) {
	f.Add("tok-1234", "other-secret", []byte("a\ntok-1234\nb"), uint16(3), []byte{1, 5, 2})
	f.Add("abab", "babab", []byte("ababababab\n"), uint16(0), []byte{0, 0, 1, 2, 3})
	f.Add("line1\nline2", "zzzz", []byte("x\nline1\nline2\ny"), uint16(9), []byte{6, 1})
	f.Add("aaaa", "aaaaaaa", []byte("aaaaaaaaaaaaaaaaaaaaaa"), uint16(2), []byte{2, 2, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, s1, s2 string, data []byte, at uint16, cuts []byte) {
		// A secret with the marker's character could be made again by the
		// marker and the text next to it.
		if strings.Contains(s1, "*") || strings.Contains(s2, "*") {
			return
		}
		// Put the first secret in the data, so most inputs hold one.
		i := int(at) % (len(data) + 1)
		data = append(append(append([]byte{}, data[:i]...), s1...), data[i:]...)

		var oracle secrets
		oracle.add(s1)
		oracle.add(s2)
		b := New(nil)
		o := collect(b)
		b.Redact(s1)
		b.Redact(s2)
		rest := data
		for _, c := range cuts {
			n := min(int(c)%16, len(rest))
			b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: rest[:n]})
			rest = rest[n:]
		}
		if len(cuts)%2 == 0 {
			b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: rest, Last: true})
		} else {
			b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: rest})
			b.Publish(&EchoEnd{ID: "a"})
		}
		got := o.stream("a", wire.Stdout)
		want := naiveRedact(data, oracle.pats)
		if got != want {
			t.Fatalf("streamed %q, at once %q", got, want)
		}
		found := false
		for _, p := range oracle.pats {
			found = found || bytes.Contains(data, p)
			if strings.Contains(got, string(p)) {
				t.Fatalf("secret %q is in %q", p, got)
			}
		}
		if !found && got != string(data) {
			t.Fatalf("nothing to redact, yet %q came out as %q", data, got)
		}
	})
}

// naiveRedact is redaction at its plainest, to check the real one by:
// from left to right, the longest secret that starts at each place.
func naiveRedact(data []byte, pats [][]byte) string {
	var out []byte
	for i := 0; i < len(data); {
		n := 0
		for _, p := range pats {
			if bytes.HasPrefix(data[i:], p) {
				n = max(n, len(p))
			}
		}
		if n == 0 {
			out = append(out, data[i])
			i++
			continue
		}
		out = append(out, Marker...)
		i += n
	}
	return string(out)
}

// TestRedactRequestInput: a request's description and tool input (which
// the web page shows) are redacted too, nested values included, and the
// publisher's input is left as it is.
func TestRedactRequestInput(t *testing.T) {
	const secret = "hunter2-token"
	b := New(nil)
	o := collect(b)
	b.Redact(secret)
	input := map[string]any{"command": "curl -H 'X: " + secret + "'", "n": 1.0,
		"nested": []any{map[string]any{"v": secret}, "ok"}}
	b.Publish(&Pending{Approval: Approval{ID: "a1", Tool: "Bash", Description: "send " + secret, Input: input}})
	b.Publish(&Approval{ID: "a1", Tool: "Bash", Description: "send " + secret, Input: input})
	if input["command"] != "curl -H 'X: "+secret+"'" || input["nested"].([]any)[0].(map[string]any)["v"] != secret {
		t.Errorf("the publisher's input changed: %v", input)
	}
	all, err := json.Marshal(o.events)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(all), secret) || strings.Count(string(all), Marker) != 6 {
		t.Errorf("events: %s", all)
	}
	if p := o.events[0].(*Pending); p.Input["n"] != 1.0 || p.Input["nested"].([]any)[1] != "ok" {
		t.Errorf("the rest of the input: %v", p.Input)
	}
}
