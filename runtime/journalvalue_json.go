package runtime

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// appendJSON appends k as json.Marshal encodes it, byte for byte (given
// a D that is compact JSON, as json.Marshal would make it). Every answer a
// durable run keeps is encoded: with reflection it was most of the
// journal's CPU on the runner (TestKeptValueJSONMatchesEncodingJSON).
func (k *keptValue) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"t":`...)
	dst = wire.AppendJSONString(dst, k.T)
	if k.S != "" {
		dst = append(dst, `,"s":`...)
		dst = wire.AppendJSONString(dst, k.S)
	}
	if len(k.B) > 0 {
		dst = append(dst, `,"b":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, k.B)
		dst = append(dst, '"')
	}
	dst = appendKeptList(dst, `,"l":[`, k.L)
	dst = appendKeptList(dst, `,"v":[`, k.V)
	if len(k.D) > 0 {
		dst = append(dst, `,"d":`...)
		dst = append(dst, k.D...)
	}
	return append(dst, '}')
}

func appendKeptList(dst []byte, key string, l []keptValue) []byte {
	if len(l) == 0 {
		return dst
	}
	dst = append(dst, key...)
	for i := range l {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = l[i].appendJSON(dst)
	}
	return append(dst, ']')
}

// recordData is a Recordable's data as the journal keeps it: JSON the
// value encoded itself (json.RawMessage, checked, as json.Marshal checks
// it, since a plugin's bytes go into the journal's file), or anything
// else through json.Marshal. JSON with white space is compacted: a record
// travels as part of one protocol line, where a newline would end it.
func recordData(data any) (json.RawMessage, error) {
	raw, ok := data.(json.RawMessage)
	if !ok {
		return json.Marshal(data)
	}
	if bytes.ContainsAny(raw, " \t\r\n") {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, fmt.Errorf("its Record data is not valid JSON: %w", err)
		}
		return b.Bytes(), nil
	}
	if !json.Valid(raw) {
		return nil, errors.New("its Record data is not valid JSON")
	}
	return raw, nil
}
