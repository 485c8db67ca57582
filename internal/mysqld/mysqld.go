// Package mysqld starts and stops throwaway MariaDB or MySQL servers for
// tests, examples and demos.
//
// A server started by Start lives in its own directory (data directory,
// tmpdir, socket, pid file and log), listens only on 127.0.0.1 on a free
// port, and lets root in over TCP without a password. It is meant for
// tests: it is not tuned, not secured, and Stop deletes its data.
//
// Start looks for mariadbd, then mysqld, on PATH and in /usr/sbin,
// /usr/local/sbin and /usr/local/mysql/bin. MariaDB data directories are
// created with mariadb-install-db (or mysql_install_db); Oracle MySQL ones
// with mysqld --initialize-insecure, once per binary, version and user:
// each Start copies that template (see Server.initDataDir), which a later
// Start, in this process or another, reuses from the temporary directory.
// When no server binary is found Start returns an error wrapping
// ErrNoServer.
package mysqld

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ErrNoServer is wrapped by the error Start returns when no MariaDB or MySQL
// server binary can be found on this machine.
var ErrNoServer = errors.New("no MariaDB/MySQL server binary (mariadbd or mysqld) found on PATH or in " +
	strings.Join(searchDirs, ", ") +
	"; install mariadb-server (apt-get install -y mariadb-server), " +
	"or set SQLELECT_TEST_DSN / SQLELECT_DSN to an existing server, " +
	"or run a Docker engine")

// DefaultStartTimeout bounds Start and Restart when Options.StartTimeout is
// zero.
const DefaultStartTimeout = 60 * time.Second

// stopTimeout bounds how long Stop, Kill and Restart wait for the server
// process to exit after it has been signalled.
const stopTimeout = 10 * time.Second

// dirPrefix names the directories Start creates with os.MkdirTemp; stale
// ones (whose owning process is gone) are reaped by later calls to Start.
const dirPrefix = "sqlelect-mysqld-"

// searchDirs are looked at, after PATH, for the server binary.
var searchDirs = []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin"}

// Options configures Start. The zero value is ready to use.
type Options struct {
	// Dir is the directory that holds the data directory, the server's
	// tmpdir, the socket (Dir/mysql.sock, which must fit in 107 bytes),
	// the pid file and the log. It must not exist or must be empty; Start
	// creates it and Stop removes it. When running as root, every parent
	// of Dir must be searchable by user mysql. Default: a new directory
	// made by os.MkdirTemp in os.TempDir().
	Dir string

	// ExtraArgs are appended to the server's command line after the
	// options Start sets, so they can override them (for example
	// "--innodb-buffer-pool-size=64M" or "--character-set-server=utf8mb4").
	// They must not change --port, --bind-address, --datadir, --socket or
	// --user, which Server relies on.
	ExtraArgs []string

	// Env, if not empty, is added to the server's environment (which is
	// otherwise the test process's), as KEY=value: for example an
	// LD_PRELOAD of libfaketime to offset the server's clock.
	Env []string

	// StartTimeout bounds Start (creating the data directory and waiting
	// for the server to accept connections) and each Restart, in addition
	// to any deadline of their ctx. Default: DefaultStartTimeout (60 s).
	StartTimeout time.Duration

	// Logf, if not nil, receives progress messages (which binary, which
	// port, restarts). Default: messages are discarded.
	Logf func(format string, args ...any)

	// Server picks the server: ServerHost (the host's mariadbd or mysqld),
	// ServerMariaDB1011 (the same, checked to be 10.11), ServerMySQL97 or
	// ServerMariaDB118 (each run with chroot in a Debian root of its own,
	// built on first use with EnsureRoot: root privileges needed). Default:
	// $SQLELECT_TEST_SERVER, else ServerHost.
	Server string
	// RootCache is where Debian roots are kept. Default DefaultRootCache.
	RootCache string
}

// Server is a running throwaway server started by Start. Its methods are
// safe for concurrent use. Port, Addr and Dir are set by Start and must not
// be changed.
type Server struct {
	// Port is the TCP port the server listens on, on 127.0.0.1. It stays
	// the same across Restart.
	Port int
	// Addr is "127.0.0.1:<Port>".
	Addr string
	// Dir is the directory holding the data directory, socket and log
	// (Options.Dir or the temporary directory Start made).
	Dir string

	binary  string // the server binary, as seen inside root
	root    string // the Debian root it runs in (chroot), "" for the host's
	name    string // the server's name (Options.Server)
	version string // its --version line
	flavor  flavor
	runAs   string // value of --user, or "" when not running as root
	logPath string
	opts    Options

	opMu sync.Mutex // serializes Kill, Restart and Stop

	mu      sync.Mutex // guards proc and stopped
	proc    *process   // nil when the server is not running
	stopped bool
}

// process is one run of the server binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd.Wait has returned
	err  error         // cmd.Wait's result; read only after done is closed

	logPath   string
	logOffset int64 // size of the log when this run started
}

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// logTail returns the last lines this run wrote to the log.
func (p *process) logTail() string { return tailFile(p.logPath, p.logOffset) }

type flavor int

const (
	mariaDB flavor = iota
	oracleMySQL
)

func (f flavor) String() string {
	if f == oracleMySQL {
		return "MySQL"
	}
	return "MariaDB"
}

// Start creates a fresh data directory, starts a server on a free port of
// 127.0.0.1 and waits until root can connect to it over TCP.
//
// Start gives up after opts.StartTimeout (default 60 s) or when ctx is done,
// whichever comes first. If the server exits while starting, the error
// includes the tail of its log. On any error nothing is left behind: the
// process is killed and the directory removed. If no server binary is
// found, the error wraps ErrNoServer.
func Start(ctx context.Context, opts Options) (*Server, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	opts.Logf = logf
	ctx, cancel := context.WithTimeout(ctx, startTimeout(opts))
	defer cancel()

	name, err := serverName(opts.Server)
	if err != nil {
		return nil, err
	}
	var root string
	if _, ok := rootSpecs[name]; ok {
		if root, err = EnsureRoot(ctx, opts.RootCache, name, logf); err != nil {
			return nil, err
		}
		if !isRoot() {
			return nil, fmt.Errorf("mysqld: server %s runs in its Debian root with chroot: %w", name, ErrNeedRoot)
		}
	}
	binary, err := findServer(root)
	if err != nil {
		return nil, err
	}
	fl, version, err := detectFlavor(ctx, root, binary)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(name, version); err != nil {
		return nil, err
	}

	tmpBase := os.TempDir()
	if root != "" {
		tmpBase = filepath.Join(root, "tmp")
		if opts.Dir != "" && inRoot(root, opts.Dir) == opts.Dir {
			return nil, fmt.Errorf("mysqld: Options.Dir %s must be inside the %s root %s", opts.Dir, name, root)
		}
	}
	reapStale(tmpBase, root, logf)
	dir, err := makeDir(opts.Dir, tmpBase)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Dir:     dir,
		binary:  binary,
		root:    root,
		name:    name,
		version: version,
		flavor:  fl,
		logPath: filepath.Join(dir, "server.log"),
		opts:    opts,
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Stop()
		}
	}()

	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, fmt.Errorf("mysqld: %w", err)
	}
	chown := func(string) error { return nil }
	switch {
	case root != "":
		s.runAs = "root" // inside its own root file system
	case isRoot():
		s.runAs = "root"
		if u, err := user.Lookup("mysql"); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			if err := checkSearchable(dir, uid, gid); err != nil {
				return nil, fmt.Errorf("mysqld: running as root, the server runs as user mysql and cannot reach %s: %w", dir, err)
			}
			if err := os.Chown(dir, uid, gid); err != nil {
				return nil, fmt.Errorf("mysqld: chown %s to mysql: %w", dir, err)
			}
			chown = func(path string) error { return os.Chown(path, uid, gid) }
			s.runAs = "mysql"
		} else {
			logf("mysqld: no user mysql (%v); running the server as root", err)
		}
	}

	// A private tmpdir: servers sharing one (/tmp) can remove each
	// other's temporary tables, which makes concurrent installs fail.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("mysqld: %w", err)
	}
	if err := chown(tmp); err != nil {
		return nil, fmt.Errorf("mysqld: chown %s to mysql: %w", tmp, err)
	}

	logf("mysqld: initializing %s data directory with %s in %s", version, binary, dir)
	if err := s.initDataDir(ctx, tmpBase, chown); err != nil {
		return nil, err
	}

	// The free port we pick can be taken by someone else before the
	// server binds it; try a few ports before giving up.
	const attempts = 3
	for i := 1; ; i++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s.Port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = s.startAndWait(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, errPortInUse) || i == attempts {
			return nil, err
		}
		logf("mysqld: port %d was taken, trying another", port)
	}
	ok = true
	return s, nil
}

// DSN returns a go-sql-driver/mysql DSN for root (no password) over TCP to
// the database db ("" for none), with parseTime=true and the session time
// zone set to UTC:
//
//	root@tcp(127.0.0.1:PORT)/db?parseTime=true&time_zone=%27%2B00%3A00%27
func (s *Server) DSN(db string) string {
	return s.config(db).FormatDSN()
}

func (s *Server) config(db string) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = s.Addr
	cfg.DBName = db
	cfg.ParseTime = true
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	return cfg
}

// Pid returns the process id of the running server, or 0 if it is not
// running (after Kill, after Stop, or if it crashed).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || !s.proc.running() {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Kill sends SIGKILL to the server's process group, as a crash would, and
// waits (up to 10 s) for it to exit. The data directory is kept, so Restart
// can bring the server back. Kill returns an error if the server is not
// running.
func (s *Server) Kill() error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || !p.running() {
		return errors.New("mysqld: Kill: server is not running")
	}
	s.opts.Logf("mysqld: killing server pid %d on %s", p.cmd.Process.Pid, s.Addr)
	return killAndWait(p)
}

// Restart starts the server again on the same port and data directory and
// waits until it accepts connections. If the server is still running it is
// first shut down with SIGTERM (SIGKILL if it has not exited when ctx is
// done). Restart is bounded by ctx and Options.StartTimeout; if the server
// exits while starting, the error includes the tail of its log.
func (s *Server) Restart(ctx context.Context) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	return s.restart(ctx)
}

// RestartWith is Restart with extraArgs in place of Options.ExtraArgs, from
// now on: a server restarted with other options under running clients.
func (s *Server) RestartWith(ctx context.Context, extraArgs ...string) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	s.opts.ExtraArgs = extraArgs
	s.mu.Unlock()
	return s.restart(ctx)
}

func (s *Server) restart(ctx context.Context) error {
	s.mu.Lock()
	p, stopped := s.proc, s.stopped
	s.mu.Unlock()
	if stopped {
		return errors.New("mysqld: Restart: server was stopped")
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout(s.opts))
	defer cancel()
	if p != nil && p.running() {
		s.opts.Logf("mysqld: shutting down server pid %d on %s", p.cmd.Process.Pid, s.Addr)
		_ = signalGroup(p.cmd, sigTerm)
		select {
		case <-p.done:
		case <-ctx.Done():
			if err := killAndWait(p); err != nil {
				return fmt.Errorf("mysqld: Restart: %w", err)
			}
		}
	}
	s.opts.Logf("mysqld: restarting server on %s", s.Addr)
	return s.startAndWait(ctx)
}

// Stop kills the server's process group, waits (up to 10 s) for it to exit
// and removes Dir with all its data. Stop is idempotent; after Stop the
// Server cannot be restarted.
func (s *Server) Stop() error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	p := s.proc
	s.mu.Unlock()

	var errs []error
	if p != nil {
		if err := killAndWait(p); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Dir != "" {
		if err := os.RemoveAll(s.Dir); err != nil {
			errs = append(errs, fmt.Errorf("mysqld: remove %s: %w", s.Dir, err))
		}
	}
	return errors.Join(errs...)
}

// args returns the server command line (without the binary).
func (s *Server) args() []string {
	a := []string{
		"--no-defaults",
		"--datadir=" + s.path("data"),
		"--port=" + strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1",
		"--socket=" + s.path("mysql.sock"),
		"--pid-file=" + s.path("mysqld.pid"),
		"--tmpdir=" + s.path("tmp"),
	}
	if s.runAs != "" {
		a = append(a, "--user="+s.runAs)
	}
	if s.flavor == oracleMySQL {
		// X Protocol would listen on 33060 and its own socket; two servers
		// would fight over them.
		// Debian's build aborts when its default secure-file-priv
		// directory (/var/lib/mysql-files) is missing.
		a = append(a, "--mysqlx=OFF", "--secure-file-priv=")
	}
	return append(a, s.opts.ExtraArgs...)
}

// errPortInUse marks a start that failed because the port was taken.
var errPortInUse = errors.New("port already in use")

// startAndWait starts the server process and waits until root can connect.
// On failure the process is killed.
func (s *Server) startAndWait(ctx context.Context) error {
	p, err := s.startProcess()
	if err != nil {
		return err
	}
	s.opts.Logf("mysqld: started %s pid %d on %s", s.binary, p.cmd.Process.Pid, s.Addr)
	if err := s.waitReady(ctx, p); err != nil {
		_ = killAndWait(p)
		return err
	}
	return nil
}

// startProcess launches the server in its own process group with its output
// appended to the log, and records it as s.proc.
func (s *Server) startProcess() (*process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errors.New("mysqld: server was stopped")
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("mysqld: open log: %w", err)
	}
	defer logFile.Close() // the child has its own copy once started
	off, _ := logFile.Seek(0, io.SeekEnd)
	args := s.args()
	fmt.Fprintf(logFile, "==== %s sqlelect/internal/mysqld: %s %s\n",
		time.Now().UTC().Format(time.RFC3339), s.binary, strings.Join(args, " "))

	cmd := s.command(args...)
	cmd.Dir = s.Dir
	if len(s.opts.Env) > 0 {
		cmd.Env = append(os.Environ(), s.opts.Env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mysqld: start %s: %w", s.binary, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{}), logPath: s.logPath, logOffset: off}
	writeServerPid(s.Dir, cmd.Process.Pid)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.proc = p
	return p, nil
}

// waitReady polls the server with a root connection until it answers, the
// process exits, or ctx is done.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	cfg := s.config("")
	cfg.Timeout = 2 * time.Second
	cfg.Logger = &mysql.NopLogger{} // connection errors while booting are expected
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("mysqld: %w", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()

	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var lastErr error
	for {
		pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		lastErr = db.PingContext(pingCtx)
		cancel()
		if lastErr == nil {
			return nil
		}
		select {
		case <-p.done:
			return s.exitedError(p)
		case <-ctx.Done():
			return fmt.Errorf("mysqld: server on %s not ready: %w (last error: %v); server log:\n%s",
				s.Addr, ctx.Err(), lastErr, p.logTail())
		case <-ticker.C:
		}
	}
}

// exitedError describes a server that exited while starting.
func (s *Server) exitedError(p *process) error {
	tail := p.logTail()
	var hint string
	if isRoot() && (strings.Contains(tail, "Permission denied") || strings.Contains(tail, "Errcode: 13")) {
		hint = " (when running as root, " + s.Dir + " and all its parents must be accessible by user mysql)"
	}
	err := fmt.Errorf("mysqld: server on %s exited while starting: %v%s; server log:\n%s",
		s.Addr, p.err, hint, tail)
	if strings.Contains(tail, "Address already in use") || strings.Contains(tail, "Bind on TCP/IP port") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

// initDataDir creates Dir/data as a copy of the template data directory
// of the server's binary, version and user (template). The install step
// took 7 s (MariaDB 10.11) and 14 s (MySQL 9.7, 187 MB written) of a CI
// leg's time, most of it the disk's, and each test package starts a
// server of its own on each server of the matrix; a copy takes under a
// second. A MySQL copy loses auto.cnf: each server makes a server_uuid of
// its own, as Group Replication's members need.
func (s *Server) initDataDir(ctx context.Context, tmpBase string, chown func(string) error) error {
	tmpl, err := s.template(ctx, tmpBase, chown)
	if err != nil {
		return err
	}
	data := filepath.Join(s.Dir, "data")
	if out, err := exec.CommandContext(ctx, "cp", "-a", tmpl, data).CombinedOutput(); err != nil {
		return fmt.Errorf("mysqld: copying the data directory %s: %w: %s", tmpl, err, out)
	}
	if err := os.Remove(filepath.Join(data, "auto.cnf")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mysqld: %w", err)
	}
	return nil
}

// templatePrefix names the template data directories in the temporary
// directory (of the root, for a server in one); reapStale leaves them.
const templatePrefix = "sqlelect-datadir-"

// template returns the template data directory of the server's binary,
// version and user in tmpBase, made with the flavor's install step the
// first time: in a directory of its own, then renamed into place, so that
// processes starting servers at once find a whole one or none (each may
// then make one: one rename wins, the others' are removed).
func (s *Server) template(ctx context.Context, tmpBase string, chown func(string) error) (string, error) {
	sum := sha256.Sum256([]byte(strings.Join([]string{s.root, s.binary, s.version, s.runAs}, "\x00")))
	final := filepath.Join(tmpBase, templatePrefix+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(final); err == nil {
		return filepath.Join(final, "data"), nil
	}
	build, err := os.MkdirTemp(tmpBase, templatePrefix+"new-")
	if err != nil {
		return "", fmt.Errorf("mysqld: %w", err)
	}
	defer os.RemoveAll(build) // moved into place, or not needed
	for _, d := range []string{build, filepath.Join(build, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("mysqld: %w", err)
		}
		if err := chown(d); err != nil {
			return "", fmt.Errorf("mysqld: chown %s to mysql: %w", d, err)
		}
	}
	if err := s.install(ctx, build); err != nil {
		return "", err
	}
	if err := os.Rename(build, final); err != nil {
		if _, serr := os.Stat(final); serr != nil {
			return "", fmt.Errorf("mysqld: %w", err)
		}
	}
	return filepath.Join(final, "data"), nil
}

// install creates dir/data with the flavor's install step.
func (s *Server) install(ctx context.Context, dir string) error {
	datadir := inRoot(s.root, filepath.Join(dir, "data"))
	tmpdir := inRoot(s.root, filepath.Join(dir, "tmp"))
	var name string
	var args []string
	switch s.flavor {
	case oracleMySQL:
		name = s.binary
		args = []string{"--no-defaults", "--initialize-insecure", "--datadir=" + datadir, "--tmpdir=" + tmpdir}
	default:
		var err error
		name, err = findInstallDB(s.root, s.binary)
		if err != nil {
			return err
		}
		// Unknown options such as --tmpdir are passed on to mariadbd.
		args = []string{"--no-defaults", "--datadir=" + datadir, "--tmpdir=" + tmpdir, "--auth-root-authentication-method=normal"}
		if base := filepath.Dir(filepath.Dir(s.binary)); base != "/usr" && base != "/" {
			args = append(args, "--basedir="+base)
		}
	}
	if s.runAs != "" {
		args = append(args, "--user="+s.runAs)
	}
	logPath := filepath.Join(dir, "install.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("mysqld: %w", err)
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, name, args...)
	if s.root != "" {
		cmd = exec.CommandContext(ctx, "chroot", append([]string{s.root, name}, args...)...)
	}
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return signalGroup(cmd, sigKill) }
	cmd.WaitDelay = stopTimeout
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = fmt.Errorf("%w (%v)", ctxErr, err)
		}
		return fmt.Errorf("mysqld: %s %s: %w; output:\n%s",
			name, strings.Join(args, " "), err, tailFile(logPath, 0))
	}
	return nil
}

// killAndWait sends SIGKILL to p's process group and waits up to
// stopTimeout for the process to exit.
func killAndWait(p *process) error {
	if !p.running() {
		return nil
	}
	if err := signalGroup(p.cmd, sigKill); err != nil && p.running() {
		return fmt.Errorf("mysqld: kill pid %d: %w", p.cmd.Process.Pid, err)
	}
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("mysqld: pid %d did not exit %v after SIGKILL", p.cmd.Process.Pid, stopTimeout)
	}
}

func startTimeout(opts Options) time.Duration {
	if opts.StartTimeout > 0 {
		return opts.StartTimeout
	}
	return DefaultStartTimeout
}

// findServer returns the path of mariadbd or, failing that, mysqld: on the
// host, or inside root (as seen from inside it).
func findServer(root string) (string, error) {
	if root != "" {
		for _, name := range []string{"mariadbd", "mysqld"} {
			if p := filepath.Join(root, "usr/sbin", name); isExecutable(p) {
				return "/usr/sbin/" + name, nil
			}
		}
		return "", fmt.Errorf("mysqld: %w (in the Debian root %s)", ErrNoServer, root)
	}
	for _, name := range []string{"mariadbd", "mysqld"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, dir := range searchDirs {
			if p := filepath.Join(dir, name); isExecutable(p) {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("mysqld: %w", ErrNoServer)
}

// findInstallDB returns MariaDB's data directory installer that goes with
// the server binary.
func findInstallDB(root, binary string) (string, error) {
	if root != "" {
		for _, name := range []string{"mariadb-install-db", "mysql_install_db"} {
			if isExecutable(filepath.Join(root, "usr/bin", name)) {
				return "/usr/bin/" + name, nil
			}
		}
		return "", fmt.Errorf("mysqld: no mariadb-install-db in the Debian root %s", root)
	}
	base := filepath.Dir(filepath.Dir(binary))
	var tried []string
	for _, name := range []string{"mariadb-install-db", "mysql_install_db"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, dir := range []string{filepath.Dir(binary), filepath.Join(base, "scripts"), filepath.Join(base, "bin"), "/usr/bin", "/usr/local/bin"} {
			p := filepath.Join(dir, name)
			if isExecutable(p) {
				return p, nil
			}
			tried = append(tried, p)
		}
	}
	return "", fmt.Errorf("mysqld: found %s but no mariadb-install-db or mysql_install_db on PATH or at %s; install mariadb-server (apt-get install -y mariadb-server)",
		binary, strings.Join(tried, ", "))
}

// detectFlavor tells MariaDB from Oracle MySQL by the binary's --version,
// which it returns too.
func detectFlavor(ctx context.Context, root, binary string) (flavor, string, error) {
	cmd := exec.CommandContext(ctx, binary, "--no-defaults", "--version")
	if root != "" {
		cmd = exec.CommandContext(ctx, "chroot", root, binary, "--no-defaults", "--version")
	}
	out, err := cmd.CombinedOutput()
	version := strings.TrimSpace(string(out))
	if err != nil {
		return 0, "", fmt.Errorf("mysqld: %s --version: %w: %s", binary, err, version)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return mariaDB, version, nil
	}
	return oracleMySQL, version, nil
}

// checkVersion fails when the server found is not the one asked for (a
// Debian suite moved on, or the host has another version).
func checkVersion(name, version string) error {
	want := ""
	switch name {
	case ServerMariaDB1011:
		want = "10.11."
	default:
		want = rootSpecs[name].version
	}
	if want != "" && !strings.Contains(version, want) {
		return fmt.Errorf("mysqld: server %s asked for, but the binary says %q", name, version)
	}
	return nil
}

// command runs the server binary with args, in its root if it has one.
func (s *Server) command(args ...string) *exec.Cmd {
	if s.root != "" {
		return exec.Command("chroot", append([]string{s.root, s.binary}, args...)...)
	}
	return exec.Command(s.binary, args...)
}

// path is Dir/elem as the server sees it (inside its root).
func (s *Server) path(elem string) string { return inRoot(s.root, filepath.Join(s.Dir, elem)) }

// Version returns the server binary's --version line.
func (s *Server) Version() string { return s.version }

// Name returns the server's name (one of Servers()).
func (s *Server) Name() string { return s.name }

// makeDir creates dir (or a temporary directory when dir is ""), refusing a
// non-empty existing one since Stop will remove it.
func makeDir(dir, tmpBase string) (string, error) {
	if dir == "" {
		if err := os.MkdirAll(tmpBase, 0o1777); err != nil {
			return "", fmt.Errorf("mysqld: %w", err)
		}
		d, err := os.MkdirTemp(tmpBase, dirPrefix+"*")
		if err != nil {
			return "", fmt.Errorf("mysqld: %w", err)
		}
		return d, nil
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("mysqld: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("mysqld: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("mysqld: %w", err)
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("mysqld: Options.Dir %s is not empty (Stop would delete it)", dir)
	}
	return dir, nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("mysqld: find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("mysqld: find a free port: %w", err)
	}
	return port, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// tailFile returns at most the last 30 lines (and 8 KiB) written to path
// after offset.
func tailFile(path string, offset int64) string {
	const maxBytes, maxLines = 8 << 10, 30
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	start := max(offset, fi.Size()-maxBytes)
	buf := make([]byte, fi.Size()-start)
	n, _ := f.ReadAt(buf, start)
	lines := strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return "\t" + strings.Join(lines, "\n\t")
}
