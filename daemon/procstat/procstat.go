// Package procstat reads a process's /proc/PID/stat, whose second field,
// the command name in parentheses, may hold spaces and parentheses itself:
// the fields are counted from its last ')'.
package procstat

import (
	"bytes"
	"errors"
	"os"
	"strconv"
)

// Stat is the fields of one /proc/PID/stat, from the third (the state)
// on.
type Stat [][]byte

// Read reads /proc/PID/stat; pid 0 is this process.
func Read(pid int) (Stat, error) {
	path := "/proc/self/stat"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New(path + ": no command name")
	}
	return bytes.Fields(b[i+1:]), nil
}

// Field is field n, numbered as proc(5) numbers them (3 is the state,
// 5 the process group, 14 utime...), as text; "" when the line is short.
func (s Stat) Field(n int) string {
	if n < 3 || n-3 >= len(s) {
		return ""
	}
	return string(s[n-3])
}

// Int is field n as a number; false when it is missing or not one.
func (s Stat) Int(n int) (int64, bool) {
	v, err := strconv.ParseInt(s.Field(n), 10, 64)
	return v, err == nil
}
