package runtime

import (
	"go.starlark.net/syntax"
)

// Redact implements Output: the run's bus replaces secret, and the form
// Starlark gives it inside a quoted string (print([token]), a value in an
// error message), with event.Marker in every event from now on. The bus
// adds the forms it takes inside JSON text.
func (o *output) Redact(secret string) bool {
	q := syntax.Quote(secret, false)
	return o.bus.Redact(secret, q[1:len(q)-1])
}
