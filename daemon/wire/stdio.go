package wire

// The bridge's descriptors (extension connection.stdio, docs/PROTOCOL.md
// §6.26): `sous daemon bridge`, which ssh runs on the daemon's host to
// relay between its stdin/stdout and the daemon's socket, may instead pass
// those two descriptors to the daemon as the first request of its
// connection. The daemon then reads the connection's requests from the one
// and writes its answers and frames to the other, and the bridge relays
// nothing: each byte is copied once less on the daemon's host.

// FeatureConnectionStdio is the extension and its method, connection.stdio.
const FeatureConnectionStdio = "connection.stdio"

// StdioMethod hands a Unix-socket connection's two passed descriptors to
// the daemon: requests are read from the first, everything else written to
// the second, from its answer on.
const StdioMethod = FeatureConnectionStdio
