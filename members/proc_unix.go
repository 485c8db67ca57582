//go:build unix

package members

import (
	"errors"
	"syscall"
)

// running reports whether process pid runs on this host (signal 0 reaches
// it, or exists but belongs to another user).
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return pid > 0 && (err == nil || errors.Is(err, syscall.EPERM))
}
