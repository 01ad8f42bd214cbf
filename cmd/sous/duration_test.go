package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1": time.Second, "0.5": 500 * time.Millisecond, "90": 90 * time.Second, "0": 0, "2.25": 2250 * time.Millisecond,
		"30s": 30 * time.Second, "1m30s": 90 * time.Second, "250ms": 250 * time.Millisecond, "1h": time.Hour,
		"-1": -time.Second, " 3 ": 3 * time.Second, "1e1": 10 * time.Second,
	} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "1x", "5 s", "inf", "NaN", "0x10", "1e300", "s"} {
		if got, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) = %v, want an error", in, got)
		}
	}
}

// TestEveryDurationFlagTakesSeconds: every duration flag of every command
// takes plain seconds as well as Go durations (`sous exec --timeout 1` was
// refused with "missing unit in duration"), and the ones that exist today
// are all found, so a flag added with pflag's own DurationVar fails here.
func TestEveryDurationFlagTakesSeconds(t *testing.T) {
	found := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "duration" {
				return
			}
			name := c.CommandPath() + " --" + f.Name
			found[name] = true
			if _, ok := f.Value.(*durationFlag); !ok {
				t.Errorf("%s is a %T, not sous's durationFlag", name, f.Value)
				return
			}
			for in, want := range map[string]string{"1": "1s", "0.5": "500ms", "1m30s": "1m30s", "2": "2s"} {
				if err := f.Value.Set(in); err != nil || f.Value.String() != want {
					t.Errorf("%s %s: %v, value %s; want %s", name, in, err, f.Value.String(), want)
				}
			}
			if err := f.Value.Set("soon"); err == nil || !strings.Contains(err.Error(), "number of seconds such as 1 or 0.5") {
				t.Errorf("%s soon: %v", name, err)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newCmdRoot(newTestFactory(strings.NewReader(""), io.Discard, io.Discard, nil)))
	for _, name := range []string{"sous exec --timeout", "sous kill --grace", "sous daemon serve --retain-for",
		"sous daemon start --retain-for", "sous daemon start --wait"} {
		if !found[name] {
			t.Errorf("%s: not found among the duration flags %v", name, found)
		}
	}
}

// TestExecTimeoutInSeconds: the flag as a user types it, end to end.
func TestExecTimeoutInSeconds(t *testing.T) {
	start := time.Now()
	o := sous(t, "exec", "--timeout", "0.5", "--", "sleep", "10")
	if o.code != 124 || !strings.Contains(o.stderr, "timed out after 500ms") {
		t.Errorf("exec --timeout 0.5: exit %d, stderr %q", o.code, o.stderr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s", took)
	}
	o = sous(t, "exec", "--timeout", "soon", "--", "true")
	if o.code != 2 || !strings.Contains(o.stderr, `invalid argument "soon" for "--timeout" flag: want a duration such as 30s`) {
		t.Errorf("exec --timeout soon: exit %d, stderr %q", o.code, o.stderr)
	}
}
