//go:build unix

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

// setProcessGroup makes cmd the leader of a new process group, so that the
// server and anything it spawns can be signalled together and do not get
// the terminal's signals meant for the test binary.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group led by cmd's process.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// isRoot reports whether this process runs as root, in which case the
// server has to be told which user to run as.
func isRoot() bool { return os.Geteuid() == 0 }
