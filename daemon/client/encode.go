package client

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// requestEncoder writes a link's requests one at a time into a buffer it
// reuses: what every encoded link shares.
type requestEncoder struct {
	qtoken []byte // the token as a JSON string, quoted once
	end    []byte // what follows each request: a line end, or nothing for a message
	mu     sync.Mutex
	buf    []byte
}

func newRequestEncoder(token string, end ...byte) requestEncoder {
	return requestEncoder{qtoken: appendJSONString(nil, token), end: end}
}

// send encodes one request and hands it to write, under the encoder's lock
// so that requests never interleave.
func (e *requestEncoder) send(id uint64, method string, params json.RawMessage, write func([]byte) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := appendRequest(e.buf[:0], id, method, params, e.qtoken)
	if err == nil {
		b = append(b, e.end...)
		err = write(b)
	}
	e.buf = b
	if cap(e.buf) > 4<<20 {
		e.buf = nil // do not pin a huge buffer after one big write
	}
	return err
}

// appendRequest appends one request, without a line end, and refuses one
// the daemon would not read (over its 1 MiB cap). qtoken is the token
// already quoted as a JSON string.
func appendRequest(b []byte, id uint64, method string, params json.RawMessage, qtoken []byte) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	b = append(b, `,"auth":`...)
	b = append(b, qtoken...)
	b = append(b, '}')
	if len(b) > wire.MaxLine {
		return b, fmt.Errorf("%s: request of %d bytes exceeds the daemon's 1 MiB line limit", method, len(b))
	}
	return b, nil
}

// appendJSONString appends s as a JSON string. Method names need no
// escaping, so they skip the encoder.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
