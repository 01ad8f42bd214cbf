package client

// PassesMirrors reports whether c still passes spawn mirrors to its daemon
// (false once a relay dropped them), for the tests of that fallback.
func PassesMirrors(c *Client) bool { return !c.noPassing.Load() }
