// Package envlist reads and edits environments in the form exec uses: a
// list of "KEY=value" strings in which the last definition of a key is the
// one that counts.
package envlist

import (
	"slices"
	"sort"
	"strings"
)

// Lookup returns the value of key in env (its last definition) and whether
// it is defined.
func Lookup(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// Merge returns base with overrides applied: every definition of an
// overridden key is dropped, and the keys with a non-nil value are
// appended in sorted order (a nil value unsets the key). base is returned
// as is when there is nothing to override.
func Merge(base []string, overrides map[string]*string) []string {
	if len(overrides) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+len(overrides))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := overrides[k]; ok {
			continue
		}
		out = append(out, kv)
	}
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := overrides[k]; v != nil {
			out = append(out, k+"="+*v)
		}
	}
	return out
}

// Set returns env with key defined as value, and only once.
func Set(env []string, key, value string) []string {
	return Merge(env, map[string]*string{key: &value})
}

// Without returns env with every definition of keys removed. env itself is
// left as is.
func Without(env []string, keys ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(keys, k) {
			out = append(out, kv)
		}
	}
	return out
}
