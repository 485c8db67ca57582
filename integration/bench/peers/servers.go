package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/schema"
)

// counter reads a server's cumulative request and write counts.
type counter func(ctx context.Context) (requests, writes float64, err error)

// mariadb is the throwaway MariaDB (internal/mysqld) of the MariaDB peers.
type mariadb struct {
	server  *mysqld.Server
	dsn     string
	admin   *sql.DB
	version string
}

func startMariaDB(ctx context.Context) (*mariadb, error) {
	m := &mariadb{}
	if dsn := os.Getenv("SQLELECT_TEST_DSN"); dsn != "" {
		m.dsn = dsn
	} else {
		s, err := mysqld.Start(ctx, mysqld.Options{
			ExtraArgs: []string{"--max-connections=1000"},
			Logf:      func(f string, a ...any) { fmt.Fprintf(os.Stderr, "peers: "+f+"\n", a...) },
		})
		if err != nil {
			return nil, err
		}
		m.server, m.dsn = s, s.DSN("")
	}
	db, err := sql.Open("mysql", m.dsn)
	if err != nil {
		m.close()
		return nil, err
	}
	m.admin = db
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&m.version); err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

func (m *mariadb) close() {
	if m.admin != nil {
		m.admin.Close()
	}
	if m.server != nil {
		_ = m.server.Stop()
	}
}

// database creates a database with sqlelect's table, the seed recipe's
// table and the table fenced writes go to, and returns its DSN (with
// params added).
func (m *mariadb) database(ctx context.Context, params map[string]string) (string, error) {
	name := "peers_" + randHex(5)
	if _, err := m.admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	cfg, err := mysql.ParseDSN(m.dsn)
	if err != nil {
		return "", err
	}
	cfg.DBName = name
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	for k, v := range params {
		cfg.Params[k] = v
	}
	cfg.InterpolateParams = true
	dsn := cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if err := schema.New(db).Up(ctx); err != nil {
		return "", err
	}
	for _, q := range []string{
		"CREATE TABLE " + name + `.seed_election (anchor tinyint unsigned NOT NULL, service_id varchar(128) NOT NULL,
  last_seen_active timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, PRIMARY KEY (anchor))`,
		"CREATE TABLE " + name + ".peer_fence (n bigint NOT NULL AUTO_INCREMENT PRIMARY KEY, who varchar(64) NOT NULL)",
	} {
		if _, err := m.admin.ExecContext(ctx, q); err != nil {
			return "", err
		}
	}
	return dsn, nil
}

// rtt measures the loopback round trip of `SELECT 1` (its text, one
// COM_QUERY: what each of the library's statements costs at least) on one
// connection, n times after a warm-up, and describes its p50 and p99.
func (m *mariadb) rtt(ctx context.Context, n int) (string, error) {
	c, err := m.admin.Conn(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close()
	d := make([]time.Duration, n)
	var one int
	for i := -n / 10; i < n; i++ {
		start := time.Now()
		if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			return "", err
		}
		if i >= 0 {
			d[i] = time.Since(start)
		}
	}
	slices.Sort(d)
	return fmt.Sprintf("Loopback round trip of `SELECT 1` to %s through database/sql, %d samples: p50 %v, p99 %v.\n\n",
		serverLabel(m.version), n, d[n/2].Round(time.Microsecond), d[n*99/100].Round(time.Microsecond)), nil
}

// counts: statements (Questions) and write statements (Com_insert,
// Com_update, Com_delete, Com_replace). A COM_PING is not a statement.
func (m *mariadb) counts(ctx context.Context) (float64, float64, error) {
	rows, err := m.admin.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions','Com_insert','Com_update','Com_delete','Com_replace')")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	var q, w float64
	for rows.Next() {
		var k string
		var v float64
		if err := rows.Scan(&k, &v); err != nil {
			return 0, 0, err
		}
		if strings.EqualFold(k, "Questions") {
			q = v
		} else {
			w += v
		}
	}
	return q, w, rows.Err()
}

// daemon is a coordination server run as a child process.
type daemon struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	err     error         // cmd.Wait's, once exited is closed
	dir     string
	addr    string // client host:port
	version string
}

func (d *daemon) close() {
	if d == nil {
		return
	}
	if d.exited != nil {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(5 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	}
	if d.dir != "" {
		os.RemoveAll(d.dir)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start starts d.cmd with its output in d.dir/log.
func (d *daemon) start(log string) error {
	logf, err := os.Create(filepath.Join(d.dir, log))
	if err != nil {
		return err
	}
	defer logf.Close()
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		return err
	}
	d.exited = make(chan struct{})
	go func() { d.err = d.cmd.Wait(); close(d.exited) }()
	return nil
}

// waitUp waits until ready succeeds, the process exits, or 60 s pass.
func waitUp(ctx context.Context, d *daemon, ready func() error) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-d.exited:
			b, _ := os.ReadFile(filepath.Join(d.dir, "log"))
			return fmt.Errorf("%s exited: %v: %s", d.cmd.Path, d.err, b)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready within 60 s: %v", d.cmd.Path, err)
		}
	}
}

// startEtcd runs Debian's etcd (etcd-server) as a single member on loopback
// ports with a data directory of its own, with its defaults otherwise (it
// fsyncs its WAL on every write).
func startEtcd(ctx context.Context) (*daemon, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("etcd not found (Debian: apt-get install etcd-server): %w", err)
	}
	cp, err := freePort()
	if err != nil {
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "peers-etcd-")
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", cp)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pp)
	d := &daemon{dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", cp)}
	d.cmd = exec.Command(bin, "--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench="+peer, "--initial-cluster-state", "new", "--log-level", "warn")
	if err := d.start("log"); err != nil {
		return nil, err
	}
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		f := strings.Fields(string(out))
		if len(f) >= 3 {
			d.version = "etcd " + f[2]
		}
	}
	err = waitUp(ctx, d, func() error {
		r, err := http.Get(client + "/health")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if !strings.Contains(string(b), `"true"`) {
			return fmt.Errorf("health: %s", b)
		}
		return nil
	})
	if err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// etcdCounts: gRPC messages received (requests, keep-alives included) and
// raft proposals committed (writes), from etcd's /metrics.
func etcdCounts(addr string) counter {
	return func(ctx context.Context) (float64, float64, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, 0, err
		}
		defer r.Body.Close()
		var q, w float64
		sc := bufio.NewScanner(r.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			f := strings.Fields(l)
			if len(f) != 2 {
				continue
			}
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				continue
			}
			switch {
			case strings.HasPrefix(l, "grpc_server_msg_received_total{"):
				q += v
			case strings.HasPrefix(l, "etcd_server_proposals_committed_total "):
				w = v
			}
		}
		return q, w, sc.Err()
	}
}

// startZooKeeper runs Debian's ZooKeeper 3.8 standalone (the server class of
// the zookeeper package, not the system service) on a loopback port with
// its own data directory. tickTime is 200 ms so that a 2 s session timeout
// is allowed and expires within a tick of 2 s (with the default 2000 ms
// tick, sessions expire on 2 s tick boundaries).
func startZooKeeper(ctx context.Context) (*daemon, error) {
	jar := "/usr/share/java/zookeeper.jar"
	if _, err := os.Stat(jar); err != nil {
		return nil, fmt.Errorf("ZooKeeper not found (Debian: apt-get install zookeeper): %w", err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java not found (Debian: apt-get install default-jre-headless): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "peers-zk-")
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("tickTime=200\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nminSessionTimeout=400\nmaxSessionTimeout=60000\n4lw.commands.whitelist=mntr,srvr,ruok\nadmin.enableServer=false\n",
		filepath.Join(dir, "data"), port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	d := &daemon{dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port)}
	d.cmd = exec.Command(java, "-Xmx256m", "-cp", jar+":/etc/zookeeper/conf", "-Dzookeeper.log.dir="+dir,
		"org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg"))
	if err := d.start("log"); err != nil {
		return nil, err
	}
	err = waitUp(ctx, d, func() error {
		out, err := fourLetter(d.addr, "srvr")
		if err != nil {
			return err
		}
		if v, ok := field(out, "Zookeeper version:"); ok {
			d.version = "ZooKeeper " + strings.SplitN(v, "-", 2)[0]
			return nil
		}
		return errors.New("srvr: no version yet")
	})
	if err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func fourLetter(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

func field(out, key string) (string, bool) {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// zkCounts: packets received (requests, pings included; mntr) and
// transactions (writes: the counter of the zxid, srvr).
func zkCounts(addr string) counter {
	return func(ctx context.Context) (float64, float64, error) {
		m, err := fourLetter(addr, "mntr")
		if err != nil {
			return 0, 0, err
		}
		var q float64
		for _, l := range strings.Split(m, "\n") {
			if v, ok := strings.CutPrefix(l, "zk_packets_received"); ok {
				q, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
		s, err := fourLetter(addr, "srvr")
		if err != nil {
			return 0, 0, err
		}
		z, ok := field(s, "Zxid:")
		if !ok {
			return 0, 0, errors.New("srvr: no Zxid")
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(z, "0x"), 16, 64)
		if err != nil {
			return 0, 0, err
		}
		return q, float64(n & 0xffffffff), nil
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
