package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// durationFlag is the type of every duration flag of sous: a Go duration
// ("30s", "1m30s", "250ms") or a plain number of seconds ("1", "0.5"), as
// timeout(1) and sleep(1) take them. pflag's own duration refused
// `--timeout 1` with "missing unit in duration".
type durationFlag time.Duration

var _ pflag.Value = (*durationFlag)(nil)

// durationVar defines a duration flag on f (see durationFlag).
func durationVar(f *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	f.Var((*durationFlag)(p), name, usage)
}

// String is the value as a Go duration; zero is "0", which --help takes
// for no default worth showing (as it does for pflag's durations).
func (d *durationFlag) String() string {
	if *d == 0 {
		return "0"
	}
	return time.Duration(*d).String()
}

// Type is what --help shows after the flag's name.
func (d *durationFlag) Type() string { return "duration" }

func (d *durationFlag) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationFlag(v)
	return nil
}

// errDuration says what a duration flag takes; pflag puts the flag and the
// value in front of it.
var errDuration = errors.New("want a duration such as 30s, 1m30s or 250ms, or a number of seconds such as 1 or 0.5")

// parseDuration reads a Go duration or a number of seconds. Negative values
// parse; the commands that cannot use them say so.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	secs, err := strconv.ParseFloat(s, 64)
	// ParseFloat also takes "inf", "nan" and hex floats, which are no
	// durations; and seconds beyond what a Duration holds (292 years).
	if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || strings.ContainsAny(s, "xXpP") ||
		math.Abs(secs) > float64(math.MaxInt64)/float64(time.Second) {
		return 0, errDuration
	}
	return time.Duration(math.Round(secs * float64(time.Second))), nil
}
