package main

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// costFlag is --max-cost: a positive number of dollars ("0.50", "2";
// a leading "$" is taken too, as people write amounts).
type costFlag float64

var _ pflag.Value = (*costFlag)(nil)

// String is the amount; 0 (no cap) is "0", which --help shows as no
// default.
func (c *costFlag) String() string { return strconv.FormatFloat(float64(*c), 'f', -1, 64) }

// Type is what --help shows after the flag's name.
func (c *costFlag) Type() string { return "USD" }

func (c *costFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(s), "$"), 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return errCost
	}
	*c = costFlag(v)
	return nil
}

// errCost says what --max-cost takes; pflag puts the flag and the value in
// front of it.
var errCost = errors.New("want a positive number of dollars, such as 0.50 or 2")
