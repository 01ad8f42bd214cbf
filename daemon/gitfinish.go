package daemon

import (
	"context"
	"encoding/json"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// gitMethod is the handler of an extension method of git.* that is also a
// feature: a daemon with the feature disabled does not know the method, as
// one from before it would not.
func gitMethod[P any](feature string, f func(context.Context, *Session, P) (any, error)) handler {
	return func(ctx context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
		if !se.s.enabled(feature) {
			return nil, nil, wire.Errorf(wire.CodeMethodNotFound, "Unknown method: %s", feature)
		}
		p, err := decodeParams[P](raw)
		if err != nil {
			return nil, nil, err
		}
		r, err := f(ctx, se, p)
		return r, nil, err
	}
}
