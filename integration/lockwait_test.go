package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/integration/testdb"
	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// TestHeldRowLockLeavesServerUsable (issue 12, item 4): an operator's
// transaction holds the election rows' locks (SELECT … FOR UPDATE) for
// longer than the lease while candidates of both backends campaign, on a
// server with max_connections=40. A statement whose client gave up after
// QueryTimeout must not keep waiting on the server for
// innodb_lock_wait_timeout (50 s) while its candidate retries on fresh
// connections: that piles up waiting threads until the server refuses
// everyone (Error 1040). An unrelated client connecting throughout must
// always get in, and the threads waiting for the rows stay few.
func TestHeldRowLockLeavesServerUsable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own and holds a row lock for seconds")
	}
	// A server of its own, and it waits out the operator's lock: beside
	// the package's other waiting tests rather than after them.
	t.Parallel()
	const (
		hold       = 12 * time.Second // the operator's lock
		perBackend = 4                // candidates per backend
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := mysqld.Start(ctx, mysqld.Options{ExtraArgs: []string{"--max-connections=40"}, Logf: t.Logf})
	if errors.Is(err, mysqld.ErrNoServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })

	// root's pools keep their one connection each open for the whole
	// test, made before any candidate runs: one for the operator's
	// transaction, one to watch the server.
	openRoot := func() *sql.DB {
		db := testdb.Open(t, srv.DSN(""))
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		return db
	}
	root, watch := openRoot(), openRoot()
	for _, q := range []string{
		"CREATE DATABASE sqlelect",
		"CREATE USER 'elect'@'%', 'elect'@'localhost', 'elect'@'127.0.0.1', 'app'@'%', 'app'@'localhost', 'app'@'127.0.0.1'",
		"GRANT ALL ON sqlelect.* TO 'elect'@'%', 'elect'@'localhost', 'elect'@'127.0.0.1', 'app'@'%', 'app'@'localhost', 'app'@'127.0.0.1'",
	} {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	testdb.Migrate(t, srv.DSN("sqlelect"))
	// MySQL refuses to bound a write's row-lock wait per statement
	// (SET_VAR(innodb_lock_wait_timeout) is ignored, warning 3637), so the
	// library documents the remedy there: innodb_lock_wait_timeout near
	// QueryTimeout in the candidates' DSN. The test checks that the remedy
	// works; MariaDB needs none (SET STATEMENT … FOR).
	var version string
	if err := root.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	mariadb := strings.Contains(strings.ToLower(version), "mariadb")
	dsnAs := func(user string) string {
		cfg, err := mysql.ParseDSN(srv.DSN("sqlelect"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.User, cfg.Passwd = user, ""
		if !mariadb && user == "elect" {
			cfg.Params["innodb_lock_wait_timeout"] = "1"
		}
		return cfg.FormatDSN()
	}

	// Candidates of both backends, each with its own pool, as processes
	// would have.
	names := map[string]func(*sql.DB, election.Config) (*election.Candidate, error){
		"pileup-table": election.NewTable,
		"pileup-lock":  election.NewLock,
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	leaders := map[string][]election.Election{}
	for name, newElection := range names {
		for i := range perBackend {
			db, err := sql.Open("mysql", dsnAs("elect"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			e, err := newElection(db, election.Config{Name: name, ID: fmt.Sprintf("%s-%d", name, i),
				LeaseDuration: 2 * time.Second, Tuning: election.TuningConfig{RenewDeadline: 1500 * time.Millisecond, RenewInterval: 200 * time.Millisecond, RetryInterval: 200 * time.Millisecond, QueryTimeout: time.Second},
			})
			if err != nil {
				t.Fatal(err)
			}
			leaders[name] = append(leaders[name], e)
			wg.Add(1)
			go func() { defer wg.Done(); _ = e.Run(runCtx) }()
		}
	}
	for name, es := range leaders {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			led := false
			for _, e := range es {
				led = led || e.IsLeader()
			}
			if led {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no leader", name)
			}
		}
	}

	// The unrelated client: a fresh connection every 100 ms.
	app, err := sql.Open("mysql", dsnAs("app"))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	app.SetMaxIdleConns(-1) // never reuse: every query connects
	var (
		mu        sync.Mutex
		appOK     int
		appErrs   []error
		maxWaits  int64
		maxConns  int64
		sampleErr error
	)
	probeCtx, stopProbe := context.WithCancel(ctx)
	var probes sync.WaitGroup
	probes.Add(2)
	go func() {
		defer probes.Done()
		for probeCtx.Err() == nil {
			qctx, qcancel := context.WithTimeout(probeCtx, 2*time.Second)
			var one int
			err := app.QueryRowContext(qctx, "SELECT 1").Scan(&one)
			qcancel()
			mu.Lock()
			if err == nil {
				appOK++
			} else if probeCtx.Err() == nil {
				appErrs = append(appErrs, err)
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	go func() { // threads waiting for a row lock, and connections
		defer probes.Done()
		for probeCtx.Err() == nil {
			var waits, conns int64
			var name string
			err := watch.QueryRowContext(probeCtx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'").Scan(&waits)
			if err == nil {
				err = watch.QueryRowContext(probeCtx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &conns)
			}
			mu.Lock()
			if err != nil && probeCtx.Err() == nil && sampleErr == nil {
				sampleErr = err
			}
			maxWaits, maxConns = max(maxWaits, waits), max(maxConns, conns)
			mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()

	// The operator's transaction, on root's one connection.
	tx, err := root.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SELECT * FROM sqlelect.service_election WHERE anchor IN ('pileup-table', 'pileup-lock') FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	t.Logf("holding both election rows' locks for %v", hold)
	time.Sleep(hold)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	stopProbe()
	probes.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("unrelated client: %d connections made, %d failed; at most %d threads waited for a row lock, %d connections",
		appOK, len(appErrs), maxWaits, maxConns)
	if sampleErr != nil {
		t.Errorf("sampling the server: %v", sampleErr)
	}
	for i, err := range appErrs {
		if i == 5 {
			t.Errorf("… and %d more", len(appErrs)-5)
			break
		}
		t.Errorf("unrelated client: %v", err)
	}
	// Each candidate has at most a statement or two waiting (the bound is
	// 1 s, its retries 1.2 s apart): far fewer than max_connections.
	if maxWaits > 4*perBackend {
		t.Errorf("%d threads waited for the rows' locks at once; want at most %d", maxWaits, 4*perBackend)
	}
	if appOK == 0 {
		t.Error("the unrelated client never connected")
	}
}
