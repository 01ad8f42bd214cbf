//go:build race

package testutil

// RaceEnabled says the race detector is on: it makes every byte through
// the daemon several times slower (heavy tests trim their sizes), and it
// makes sync.Pool drop some of what it is given (tests cannot count on
// getting a buffer back).
const RaceEnabled = true
