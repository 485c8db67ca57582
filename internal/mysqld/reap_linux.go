package mysqld

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ownerFile in a server's directory holds the pid of the process that
// called Start; serverPidFile holds the server's pid (which is also its
// process group id).
const (
	ownerFile     = "owner.pid"
	serverPidFile = "server.pid"
)

// reapStale removes directories left in tmp by earlier calls to Start whose
// owning process has died without calling Stop (a test binary killed by
// -timeout or ^C), killing their server first. A directory is only touched
// when its owner is provably gone, and a process is only killed when
// /proc shows it is a server using that directory.
func reapStale(tmp, root string, logf func(string, ...any)) {
	matches, _ := filepath.Glob(filepath.Join(tmp, dirPrefix+"*"))
	for _, dir := range matches {
		owner, ok := readPid(filepath.Join(dir, ownerFile))
		if !ok || alive(owner) {
			continue
		}
		if pid, ok := readPid(filepath.Join(dir, serverPidFile)); ok && alive(pid) {
			cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			if err != nil || !bytes.Contains(cmdline, []byte("--datadir="+inRoot(root, filepath.Join(dir, "data")))) {
				continue // pid reused by something else, or cannot tell: leave it
			}
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if err := os.RemoveAll(dir); err == nil {
			logf("mysqld: removed stale %s of dead process %d", dir, owner)
		}
	}
}

// writeServerPid records the server's pid for reapStale.
func writeServerPid(dir string, pid int) {
	_ = os.WriteFile(filepath.Join(dir, serverPidFile), []byte(strconv.Itoa(pid)), 0o644)
}

func readPid(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// alive reports whether a process with this pid exists and is not a
// zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
