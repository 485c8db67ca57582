package mysqld

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Group Replication: a MySQL Group Replication cluster (the engine of
// InnoDB Cluster) of throwaway servers on loopback, for tests.

// GroupOptions configures StartGroup. The zero value is a 3-node cluster in
// single-primary mode on ServerMySQL97.
type GroupOptions struct {
	// Nodes is the number of members. Default 3.
	Nodes int
	// MultiPrimary starts the group in multi-primary mode (every member
	// accepts writes, group_replication_enforce_update_everywhere_checks
	// on). Default: single-primary mode (the first member is the primary,
	// the others are read-only secondaries).
	MultiPrimary bool
	// Server is the server to run: Oracle MySQL with the
	// group_replication plugin. Default ServerMySQL97 (not
	// $SQLELECT_TEST_SERVER: the host's MariaDB has no Group Replication).
	Server string
	// RootCache: see Options.RootCache.
	RootCache string
	// ExtraArgs are appended to every member's command line, after the
	// Group Replication options StartGroup sets.
	ExtraArgs []string
	// StartTimeout bounds the start of each member and its joining the
	// group, and Rejoin. Default: DefaultStartTimeout (60 s).
	StartTimeout time.Duration
	// Logf, if not nil, receives progress messages.
	Logf func(format string, args ...any)
}

// Group is a running Group Replication cluster started by StartGroup. Its
// methods are safe for concurrent use.
//
// Each member detects an unreachable one after about 5 s (XCom's fixed
// suspicion time) and expels it at once (group_replication_member_expel_timeout
// is 0, instead of MySQL's default 5 s), so a killed primary is replaced
// by a new one elected among the survivors about 5–7 s after the kill.
type Group struct {
	// Nodes are the members, in the order they joined; Nodes[0]
	// bootstrapped the group. Use their DSN, Addr and Port to reach them;
	// use the Group's methods (not Server.Kill or Restart directly) to
	// kill and bring members back.
	Nodes []*Server
	// Name is the group's name (group_replication_group_name, a UUID).
	Name string
	// MultiPrimary is GroupOptions.MultiPrimary.
	MultiPrimary bool

	xcom    []int // each member's group communication (XCom) port
	timeout time.Duration
	logf    func(string, ...any)

	mu   sync.Mutex
	uuid []string // each member's server_uuid
}

// Member is one row of performance_schema.replication_group_members as a
// member sees it.
type Member struct {
	Node  int    // index in Group.Nodes, -1 when the member is not one of them
	UUID  string // server_uuid
	Role  string // PRIMARY or SECONDARY
	State string // ONLINE, RECOVERING, UNREACHABLE, ERROR, OFFLINE
}

// groupRecoveryUser is the account members use for distributed recovery.
const groupRecoveryUser, groupRecoveryPassword = "sqlelect_rpl", "sqlelect_rpl"

// GroupSelected reports whether $SQLELECT_TEST_SERVER selects the server
// Group Replication groups run on (ServerMySQL97): the suites start groups
// only then (make test-matrix's and CI's MySQL 9.7 leg), so that a run on
// another server does not start three MySQL servers too. skip says why not.
func GroupSelected() (ok bool, skip string) {
	if s := os.Getenv(EnvServer); s != ServerMySQL97 {
		return false, fmt.Sprintf("Group Replication tests run with $%s=%s (make test-matrix, CI); it is %q", EnvServer, ServerMySQL97, s)
	}
	return true, ""
}

// GaleraSelected reports whether $SQLELECT_TEST_SERVER selects the host's
// server (unset, ServerHost or ServerMariaDB1011). Galera clusters run on
// the host's MariaDB whatever it selects, so the suites start them only
// then: the legs of make test-matrix and CI on other servers do not run
// the same Galera tests on the host again. skip says why not.
func GaleraSelected() (ok bool, skip string) {
	switch s := os.Getenv(EnvServer); s {
	case "", ServerHost, ServerMariaDB1011:
		return true, ""
	default:
		return false, fmt.Sprintf("Galera tests run on the host's MariaDB, with $%s unset or %s (make test, CI's first leg); it is %q", EnvServer, ServerMariaDB1011, s)
	}
}

// DefaultGroupNodes is the size of a group when GroupOptions.Nodes is 0.
const DefaultGroupNodes = 3

// StartGroup starts opts.Nodes servers (ServerMySQL97 by default, from its
// Debian root: root privileges needed on first use) on loopback, bootstraps
// a group on the first and makes the others join it, and waits until every
// member is ONLINE. On error every member started is stopped. It needs
// Oracle MySQL: with MariaDB it fails.
func StartGroup(ctx context.Context, opts GroupOptions) (*Group, error) {
	n := opts.Nodes
	if n <= 0 {
		n = DefaultGroupNodes
	}
	if opts.Server == "" {
		opts.Server = ServerMySQL97
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	xcom, err := FreePorts(n)
	if err != nil {
		return nil, err
	}
	name, err := newUUID()
	if err != nil {
		return nil, err
	}
	g := &Group{Name: name, MultiPrimary: opts.MultiPrimary, xcom: xcom, timeout: startTimeout(Options{StartTimeout: opts.StartTimeout}),
		logf: logf, uuid: make([]string, n)}
	ok := false
	defer func() {
		if !ok {
			_ = g.Stop()
		}
	}()
	for i := range n {
		begun := time.Now()
		srv, err := Start(ctx, Options{
			Server: opts.Server, RootCache: opts.RootCache, StartTimeout: opts.StartTimeout, Logf: logf,
			ExtraArgs: append(g.args(i), opts.ExtraArgs...),
		})
		if err != nil {
			return nil, fmt.Errorf("mysqld: group member %d: %w", i+1, err)
		}
		g.Nodes = append(g.Nodes, srv)
		if srv.flavor != oracleMySQL {
			return nil, fmt.Errorf("mysqld: Group Replication needs Oracle MySQL; server %s is %s", srv.name, srv.version)
		}
		if err := g.join(ctx, i, i == 0); err != nil {
			return nil, err
		}
		logf("mysqld: group member %d on %s (XCom %d) online in %v", i+1, srv.Addr, xcom[i], time.Since(begun).Round(time.Millisecond))
	}
	ok = true
	return g, nil
}

// args returns member i's Group Replication options.
func (g *Group) args(i int) []string {
	var seeds []string
	for _, p := range g.xcom {
		seeds = append(seeds, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	a := []string{
		"--server-id=" + strconv.Itoa(i+1),
		"--report-host=127.0.0.1",
		"--gtid-mode=ON",
		"--enforce-gtid-consistency=ON",
		"--plugin-load-add=group_replication.so",
		"--group-replication-group-name=" + g.Name,
		"--group-replication-local-address=" + seeds[i],
		"--group-replication-group-seeds=" + strings.Join(seeds, ","),
		"--group-replication-start-on-boot=OFF",
		// A member starts read-only, and stays so until Group Replication
		// makes it a writable member: a restarted member would otherwise
		// take writes outside the group until it rejoins (clients would
		// elect a leader of their own there, and the member could not
		// rejoin: its transactions are not the group's).
		"--super-read-only=ON",
		"--group-replication-member-expel-timeout=0",
		"--group-replication-autorejoin-tries=0",
		"--innodb-buffer-pool-size=64M",
		"--max-connections=300",
	}
	if g.MultiPrimary {
		a = append(a, "--group-replication-single-primary-mode=OFF", "--group-replication-enforce-update-everywhere-checks=ON")
	}
	return a
}

// join starts Group Replication on member i: bootstrapping the group, or
// joining it through distributed recovery; it waits until the member is
// ONLINE.
func (g *Group) join(ctx context.Context, i int, bootstrap bool) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	db, err := g.open(i)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysqld: group member %d: %w", i+1, err)
	}
	defer conn.Close()
	// Every member needs the recovery account, since any member may be a
	// joiner's donor; it is created outside the binary log (each member
	// has its own), once.
	var stmts []string
	var users int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.user WHERE user = ?", groupRecoveryUser).Scan(&users); err != nil {
		return fmt.Errorf("mysqld: group member %d: %w", i+1, err)
	}
	if users == 0 {
		// Only at the member's first start, before any client uses it.
		stmts = []string{
			"SET GLOBAL super_read_only = OFF",
			"SET SQL_LOG_BIN = 0",
			fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", groupRecoveryUser, groupRecoveryPassword),
			fmt.Sprintf("GRANT REPLICATION SLAVE, BACKUP_ADMIN, GROUP_REPLICATION_STREAM, CONNECTION_ADMIN ON *.* TO '%s'@'%%'", groupRecoveryUser),
			"SET SQL_LOG_BIN = 1",
			"SET GLOBAL super_read_only = ON",
		}
	}
	if bootstrap {
		stmts = append(stmts,
			"SET GLOBAL group_replication_bootstrap_group = ON",
			"START GROUP_REPLICATION",
			"SET GLOBAL group_replication_bootstrap_group = OFF")
	} else {
		stmts = append(stmts,
			"SET GLOBAL group_replication_recovery_get_public_key = ON",
			fmt.Sprintf("START GROUP_REPLICATION USER = '%s', PASSWORD = '%s'", groupRecoveryUser, groupRecoveryPassword))
	}
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mysqld: group member %d: %s: %w; server log:\n%s", i+1, q, err, g.Nodes[i].logTail())
		}
	}
	var uuid string
	if err := conn.QueryRowContext(ctx, "SELECT @@global.server_uuid").Scan(&uuid); err != nil {
		return fmt.Errorf("mysqld: group member %d: %w", i+1, err)
	}
	g.mu.Lock()
	g.uuid[i] = uuid
	g.mu.Unlock()
	for {
		ms, err := g.Members(ctx, i)
		if err == nil {
			for _, m := range ms {
				if m.Node == i && m.State == "ONLINE" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mysqld: group member %d not ONLINE: %w (members %v, %v); server log:\n%s", i+1, ctx.Err(), ms, err, g.Nodes[i].logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// open returns a pool of root connections to member i (one connection,
// 2 s to connect).
func (g *Group) open(i int) (*sql.DB, error) {
	cfg := g.Nodes[i].config("")
	cfg.Timeout = 2 * time.Second
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysqld: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	return db, nil
}

// logTail returns the tail of the server's current run's log.
func (s *Server) logTail() string {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return tailFile(s.logPath, 0)
	}
	return p.logTail()
}

// Members returns the group's members as member i sees them. A member that
// left or was expelled sees only itself (OFFLINE or ERROR).
func (g *Group) Members(ctx context.Context, i int) ([]Member, error) {
	db, err := g.open(i)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rows, err := db.QueryContext(qctx, "SELECT MEMBER_ID, MEMBER_ROLE, MEMBER_STATE FROM performance_schema.replication_group_members")
	if err != nil {
		return nil, fmt.Errorf("mysqld: group member %d: %w", i+1, err)
	}
	defer rows.Close()
	var out []Member
	for rows.Next() {
		var m Member
		var role sql.NullString
		if err := rows.Scan(&m.UUID, &role, &m.State); err != nil {
			return nil, fmt.Errorf("mysqld: group member %d: %w", i+1, err)
		}
		m.Role = role.String
		m.Node = g.node(m.UUID)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqld: group member %d: %w", i+1, err)
	}
	return out, nil
}

// node returns the index of the member with server_uuid uuid, or -1.
func (g *Group) node(uuid string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, u := range g.uuid {
		if u != "" && u == uuid {
			return i
		}
	}
	return -1
}

// Primary returns the index of the member that an ONLINE member of a
// majority sees as the ONLINE primary, asking the running members in turn.
// It fails in multi-primary mode and when no running member sees a primary
// in a majority (during an election, or when the group lost its majority).
func (g *Group) Primary(ctx context.Context) (int, error) {
	if g.MultiPrimary {
		return -1, errors.New("mysqld: a multi-primary group has no single primary")
	}
	var errs []error
	for i, srv := range g.Nodes {
		if srv.Pid() == 0 {
			continue
		}
		ms, err := g.Members(ctx, i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		online, primary := 0, -1
		for _, m := range ms {
			if m.State == "ONLINE" {
				online++
				if m.Role == "PRIMARY" {
					primary = m.Node
				}
			}
		}
		if primary >= 0 && online > len(g.Nodes)/2 {
			return primary, nil
		}
		errs = append(errs, fmt.Errorf("member %d sees %d ONLINE of %d, primary %d", i+1, online, len(ms), primary+1))
	}
	return -1, fmt.Errorf("mysqld: no primary: %w", errors.Join(errs...))
}

// WaitPrimary waits until the group has an ONLINE primary other than member
// not (-1: any), and returns it.
func (g *Group) WaitPrimary(ctx context.Context, not int) (int, error) {
	for {
		p, err := g.Primary(ctx)
		if err == nil && p != not {
			return p, nil
		}
		if err == nil {
			err = fmt.Errorf("member %d is still the primary", p+1)
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("mysqld: waiting for a new primary: %w (%v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitOnline waits until member i sees all members ONLINE.
func (g *Group) WaitOnline(ctx context.Context, i int) error {
	for {
		ms, err := g.Members(ctx, i)
		online := 0
		for _, m := range ms {
			if m.State == "ONLINE" {
				online++
			}
		}
		if err == nil && online == len(g.Nodes) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mysqld: group member %d: waiting for %d members ONLINE: %w (members %v, %v)", i+1, len(g.Nodes), ctx.Err(), ms, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Sync waits until every running member has applied the transactions that
// member from has committed (its gtid_executed), for example a schema set
// up through from.
func (g *Group) Sync(ctx context.Context, from int) error {
	db, err := g.open(from)
	if err != nil {
		return err
	}
	var gtids string
	err = db.QueryRowContext(ctx, "SELECT @@global.gtid_executed").Scan(&gtids)
	db.Close()
	if err != nil {
		return fmt.Errorf("mysqld: group member %d: %w", from+1, err)
	}
	for i, srv := range g.Nodes {
		if i == from || srv.Pid() == 0 {
			continue
		}
		db, err := g.open(i)
		if err != nil {
			return err
		}
		var timedOut int
		err = db.QueryRowContext(ctx, "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, 60)", gtids).Scan(&timedOut)
		db.Close()
		if err == nil && timedOut != 0 {
			err = errors.New("timed out")
		}
		if err != nil {
			return fmt.Errorf("mysqld: group member %d: waiting for member %d's transactions: %w", i+1, from+1, err)
		}
	}
	return nil
}

// Kill kills member i (SIGKILL, as a crash would). The others expel it
// after about 5 s and, if it was the primary, elect a new one. Rejoin
// brings it back.
func (g *Group) Kill(i int) error { return g.Nodes[i].Kill() }

// Leave stops Group Replication on member i (STOP GROUP_REPLICATION): it
// leaves the group at once, the others elect a new primary if it was the
// primary, and the server keeps running, read-only (super_read_only),
// with its clients' connections open. Rejoin brings it back.
func (g *Group) Leave(ctx context.Context, i int) error {
	db, err := g.open(i)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if _, err := db.ExecContext(ctx, "STOP GROUP_REPLICATION"); err != nil {
		return fmt.Errorf("mysqld: group member %d: STOP GROUP_REPLICATION: %w", i+1, err)
	}
	return nil
}

// SetPrimary makes member i the primary of a single-primary group
// (group_replication_set_as_primary: the old primary finishes its running
// transactions, up to a few seconds, and turns read-only; its clients stay
// connected to it).
func (g *Group) SetPrimary(ctx context.Context, i int) error {
	g.mu.Lock()
	uuid := g.uuid[i]
	g.mu.Unlock()
	p, err := g.Primary(ctx)
	if err != nil {
		return err
	}
	db, err := g.open(p)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	// The function wants a constant: no placeholder (a server_uuid is hex
	// digits and dashes).
	if _, err := db.ExecContext(ctx, "SELECT group_replication_set_as_primary('"+uuid+"')"); err != nil {
		return fmt.Errorf("mysqld: group_replication_set_as_primary(member %d): %w", i+1, err)
	}
	return nil
}

// Rejoin brings member i back into the group after Kill (it restarts the
// server) or Leave, and waits until it is ONLINE (it catches up by
// distributed recovery first). A member that is ONLINE is left alone.
func (g *Group) Rejoin(ctx context.Context, i int) error {
	srv := g.Nodes[i]
	if srv.Pid() == 0 {
		if err := srv.Restart(ctx); err != nil {
			return err
		}
	} else if ms, err := g.Members(ctx, i); err == nil {
		for _, m := range ms {
			if m.Node == i && m.State == "ONLINE" {
				return nil
			}
		}
	}
	return g.join(ctx, i, false)
}

// Stop stops every member and removes their data; see Server.Stop.
func (g *Group) Stop() error {
	var errs []error
	for _, srv := range g.Nodes {
		errs = append(errs, srv.Stop())
	}
	return errors.Join(errs...)
}

// FreePorts returns n distinct TCP ports of 127.0.0.1 that were free a
// moment ago, for a cluster's own ports (Galera's, Group Replication's),
// which nothing retries when they are taken. They come from below the
// kernel's ephemeral range (ip_local_port_range), so that neither a
// client's outgoing connection nor a listener on port 0 can take one
// before its server binds it: a Galera joiner's state transfer failed
// once in CI (2026-11-30) with its rsync port picked from that range
// while other packages' tests opened connections by the thousand.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	low := ephemeralLow()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if low > minPort+1000 && tries < 100*n {
			addr = "127.0.0.1:" + strconv.Itoa(minPort+mrand.IntN(low-minPort))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // in use: draw again
			}
			return nil, fmt.Errorf("mysqld: find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// minPort is the lowest port FreePorts draws.
const minPort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range, or 0 if
// it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}

// newUUID returns a random (version 4) UUID.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("mysqld: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}
