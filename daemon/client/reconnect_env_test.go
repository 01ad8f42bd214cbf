package client_test

import (
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
)

func TestReconnectTimeoutFromEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		val  string
		want time.Duration
		err  string
	}{
		{"", 0, ""},
		{"5s", 5 * time.Second, ""},
		{" 2m ", 2 * time.Minute, ""},
		{"1.5", 1500 * time.Millisecond, ""},
		{"0", -1, ""}, // reconnecting off
		{"0s", -1, ""},
		{"-1s", 0, "want a duration of 0 or more"},
		{"soon", 0, "want a duration such as 30s"},
		{"-3", 0, "want a duration such as 30s"},
	} {
		got, err := client.ReconnectTimeoutFromEnv(func(k string) string {
			if k == "SOUS_RECONNECT_TIMEOUT" {
				return tc.val
			}
			return ""
		})
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "SOUS_RECONNECT_TIMEOUT")):
			t.Errorf("%q: err %v, want %q", tc.val, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %v %v, want %v", tc.val, got, err, tc.want)
		}
	}
}
