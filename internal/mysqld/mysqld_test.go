package mysqld_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// start starts a server for this test and stops it in t.Cleanup. Without a
// server binary it fails the test, or skips it under -short.
func start(ctx context.Context, t *testing.T, opts mysqld.Options) *mysqld.Server {
	t.Helper()
	opts.Logf = t.Logf
	s, err := mysqld.Start(ctx, opts)
	if errors.Is(err, mysqld.ErrNoServer) && testing.Short() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestKillRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	s := start(ctx, t, mysqld.Options{})

	db := open(t, s.DSN(""))
	for _, q := range []string{
		"CREATE DATABASE crash",
		"CREATE TABLE crash.t (id INT PRIMARY KEY) ENGINE=InnoDB",
		"INSERT INTO crash.t VALUES (1)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	pid := s.Pid()
	if pid == 0 {
		t.Fatal("Pid() = 0 for a running server")
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if got := s.Pid(); got != 0 {
		t.Fatalf("Pid() after Kill = %d, want 0", got)
	}
	if err := s.Kill(); err == nil {
		t.Error("second Kill: got nil error, want 'not running'")
	}
	pingCtx, pingCancel := context.WithTimeout(ctx, 5*time.Second)
	err := db.PingContext(pingCtx)
	pingCancel()
	if err == nil {
		t.Fatal("ping after Kill succeeded")
	}

	port := s.Port
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Port != port {
		t.Errorf("Port after Restart = %d, want %d", s.Port, port)
	}
	if got := s.Pid(); got == 0 || got == pid {
		t.Errorf("Pid() after Restart = %d, want a new non-zero pid (old %d)", got, pid)
	}

	db2 := open(t, s.DSN("crash"))
	var n int
	if err := db2.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil {
		t.Fatalf("query after Restart: %v", err)
	}
	if n != 1 {
		t.Errorf("rows after crash and restart = %d, want 1", n)
	}

	// Restart of a running server shuts it down first.
	if err := s.Restart(ctx); err != nil {
		t.Fatalf("Restart of a running server: %v", err)
	}
	if err := db2.PingContext(ctx); err != nil {
		t.Fatalf("ping after second Restart: %v", err)
	}
}

func TestStopRemovesDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	// As root the server runs as user mysql, which cannot enter
	// t.TempDir() (mode 0700); use a parent it can.
	parent, err := os.MkdirTemp("", "sqlelect-mysqld-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "server")
	s := start(ctx, t, mysqld.Options{Server: mysqld.ServerHost, Dir: dir, ExtraArgs: []string{"--character-set-server=utf8mb4"}})
	if s.Dir != dir {
		t.Errorf("Dir = %q, want %q", s.Dir, dir)
	}
	var cs string
	if err := open(t, s.DSN("")).QueryRowContext(ctx, "SELECT @@character_set_server").Scan(&cs); err != nil {
		t.Fatalf("query: %v", err)
	}
	if cs != "utf8mb4" {
		t.Errorf("character_set_server = %q, want utf8mb4 (ExtraArgs ignored?)", cs)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Stop, stat %s: %v; want not exist", dir, err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := s.Restart(ctx); err == nil {
		t.Error("Restart after Stop: got nil error")
	}
}

func TestStartRefusesNonEmptyDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := mysqld.Start(ctx, mysqld.Options{Server: mysqld.ServerHost, Dir: dir})
	if errors.Is(err, mysqld.ErrNoServer) {
		t.Skip(err)
	}
	if err == nil {
		s.Stop()
		t.Fatal("Start with a non-empty Dir succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Errorf("file in Dir was touched: %v", err)
	}
}

func TestBadArgsReportLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := mysqld.Start(ctx, mysqld.Options{ExtraArgs: []string{"--no-such-option-sqlelect"}})
	if errors.Is(err, mysqld.ErrNoServer) {
		t.Skip(err)
	}
	if err == nil {
		s.Stop()
		t.Fatal("Start with a bad option succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-option-sqlelect") {
		t.Errorf("error does not include the server log: %v", err)
	}
}

func TestUnsearchableDirIsReported(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root drops privileges to user mysql")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	dir := filepath.Join(t.TempDir(), "server") // t.TempDir() is mode 0700
	s, err := mysqld.Start(ctx, mysqld.Options{Server: mysqld.ServerHost, Dir: dir})
	if errors.Is(err, mysqld.ErrNoServer) {
		t.Skip(err)
	}
	if err == nil {
		s.Stop()
		t.Skip("server started: no user mysql on this machine, so it runs as root")
	}
	if !strings.Contains(err.Error(), "not searchable by user mysql") {
		t.Errorf("error does not explain the permission problem: %v", err)
	}
	if _, statErr := os.Stat(dir); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("failed Start left %s behind (stat: %v)", dir, statErr)
	}
}

func TestDSN(t *testing.T) {
	s := &mysqld.Server{Port: 3306, Addr: "127.0.0.1:3306"}
	for db, want := range map[string]string{
		"":    "root@tcp(127.0.0.1:3306)/?parseTime=true&time_zone=%27%2B00%3A00%27",
		"app": "root@tcp(127.0.0.1:3306)/app?parseTime=true&time_zone=%27%2B00%3A00%27",
	} {
		if got := s.DSN(db); got != want {
			t.Errorf("DSN(%q) = %s, want %s", db, got, want)
		}
	}
}

// TestConcurrentStarts starts several servers at once: they must get
// distinct ports and directories and not disturb each other's install.
func TestConcurrentStarts(t *testing.T) {
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			t.Cleanup(cancel)
			s := start(ctx, t, mysqld.Options{})
			var port int
			if err := open(t, s.DSN("")).QueryRowContext(ctx, "SELECT @@port").Scan(&port); err != nil {
				t.Fatalf("query: %v", err)
			}
			if port != s.Port {
				t.Errorf("connected to port %d, want %d", port, s.Port)
			}
		})
	}
}

func TestUnknownServer(t *testing.T) {
	_, err := mysqld.Start(context.Background(), mysqld.Options{Server: "oracle-7"})
	if err == nil || !strings.Contains(err.Error(), "unknown server") || !strings.Contains(err.Error(), mysqld.ServerMySQL97) {
		t.Fatalf("Start with an unknown server: %v", err)
	}
}
