package client_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// randomOutputEnv makes the test binary a child that writes a seeded random
// stream: "SEED:SIZE" writes SIZE bytes of randomStream(SEED) to stdout.
const randomOutputEnv = "SOUS_TEST_RANDOM_OUTPUT"

func TestMain(m *testing.M) {
	if spec := os.Getenv(randomOutputEnv); spec != "" {
		var seed uint64
		var size int64
		if _, err := fmt.Sscanf(spec, "%d:%d", &seed, &size); err != nil {
			fmt.Fprintln(os.Stderr, randomOutputEnv, err)
			os.Exit(2)
		}
		w := bufio.NewWriterSize(os.Stdout, 32<<10)
		if _, err := io.CopyN(w, randomStream(seed), size); err != nil {
			os.Exit(3)
		}
		if err := w.Flush(); err != nil {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// randomStream is an endless, seeded, fast pseudo-random byte stream.
func randomStream(seed uint64) io.Reader {
	var key [32]byte
	for i := range 4 {
		key[i*8] = byte(seed >> (8 * i))
		key[i*8+4] = byte(seed >> (8 * (i + 4)))
	}
	return rand.NewChaCha8(key)
}
