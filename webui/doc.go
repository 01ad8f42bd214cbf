// Package webui serves a run's or a daemon's web page (sous run --ui,
// sous daemon serve --ui): the live processes with the tail of their
// output, the agent sessions with their messages, and the permission
// requests that wait for a person, with Allow and Deny buttons. The page
// is plain HTML, CSS and JavaScript embedded in the binary; it uses the
// same HTTP API that scripts may use (docs/UI.md):
//
//	GET  /api/state           the whole picture, bounded (JSON)
//	GET  /api/events          server-sent events: the --json stream's events
//	POST /api/approvals/ID    {"decision": "allow"|"deny", "message": "..."}
//
// Every API request carries "Authorization: Bearer TOKEN"; the page reads
// the token from its URL's fragment, which the browser never sends. A
// request from another origin is refused.
//
// The package sits beside cmd/sous, above runtime/event and daemon/client:
// it knows the run only through its event bus and the daemon only through
// a client and its approval queue, and neither imports it. Its Hub is an
// event.Sink: a run subscribes it to its bus; the daemon page feeds it the
// events it makes of the daemon's processes (DaemonFeed).
package webui
