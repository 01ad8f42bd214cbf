//go:build race

package daemon

// raceEnabled trims the sizes of the heaviest tests: the race detector makes
// every byte through the daemon several times slower.
const raceEnabled = true
