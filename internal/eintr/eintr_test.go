package eintr

import (
	"errors"
	"syscall"
	"testing"
)

func TestRetryUntilNotInterrupted(t *testing.T) {
	calls := 0
	err := Retry(func() error {
		calls++
		if calls < 3 {
			return syscall.EINTR
		}
		return syscall.ENOENT
	})
	if !errors.Is(err, syscall.ENOENT) || calls != 3 {
		t.Fatalf("Retry: %v after %d calls, want ENOENT after 3", err, calls)
	}
}

func TestRetryValueKeepsTheValue(t *testing.T) {
	calls := 0
	fd, err := RetryValue(func() (int, error) {
		calls++
		if calls == 1 {
			return -1, syscall.EINTR
		}
		return 7, nil
	})
	if fd != 7 || err != nil || calls != 2 {
		t.Fatalf("RetryValue: %d, %v after %d calls, want 7, nil after 2", fd, err, calls)
	}
}
