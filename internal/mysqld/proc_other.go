//go:build !unix

package mysqld

import (
	"os"
	"os/exec"
	"syscall"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// setProcessGroup does nothing on this platform.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills cmd's process; process groups and graceful signals are
// not available on this platform.
func signalGroup(cmd *exec.Cmd, _ syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Signal(os.Kill)
}

// isRoot reports false: there is no root to drop privileges from here.
func isRoot() bool { return false }

// checkSearchable does nothing on this platform.
func checkSearchable(string, int, int) error { return nil }

// tryFlock does not lock on this platform (Debian roots need unix anyway).
func tryFlock(*os.File) error { return nil }
