package main

import "golang.org/x/sys/unix"

// termiosRequest is the ioctl that reads a terminal's settings: it fails
// on anything that is not a terminal.
const termiosRequest = unix.TCGETS
