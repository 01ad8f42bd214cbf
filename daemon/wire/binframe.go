package wire

import (
	"bytes"
	"errors"
	"fmt"
)

// Binary frames (extension connection.binaryFrames, docs/PROTOCOL.md §6.25):
// once a connection has asked for them, each output frame that carries data
// travels as the frame's JSON line with "dataBytes":N in place of
// "data":"<base64>", a newline, and the N bytes themselves:
//
//	{"type":"stream","processId":"p1","stream":"stdout","seq":1,"dataBytes":6}\n
//	hello\n
//
// On a byte stream (the socket, the ssh bridge) that is what follows the
// frame before it; on WebSocket it is one binary message. Exit frames,
// mirrored frames, gone notifications and responses stay JSON lines.

// FeatureBinaryFrames is the extension and its method, connection.binaryFrames.
const FeatureBinaryFrames = "connection.binaryFrames"

// BinaryFramesMethod switches a connection to binary frames from its answer on.
const BinaryFramesMethod = FeatureBinaryFrames

// ConnectionMethods are the extension methods of the namespace connection.
var ConnectionMethods = []string{BinaryFramesMethod, StdioMethod}

// CarriesData reports whether f goes in binary form on a connection that
// asked for binary frames: an output frame whose data travels (not an exit
// frame, nor one the spawner mirrored).
func CarriesData(f *Frame) bool { return f.Stream != Exit && !f.Mirrored }

// AppendBinaryFrame appends the binary form of f, an output frame that
// CarriesData: its header line (AppendFrame's line with "dataBytes" in place
// of "data"), then its data as it is.
func AppendBinaryFrame(dst, quotedID []byte, f *Frame) []byte {
	dst = appendFrame(dst, quotedID, f, true)
	return append(dst, f.Data...)
}

// AppendBinaryFrameHeader appends the header line of f's binary form, '\n'
// included, for a writer that sends f.Data from where it lies.
func AppendBinaryFrameHeader(dst, quotedID []byte, f *Frame) []byte {
	return appendFrame(dst, quotedID, f, true)
}

// ErrDataBytes is the error of a binary frame whose data is not what its
// header says: a message shorter or longer than it, a stream that ends
// within it.
var ErrDataBytes = errors.New("frame: data shorter or longer than its dataBytes")

// ParseFrameHeader decodes a stream notification line as ParseFrame does,
// and also the header of a binary frame: dataBytes is then its "dataBytes"
// member, the count of raw bytes that follow the line (0 to MaxFrameData),
// and f.Data is left empty for the caller to read them into. It is -1 for a
// frame whose data is in the line. A header that lies (a negative count,
// one over MaxFrameData, not an integer, one on an exit or mirrored frame
// or beside "data") is an error, never a frame.
func ParseFrameHeader(line []byte, f *Frame) (id []byte, dataBytes int, err error) {
	if id, ok := parseOwnLayout(line, f); ok {
		return id, -1, nil
	}
	id, err = parseFrame(line, f, &dataBytes)
	if err != nil {
		return nil, -1, err
	}
	return id, dataBytes, nil
}

// ParseBinaryFrame decodes a binary frame held whole in msg (a WebSocket
// binary message): its header line, '\n', and exactly dataBytes bytes,
// which f.Data then is (a slice of msg, not a copy: valid as long as msg
// is). The id is a slice of msg, as ParseFrame's.
func ParseBinaryFrame(msg []byte, f *Frame) (id []byte, err error) {
	i := bytes.IndexByte(msg, '\n')
	if i < 0 {
		return nil, errors.New("frame: binary frame without a header line")
	}
	id, n, err := ParseFrameHeader(msg[:i], f)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, errors.New(`frame: binary frame without "dataBytes"`)
	}
	if data := msg[i+1:]; len(data) != n {
		return nil, fmt.Errorf("%w: %d bytes for %d", ErrDataBytes, len(data), n)
	}
	f.Data = msg[i+1:]
	return id, nil
}
