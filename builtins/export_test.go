package builtins

// SetLinesLimits sets the bounds of lines() iterations started from now on
// and returns a func that restores them. Only for tests that do not run in
// parallel.
func SetLinesLimits(bound int, spillCap int64) (restore func()) {
	b, s := linesBound, linesSpillCap
	linesBound, linesSpillCap = bound, spillCap
	return func() { linesBound, linesSpillCap = b, s }
}

// LinesHighWater returns and resets the most unread bytes a finished lines()
// iteration held in memory, and the most it put in its spill file.
func LinesHighWater() (peak int, spilled int64) {
	h := &linesHighWater
	h.Lock()
	defer h.Unlock()
	peak, spilled = h.peak, h.spilled
	h.peak, h.spilled = 0, 0
	return peak, spilled
}
