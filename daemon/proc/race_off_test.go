//go:build !race

package proc

// raceEnabled: under the race detector sync.Pool drops some of what it is
// given, so tests cannot count on getting a buffer back.
const raceEnabled = false
