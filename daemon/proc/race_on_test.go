//go:build race

package proc

// raceEnabled: the race detector makes sync.Pool drop some of what it is
// given, so tests cannot count on getting a buffer back.
const raceEnabled = true
