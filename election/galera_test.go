package election_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/doctor"
	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// galeraArgs are the options of a Galera node listening on loopback.
func galeraArgs(t *testing.T, peer int) (args []string, port int) {
	ports, err := mysqld.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	port = ports[0]
	addr := "gcomm://"
	if peer != 0 {
		addr += fmt.Sprintf("127.0.0.1:%d", peer)
	}
	return []string{
		"--wsrep-on=ON", "--wsrep-provider=" + galeraLib, "--wsrep-cluster-address=" + addr,
		"--wsrep-cluster-name=sqlelect-test", "--wsrep-node-address=127.0.0.1",
		fmt.Sprintf("--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d", port, ports[1]),
		"--wsrep-sst-method=rsync", fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", ports[2]),
		"--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
	}, port
}

const galeraLib = "/usr/lib/galera/libgalera_smm.so"

// galeraStarts lets two clusters start at a time: the package's four
// Galera tests run side by side, and four joins (node 2's state transfer
// by rsync) at once on a loaded machine (load average 11) outlasted a
// node's start timeout; one at a time took the package's leg as long as
// running one of the tests alone had (CI, 2026-11-29: 204 s).
var galeraStarts = make(chan struct{}, 2)

// startGalera2 starts a two-node Galera cluster on loopback, with the
// election table migrated into database sqlelect, and returns the nodes.
// extra1 are more options of node 1 (which bootstraps the cluster), env2
// more environment variables of node 2's server. At most two clusters
// start at once (galeraStarts).
func startGalera2(t *testing.T, ctx context.Context, extra1, env2 []string) (n1, n2 *mysqld.Server) {
	t.Helper()
	galeraStarts <- struct{}{}
	defer func() { <-galeraStarts }()
	if testing.Short() {
		t.Skip("starts a two-node Galera cluster")
	}
	if ok, why := mysqld.GaleraSelected(); !ok {
		t.Skip(why)
	}
	if _, err := os.Stat(galeraLib); err != nil {
		t.Skipf("no Galera provider (apt-get install -y galera-4 rsync): %v", err)
	}
	args1, port1 := galeraArgs(t, 0)
	// Galera is MariaDB's, from the host's packages, whatever
	// $SQLELECT_TEST_SERVER picks for the other tests.
	n1, err := mysqld.Start(ctx, mysqld.Options{Server: mysqld.ServerHost, ExtraArgs: append(args1, extra1...), Logf: t.Logf})
	if errors.Is(err, mysqld.ErrNoServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n1.Stop() })
	// A joiner whose state transfer fails exits; node 1 goes on alone, and
	// a second joiner, on fresh ports, starts over (the first failure is
	// logged with the server's log).
	for try := 1; ; try++ {
		args2, _ := galeraArgs(t, port1)
		n2, err = mysqld.Start(ctx, mysqld.Options{Server: mysqld.ServerHost, ExtraArgs: args2, Env: env2, Logf: t.Logf})
		if err == nil {
			break
		}
		if try == 2 {
			t.Fatal(err)
		}
		t.Logf("node 2 did not join, starting another: %v", err)
	}
	t.Cleanup(func() { _ = n2.Stop() })
	db1 := testdb.Open(t, n1.DSN(""))
	if _, err := db1.ExecContext(ctx, "CREATE DATABASE sqlelect"); err != nil {
		t.Fatal(err)
	}
	testdb.Migrate(t, n1.DSN("sqlelect"))
	db2 := testdb.Open(t, n2.DSN(""))
	for {
		var name, state, size string
		err1 := db2.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state)
		err2 := db2.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size)
		var tables int
		err3 := db2.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sqlelect' AND TABLE_NAME = 'service_election'").Scan(&tables)
		if err1 == nil && err2 == nil && err3 == nil && state == "Synced" && size == "2" && tables == 1 {
			return n1, n2
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node 2 not synced: state %q, cluster size %q, table %d (%v)", state, size, tables, errors.Join(err1, err2, err3))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestFencedGaleraTakeover: on Galera, a fenced write of a deposed term
// never commits after the takeover. Leader L on node 1 runs fenced writes
// in a loop (several at once); an operator forces candidate M with Assume
// through node 2, again and again (L takes the row back when M's lease runs
// out). Node 1's binary log (which also logs the write sets applied from
// node 2) gives the order in which node 1 committed every transaction: a
// fenced write whose term is below a term the election row already had is
// a stale write. A share lock on the row is local to node 1 and not part of
// the write set, so it cannot stop this: a fenced transaction certified
// after the takeover was aborted by the takeover's applier and replayed
// after it. Fenced therefore writes the row on Galera, so that the two
// conflict in certification.
func TestFencedGaleraTakeover(t *testing.T) {
	// A two-node cluster of its own on the host's MariaDB (skipped on the
	// other servers): it waits on the nodes' start and state transfer more
	// than it computes, so beside the package's other waiting tests.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	n1, n2 := startGalera2(t, ctx, []string{"--log-bin=node1-bin", "--log-slave-updates=ON", "--server-id=1"}, nil)
	t.Logf("cluster up in %v", time.Since(began).Round(time.Millisecond))
	binlog, err := exec.LookPath("mariadb-binlog")
	if err != nil {
		t.Skipf("no mariadb-binlog to read node 1's binary log: %v", err)
	}
	db1 := testdb.Open(t, n1.DSN("sqlelect"))
	db2 := testdb.Open(t, n2.DSN("sqlelect"))
	if _, err := db1.ExecContext(ctx, `CREATE TABLE fenced_galera (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, term BIGINT UNSIGNED NOT NULL, writer INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	name := "fenced-galera-" + randHex(4)
	const lease = 600 * time.Millisecond
	l, err := election.NewTable(db1, election.Config{Name: name, ID: "L", LeaseDuration: lease,
		Tuning: election.TuningConfig{RenewDeadline: 400 * time.Millisecond, RenewInterval: 100 * time.Millisecond, RetryInterval: 50 * time.Millisecond, QueryTimeout: 300 * time.Millisecond, JitterFactor: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- l.Run(rctx) }()
	defer func() { rcancel(); <-runDone }()

	// Writers: fenced inserts while L leads, for the whole test.
	const writers = 4
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				term := l.Term()
				if term == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				err := l.Fenced(ctx, func(tx *sql.Tx) error {
					_, err := tx.Exec("INSERT INTO fenced_galera (term, writer) VALUES (?, ?)", term, w)
					return err
				})
				kind := "ok"
				switch {
				case errors.Is(err, election.ErrNotLeader):
					kind = "not leader"
				case err != nil:
					kind = "error"
				}
				mu.Lock()
				counts[kind]++
				mu.Unlock()
			}
		}()
	}

	// Takeovers through node 2, each while L leads and writes.
	const takeovers = 12
	failedAssumes := 0
	for i := range takeovers {
		for deadline := time.Now().Add(10 * time.Second); !l.IsLeader(); time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("takeover %d: L not leading again", i)
			}
		}
		time.Sleep(50*time.Millisecond + time.Duration(i)*7*time.Millisecond)
		// A takeover through node 2 loses certification to a fenced write
		// in flight on node 1 (error 1213): retry, as an operator would.
		// L writes back to back, and Assume's transaction also writes the
		// history after the row (migration 10): about 25 tries each here,
		// 2 without the history.
		for try := 1; ; try++ {
			actx, acancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := ops(db2).Assume(actx, name, "M")
			acancel()
			if err == nil {
				break
			}
			if try == 1000 {
				t.Fatalf("takeover %d: %v", i, err)
			}
			failedAssumes++
			time.Sleep(time.Millisecond)
		}
	}
	// L claims the row again after the last takeover too: its claim,
	// written through node 1, is each takeover's change of term that node
	// 1's binary log must show (node 2's Assume may not be applied there
	// yet when the log is read).
	for deadline := time.Now().Add(10 * time.Second); !l.IsLeader(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after takeover %d: L not leading again", takeovers)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("fenced writes: %v; %d takeovers, %d Assume calls failed (1213) and were retried (%v)",
		counts, takeovers, failedAssumes, time.Since(began).Round(time.Millisecond))

	stale, writes, changes := staleFencedWrites(t, ctx, binlog, n1, db1, name)
	t.Logf("node 1's binary log: %d fenced writes, %d changes of term, %d fenced writes committed after their term was superseded", writes, changes, stale)
	// Not vacuous: the takeovers show in node 1's log. Not one change per
	// takeover: the loop goes on as soon as L leads, and L may not have
	// noticed the last Assume yet (an Assume keeps the old row's last
	// renewal, so L then takes the expired row at once, standing down and
	// leading again in one step): two Assumes can precede one take of L's.
	// Since the term floor, runs gave 9 to 18 changes for 12 takeovers.
	if changes < takeovers/2 {
		t.Errorf("only %d changes of term in node 1's binary log; want at least %d", changes, takeovers/2)
	}
	if stale != 0 {
		t.Errorf("%d fenced writes of a deposed term committed after the takeover", stale)
	}
}

// staleFencedWrites reads node 1's binary log in commit order and counts
// the rows inserted into fenced_galera whose term is lower than a term the
// election's row had before. It also returns how many fenced rows and how
// many changes of the row's term it saw.
func staleFencedWrites(t *testing.T, ctx context.Context, binlog string, n1 *mysqld.Server, db1 *sql.DB, name string) (stale, writes, changes int) {
	t.Helper()
	col := func(table, column string) int {
		var pos int
		if err := db1.QueryRowContext(ctx, `SELECT ORDINAL_POSITION FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = 'sqlelect' AND TABLE_NAME = ? AND COLUMN_NAME = ?`, table, column).Scan(&pos); err != nil {
			t.Fatal(err)
		}
		return pos
	}
	anchorCol, termCol, fencedTermCol := col("service_election", "anchor"), col("service_election", "term"), col("fenced_galera", "term")
	var logs []string
	rows, err := db1.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var f string
		var size any
		if err := rows.Scan(&f, &size); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(n1.Addr, ":")
	cmd := exec.CommandContext(ctx, binlog, append([]string{"--read-from-remote-server", "--host=" + host,
		"--port=" + port, "--user=root", "--base64-output=DECODE-ROWS", "--verbose"}, logs...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", binlog, err)
	}
	// Row events as decoded by mariadb-binlog --verbose:
	//   ### INSERT INTO `db`.`t` / ### UPDATE `db`.`t` / ### DELETE FROM `db`.`t`
	//   ### WHERE (before image) / ### SET (after image)
	//   ###   @N=value
	event := regexp.MustCompile("^### (INSERT INTO|UPDATE|DELETE FROM) `[^`]*`\\.`([^`]*)`")
	field := regexp.MustCompile(`^###   @(\d+)=(.*)$`)
	var table, section string
	img := map[int]string{}
	var maxTerm uint64
	flush := func() {
		if section == "SET" {
			switch table {
			case "service_election":
				if strings.Trim(img[anchorCol], "'") == name {
					term, _ := strconv.ParseUint(strings.Fields(img[termCol])[0], 10, 64)
					if term > maxTerm {
						if maxTerm != 0 {
							changes++
						}
						maxTerm = term
					}
				}
			case "fenced_galera":
				writes++
				term, _ := strconv.ParseUint(strings.Fields(img[fencedTermCol])[0], 10, 64)
				if term < maxTerm {
					stale++
				}
			}
		}
		img = map[int]string{}
		section = ""
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := event.FindStringSubmatch(line); m != nil {
			flush()
			table = m[2]
			continue
		}
		switch line {
		case "### SET", "### WHERE":
			flush()
			section = strings.TrimPrefix(line, "### ")
			continue
		}
		if m := field.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			img[n] = m[2]
			continue
		}
		flush()
	}
	flush()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if writes == 0 {
		t.Fatalf("no fenced write in node 1's binary log (%d bytes of mariadb-binlog output)", len(out))
	}
	return stale, writes, changes
}

// TestCheckGalera: on a Galera node the doctor finds the table backend safe
// and fails the lock backend's topology, as the docs say; every other
// property passes.
func TestCheckGalera(t *testing.T) {
	// A two-node cluster of its own on the host's MariaDB (skipped on the
	// other servers): it waits on the nodes' start and state transfer more
	// than it computes, so beside the package's other waiting tests.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n1, _ := startGalera2(t, ctx, nil, nil)
	r, err := doctor.Check(ctx, testdb.Open(t, n1.DSN("sqlelect")), election.Config{})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got := r.Failed(doctor.BackendTable); len(got) != 0 {
		t.Errorf("table backend fails %v on Galera", got)
	}
	if got := r.Failed(doctor.BackendLock); len(got) != 1 || got[0] != doctor.PropTopology {
		t.Errorf("lock backend fails %v on Galera, want [topology]", got)
	}
	if f, _ := r.Find(doctor.PropTopology); !strings.Contains(f.Detail, "Galera") {
		t.Errorf("topology: %s", f.Detail)
	}
	for _, f := range r.For(doctor.BackendTable) {
		want := doctor.CheckPass
		if f.Property == doctor.PropTopology {
			want = doctor.CheckWarn
		}
		if f.Status != want {
			t.Errorf("%s: %s (%s), want %s", f.Property, f.Status, f.Detail, want)
		}
	}
}
