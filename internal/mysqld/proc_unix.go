//go:build unix

package mysqld

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// checkSearchable returns an error naming the first parent of dir that user
// uid (group gid) cannot enter, judging by permission bits only.
func checkSearchable(dir string, uid, gid int) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		switch {
		case !ok:
		case int(st.Uid) == uid && perm&0o100 != 0:
		case int(st.Gid) == gid && perm&0o010 != 0:
		case perm&0o001 != 0:
		default:
			return fmt.Errorf("%s (mode %v, owner %d:%d) is not searchable by user mysql (%d:%d)",
				p, fi.Mode().Perm(), st.Uid, st.Gid, uid, gid)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// tryFlock takes an exclusive lock on f without waiting; errLocked when
// another process (or file description) holds it.
func tryFlock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
