package builtins

import (
	"errors"
	"strings"
	"testing"
)

// TestParseDotenv: the forms a .env file takes, and what each gives.
func TestParseDotenv(t *testing.T) {
	text := "\ufeff# a comment\n" +
		"\n" +
		"PLAIN=value\n" +
		"  SPACED = spaced value  \n" +
		"export EXPORTED=yes\n" +
		"exporter=not the export prefix\n" +
		"COMMENTED=abc # a comment\n" +
		"HASH=abc#def\n" +
		"EMPTY=\n" +
		"SINGLE='as $written \\n # not a comment'\n" +
		"DOUBLE=\"tab\\there \\\"quoted\\\" \\\\ \\$HOME \\q\" # comment\n" +
		"MULTI=\"-----BEGIN KEY-----\r\nline2\r\n-----END KEY-----\"\r\n" +
		"SQ_MULTI='a\nb'\n" +
		"PLAIN=later wins\n" +
		"URL=https://example.com/?a=b&c=d\n" +
		"LAST=no newline"
	vars, err := parseDotenv(text)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var order []string
	for _, v := range vars {
		got[v.Key] = v.Value
		order = append(order, v.Key)
	}
	want := map[string]string{
		"PLAIN":     "later wins",
		"SPACED":    "spaced value",
		"EXPORTED":  "yes",
		"exporter":  "not the export prefix",
		"COMMENTED": "abc",
		"HASH":      "abc#def",
		"EMPTY":     "",
		"SINGLE":    `as $written \n # not a comment`,
		"DOUBLE":    `tab` + "\t" + `here "quoted" \ $HOME \q`,
		"MULTI":     "-----BEGIN KEY-----\nline2\n-----END KEY-----",
		"SQ_MULTI":  "a\nb",
		"URL":       "https://example.com/?a=b&c=d",
		"LAST":      "no newline",
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: got %q (set: %v), want %q", k, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got keys %v, want %d of them", order, len(want))
	}
}

// TestParseDotenvErrors: a mistake names the line it starts on.
func TestParseDotenvErrors(t *testing.T) {
	for _, tc := range []struct {
		text string
		want string
	}{
		{"A=1\nJUST A LINE\n", `line 2: want KEY=value, got "JUST A LINE"`},
		{"A=1\n\n1BAD=x\n", `line 3: "1BAD" is not a variable name (letters, digits and _, not starting with a digit)`},
		{"A-B=x\n", `line 1: "A-B" is not a variable name (letters, digits and _, not starting with a digit)`},
		{"=x\n", `line 1: "" is not a variable name (letters, digits and _, not starting with a digit)`},
		{"A=1\nB=\"open\nstill open\n", `line 2: the value's " quote is never closed`},
		{"A='x' y\n", `line 1: unexpected "y" after the closing quote`},
		{"A=\"a\nb\" c\nD=1", `line 1: unexpected "c" after the closing quote`},
		{"A=\"a\nb\"\nNOPE\n", `line 3: want KEY=value, got "NOPE"`},
	} {
		_, err := parseDotenv(tc.text)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: got error %v, want %q", tc.text, err, tc.want)
		}
	}
}

// dotenvQuote writes value as a double-quoted .env value.
func dotenvQuote(value string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return `"` + r.Replace(value) + `"`
}

// FuzzParseDotenv: any text parses or fails with the number of one of its
// lines, never panics; a value written double-quoted with escapes reads
// back as it was, whatever lines come around it.
func FuzzParseDotenv(f *testing.F) {
	f.Add("A=1\nexport B='x'\n# c\nC=\"a\\nb\"\n", "s3cr\"et\\\n$x")
	f.Add("A=\"open\n", "")
	f.Add("X='a\nb'\r\nY=2 # z", "\ttab")
	f.Fuzz(func(t *testing.T, text, value string) {
		vars, err := parseDotenv(text)
		var de *dotenvError
		switch {
		case err != nil && !errors.As(err, &de):
			t.Fatalf("%q: error %v is not a dotenvError", text, err)
		case err != nil && (de.Line < 1 || de.Line > strings.Count(text, "\n")+1):
			t.Fatalf("%q: error on line %d of a text of %d lines", text, de.Line, strings.Count(text, "\n")+1)
		}
		for _, v := range vars {
			if !validEnvName(v.Key) {
				t.Fatalf("%q: gave key %q", text, v.Key)
			}
		}
		if err != nil {
			return
		}
		// The value, quoted, after the fuzzed text (which parsed, so it
		// leaves no quote open) and before another line.
		doc := text + "\nFUZZ_VALUE=" + dotenvQuote(value) + " # end\nAFTER=1\n"
		vars, err = parseDotenv(doc)
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		got := map[string]string{}
		for _, v := range vars {
			got[v.Key] = v.Value
		}
		if got["FUZZ_VALUE"] != value || got["AFTER"] != "1" {
			t.Fatalf("%q: read FUZZ_VALUE=%q AFTER=%q, want %q and \"1\"", doc, got["FUZZ_VALUE"], got["AFTER"], value)
		}
	})
}
