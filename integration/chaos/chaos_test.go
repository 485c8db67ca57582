//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/integration/mysqld"
)

func TestMain(m *testing.M) {
	// The driver logs every connection the faults cut; the checker and the
	// candidates' records say what matters.
	_ = mysql.SetLogger(&mysql.NopLogger{})
	code := m.Run()
	printSummary()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// candidatesPerServer is how many candidate processes campaign on one
// server.
const candidatesPerServer = 3

// TestChaos injects every fault kind, rounds times each in a random order,
// into one election per backend on a dedicated throwaway server, with
// each candidate behind its own toxiproxy, and checks the records.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite takes minutes; skipped under -short")
	}
	n := rounds(t)
	candidateBinary(t)
	for _, backend := range []string{"table", "lock"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			chaosSingleServer(t, backend, n)
		})
	}
}

// budget bounds a run of rounds of each of kinds faults.
func budget(rounds, kinds int) time.Duration {
	return 2*time.Minute + time.Duration(rounds*kinds)*20*time.Second
}

func chaosSingleServer(t *testing.T, backend string, rounds int) {
	tm := defaultTimings
	var srv *mysqld.Server
	var admin *sql.DB
	adminFor := func() *sql.DB { return admin }
	faults := []fault{
		{kindKill9, kill9},
		{kindSigstop, sigstop},
		{kindResign, resign},
		{kindDBRestart, func(c *cluster, l *slot) (string, error) { return dbRestart(srv)(c, l) }},
		{kindKillConn, killConn(func(*slot) *sql.DB { return admin })},
		{kindNetLatency, netLatency},
		{kindNetBlack, netBlackhole},
		{kindNetReset, netReset},
		{kindNetSlicer, netSlicer},
		{kindNetLimit, netLimit},
		{kindNetDown, netDown},
		{kindOpReplace, opReplace(adminFor)},
		{kindOpDelete, opDelete(adminFor)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget(rounds, len(faults)))
	t.Cleanup(cancel)

	var err error
	srv, err = mysqld.Start(ctx, mysqld.Options{ExtraArgs: []string{"--max-connections=500", "--innodb-buffer-pool-size=64M"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	admin, _ = setupDatabase(t, ctx, srv.DSN(""))

	tox := toxiServer()
	c := newCluster(t, ctx, backend, backend, tm)
	for i := 1; i <= candidatesPerServer; i++ {
		user := fmt.Sprintf("c%d", i)
		px := newProxy(t, tox, backend+"-"+user, srv.Addr)
		s := c.addSlot(user, createUser(t, ctx, admin, user, px.Addr()), 0, px)
		c.start(s)
	}
	c.campaign(faults, rounds)
	c.finish(admin)
}
