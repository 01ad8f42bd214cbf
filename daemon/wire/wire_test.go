package wire

import (
	"errors"
	"fmt"
	"testing"
)

func TestIsNotRunning(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{InvalidParams(MsgProcessNotRunning), true},
		{fmt.Errorf("process.stdin: %w", InvalidParams(MsgProcessNotRunning)), true},
		{InvalidParams(MsgProcessNotFound), false},
		{&Error{Code: CodeInternal, Message: MsgProcessNotRunning}, false},
		{errors.New(MsgProcessNotRunning), false},
		{nil, false},
	} {
		if got := IsNotRunning(tc.err); got != tc.want {
			t.Errorf("IsNotRunning(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
