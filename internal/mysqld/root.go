package mysqld

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// EnvServer names the environment variable that picks the server Start
// runs when Options.Server is empty: one of the Server* names.
const EnvServer = "SQLELECT_TEST_SERVER"

// Servers Start can run.
const (
	// ServerHost is the host's own mariadbd or mysqld (Debian 12:
	// mariadb-server, MariaDB 10.11). The default.
	ServerHost = "host"
	// ServerMariaDB1011 is the host's server, checked to be MariaDB 10.11.
	ServerMariaDB1011 = "mariadb-10.11"
	// ServerMySQL97 is Oracle MySQL 9.7 from Debian sid
	// (mysql-server-core), run in a Debian root of its own.
	ServerMySQL97 = "mysql-9.7"
	// ServerMariaDB118 is MariaDB 11.8 from Debian trixie
	// (mariadb-server-core), run in a Debian root of its own.
	ServerMariaDB118 = "mariadb-11.8"
)

// ErrNeedRoot is wrapped by the error Start and EnsureRoot return when a
// server's Debian root is not built yet and this process is not root.
var ErrNeedRoot = errors.New("building a Debian root needs root privileges")

// DefaultRootCache is where Debian roots are kept between runs.
const DefaultRootCache = "/var/cache/sqlelect/roots"

// rootSpec says how to build the Debian root of a server.
type rootSpec struct {
	suite    string   // Debian suite for debootstrap
	packages []string // what to install in it
	version  string   // the server's --version must contain this
}

var rootSpecs = map[string]rootSpec{
	ServerMySQL97:    {"sid", []string{"mysql-server-core", "mysql-client-core"}, "Ver 9.7."},
	ServerMariaDB118: {"trixie", []string{"mariadb-server-core", "mariadb-client-core"}, "11.8."},
}

// Servers lists the names EnvServer and Options.Server accept.
func Servers() []string {
	return []string{ServerHost, ServerMariaDB1011, ServerMySQL97, ServerMariaDB118}
}

// serverName resolves Options.Server and EnvServer.
func serverName(opt string) (string, error) {
	name := opt
	if name == "" {
		name = os.Getenv(EnvServer)
	}
	if name == "" {
		return ServerHost, nil
	}
	for _, s := range Servers() {
		if name == s {
			return name, nil
		}
	}
	return "", fmt.Errorf("mysqld: unknown server %q (from Options.Server or $%s); want one of %s",
		name, EnvServer, strings.Join(Servers(), ", "))
}

// EnsureRoot returns the Debian root of server name (a key of rootSpecs),
// building it under cache on first use: debootstrap of the suite, then
// apt-get install of the server packages (about 30 s, once per machine).
// Concurrent callers, in this process or others, wait for one build. It
// needs root privileges, debootstrap (installed with apt-get when missing)
// and Debian's package mirror.
func EnsureRoot(ctx context.Context, cache, name string, logf func(string, ...any)) (string, error) {
	spec, ok := rootSpecs[name]
	if !ok {
		return "", fmt.Errorf("mysqld: server %q does not run in a Debian root", name)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if cache == "" {
		cache = DefaultRootCache
	}
	root := filepath.Join(cache, name)
	if ready(root) {
		return root, nil
	}
	if !isRoot() {
		return "", fmt.Errorf("mysqld: server %s runs in a Debian root built with debootstrap and chroot: %w; "+
			"run as root, or unset $%s to use the host's server", name, ErrNeedRoot, EnvServer)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("mysqld: %w", err)
	}
	lock, err := os.OpenFile(root+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("mysqld: %w", err)
	}
	defer lock.Close()
	if err := flock(ctx, lock); err != nil {
		return "", fmt.Errorf("mysqld: waiting for another build of the %s root: %w", name, err)
	}
	if ready(root) {
		return root, nil
	}
	start := time.Now()
	logf("mysqld: building a Debian %s root with %s in %s (once per machine)", spec.suite, strings.Join(spec.packages, " "), root)
	tmp := root + ".building"
	_ = os.RemoveAll(tmp)
	if err := buildRoot(ctx, tmp, spec); err != nil {
		return "", fmt.Errorf("mysqld: building the %s root (Debian %s): %w", name, spec.suite, err)
	}
	_ = os.RemoveAll(root)
	if err := os.Rename(tmp, root); err != nil {
		return "", fmt.Errorf("mysqld: %w", err)
	}
	logf("mysqld: %s root ready in %v", name, time.Since(start).Round(time.Second))
	return root, nil
}

// ready reports whether root was built completely (the marker is written
// last).
func ready(root string) bool {
	_, err := os.Stat(filepath.Join(root, ".sqlelect-ready"))
	return err == nil
}

// flock takes an exclusive lock on f, polling until ctx ends.
func flock(ctx context.Context, f *os.File) error {
	for {
		err := tryFlock(f)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errLocked) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errLocked is returned by tryFlock when another holds the lock.
var errLocked = errors.New("locked")

func buildRoot(ctx context.Context, dir string, spec rootSpec) error {
	run := func(env []string, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			tail := string(out)
			if len(tail) > 4000 {
				tail = tail[len(tail)-4000:]
			}
			return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail)
		}
		return nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		if err := run([]string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", "install", "-y", "-qq", "debootstrap"); err != nil {
			if err2 := run(nil, "apt-get", "update", "-qq"); err2 != nil {
				return err2
			}
			if err := run([]string{"DEBIAN_FRONTEND=noninteractive"}, "apt-get", "install", "-y", "-qq", "debootstrap"); err != nil {
				return err
			}
		}
	}
	if err := run(nil, "debootstrap", "--variant=minbase", spec.suite, dir, "http://deb.debian.org/debian"); err != nil {
		return err
	}
	// No service may start inside the root.
	if err := os.WriteFile(filepath.Join(dir, "usr/sbin/policy-rc.d"), []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
		return err
	}
	// mariadb-install-db looks the host name up.
	if b, err := os.ReadFile("/etc/hosts"); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "etc/hosts"), b, 0o644)
	}
	// The mirror's Release files can look expired to the machine clock.
	apt := []string{dir, "apt-get", "-o", "Acquire::Check-Valid-Until=false"}
	if err := run(nil, "chroot", append(apt, "update", "-qq")...); err != nil {
		return err
	}
	if err := run([]string{"DEBIAN_FRONTEND=noninteractive"}, "chroot", append(apt, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, spec.packages...)...)...); err != nil {
		return err
	}
	_ = run(nil, "chroot", dir, "apt-get", "clean")
	return os.WriteFile(filepath.Join(dir, ".sqlelect-ready"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// inRoot returns path as seen from inside root ("" root: unchanged).
func inRoot(root, path string) string {
	if root == "" {
		return path
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return path
	}
	return "/" + rel
}
