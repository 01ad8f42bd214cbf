package main

import (
	"strconv"
	"strings"

	"github.com/seed5ad92d46/sous/runtime"
)

// parseShard reads --shard I/N (0 <= I < N); "" is the whole run.
func parseShard(s string) (runtime.Shard, error) {
	if s == "" {
		return runtime.Shard{Index: 0, Count: 1}, nil
	}
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || count < 1 || index < 0 || index >= count {
		return runtime.Shard{}, usageErrorf("--shard %q: want I/N with 0 <= I < N, e.g. 0/4", s)
	}
	return runtime.Shard{Index: index, Count: count}, nil
}
