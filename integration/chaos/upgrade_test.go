//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqld"
	"github.com/sqlelect/sqlelect/schema"
)

// kindUpgrade: a rolling upgrade from v0.1.0 with operator actions during
// it (issue 31). The old candidates' hosts freeze while an operator DELETEs
// the election's row, migrates up at once and starts a new candidate (whose
// first insert used to lead at once, the term floor table being new); then
// each old candidate is replaced by a new one, an operator's DELETE or
// REPLACE after each.
const kindUpgrade = "upgrade_rolling"

// Version v0.1.0: its commit, and its schema version (migrations 1 to 5: no
// term floor table).
const (
	v010Commit = "b72b7d1"
	v010Schema = 5
)

// TestChaosRollingUpgrade upgrades three v0.1.0 candidates as CHANGELOG.md
// says, migrations first, then the candidates one at a time, with operator
// actions during it, and checks the records as the other chaos tests do;
// on both backends at once, each in a database of its own. About 30 s; it
// needs the repository's history (v0.1.0's commit) and builds v0.1.0's
// candidate.
func TestChaosRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite takes minutes; skipped under -short")
	}
	rounds(t) // 0 skips it
	selectFaults(t, []fault{{kind: kindUpgrade}})
	// A server of its own, and it waits on leases more than it computes:
	// beside the suite's other short tests once TestChaos and the cluster
	// tests (run one at a time before them) have ended.
	t.Parallel()
	oldBin := oldCandidateBinary(t, v010Commit)
	newBin := candidateBinary(t)
	// A renew deadline of 2 s: the frozen leader believes for up to 2 s,
	// much longer than the DELETE, the migrations and a new candidate's
	// start take (0.3 s on a busy 2-core machine), so that a new candidate
	// that leads at once overlaps it.
	tm := defaultTimings
	tm.Lease, tm.RenewDeadline, tm.LockDelay = 3*time.Second, 2*time.Second, 3*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	srv := startServer(t, ctx)
	for _, backend := range []string{"table", "lock"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel() // a database and candidates of its own; it waits on leases
			chaosUpgrade(t, ctx, srv, backend, tm, oldBin, newBin)
		})
	}
}

// chaosUpgrade runs TestChaosRollingUpgrade on backend, in a database of
// its own on srv.
func chaosUpgrade(t *testing.T, ctx context.Context, srv *mysqld.Server, backend string, tm timings, oldBin, newBin string) {
	db := "chaos_" + backend
	admin, m := setupSchemaAt(t, ctx, srv.DSN(""), db, v010Schema)
	c := newCluster(t, ctx, "upgrade-"+backend, backend, tm)
	// v0.1.0's candidates write no history (migration 10), and lead terms
	// that are not in it.
	c.noHistory = "v0.1.0's candidates write none"
	user := func(i int) string { return fmt.Sprintf("%c%d", backend[0], i) }
	var old []*slot
	for i := 1; i <= candidatesPerServer; i++ {
		s := c.addSlot(user(i), createUserOn(t, ctx, admin, db, user(i), srv.Addr), 0, nil, nil)
		s.bin = oldBin
		c.start(s)
		old = append(old, s)
	}
	// The new candidate's slot, ready before the operator acts.
	n := candidatesPerServer + 1
	fresh := c.addSlot(user(n), createUserOn(t, ctx, admin, db, user(n), srv.Addr), 0, nil, nil)
	fresh.bin = newBin
	if c.waitLeader(tm.LockDelay+tm.bound()+5*time.Second) == nil {
		t.Fatal("upgrade: no first leader among the v0.1.0 candidates")
	}
	c.pause(c.jitter(2 * tm.RenewInterval))

	// The old candidates freeze (their leader no longer knows what
	// happens), the operator DELETEs the row, migrates up and starts a new
	// candidate, which inserts the row: it must wait out its lock delay.
	start := time.Now()
	for _, s := range old {
		if err := c.signal(s, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	opCtx, opCancel := context.WithTimeout(ctx, opStatementTime)
	err := operatorExec(opCtx, admin, "DELETE FROM service_election WHERE anchor = ?", c.name)
	opCancel()
	if err != nil {
		t.Fatalf("upgrade: DELETE: %v", err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatalf("upgrade: migrate up: %v", err)
	}
	migrated := time.Now()
	c.start(fresh)
	if c.waitLeader(tm.bound()+5*time.Second) == nil {
		t.Errorf("upgrade: no leader %v after the migration", tm.bound()+5*time.Second)
	}
	end := time.Now()
	for _, s := range old {
		id := s.proc.id
		if err := c.signal(s, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		c.record(Record{Event: "fault", Kind: kindSigstopName, Time: start, End: end, Target: id})
	}
	c.record(Record{Event: "fault", Kind: kindUpgrade, Time: start, End: end,
		Target: fmt.Sprintf("delete, migrate up (%v), start %s", migrated.Sub(start).Round(time.Millisecond), fresh.proc.id)})
	// The row the new candidate inserted has a floor row: a DELETE is safe
	// from now on. (A row an old candidate inserted after the migration
	// would have none, and a DELETE of it is the limit docs/operations.md
	// states: "The term floor table".)
	var floors int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM service_election_floor WHERE anchor = ?", c.name).Scan(&floors); err != nil {
		t.Fatal(err)
	}
	if floors != 1 {
		t.Fatalf("upgrade: the election has no floor row after the new candidate's election")
	}
	c.pause(tm.RenewInterval)

	// Roll the old candidates one at a time, an operator's DELETE or
	// REPLACE after each.
	ops := []func(c *cluster, l *slot) (string, error){opDelete(func() *sql.DB { return admin }), opReplace(func() *sql.DB { return admin })}
	for _, s := range old {
		if c.waitLeader(tm.bound()+5*time.Second) == nil {
			t.Errorf("upgrade: no leader before replacing %s", s.proc.id)
		}
		start := time.Now()
		id := s.proc.id
		if err := c.signal(s, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := c.waitExit(s, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		s.bin = newBin
		c.start(s)
		what, err := ops[c.rng.IntN(len(ops))](c, nil)
		if err != nil {
			t.Errorf("upgrade: %s: %v", what, err)
		}
		c.record(Record{Event: "fault", Kind: kindUpgrade, Time: start, End: time.Now(),
			Target: fmt.Sprintf("%s replaced by %s, %s", id, s.proc.id, what), Detail: errString(err)})
		c.pause(tm.RenewInterval)
		if c.waitLeader(tm.bound()+5*time.Second) == nil {
			t.Logf("upgrade: no leader %v after replacing %s", tm.bound()+5*time.Second, id)
		}
		c.pause(300 * time.Millisecond)
	}
	c.finish(admin)
}

// setupSchemaAt creates database db with the migrations up to version, and
// chaos_writes, through rootDSN (on no database). It returns an admin pool
// on it and a Migrator, ready to migrate up.
func setupSchemaAt(t *testing.T, ctx context.Context, rootDSN, db string, version int) (*sql.DB, *schema.Migrator) {
	t.Helper()
	cfg := createDatabase(t, ctx, rootDSN, db)
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	m := schema.New(admin)
	if err := m.Steps(ctx, version); err != nil {
		t.Fatalf("migrate to version %d: %v", version, err)
	}
	createWrites(t, ctx, admin)
	return admin, m
}

// oldCandidateBinary builds the candidate of commit (another version's),
// from its tree extracted into a temporary directory; it skips t when the
// repository's history is not at hand.
func oldCandidateBinary(t *testing.T, commit string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("no git repository around the test (%v): building %s's candidate needs the history", err, commit)
	}
	repo := strings.TrimSpace(string(out))
	if err := exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in %s (a shallow clone?): %v", commit, repo, err)
	}
	dir := t.TempDir()
	tarball := filepath.Join(dir, "src.tar")
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []*exec.Cmd{
		exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", "-o", tarball, commit),
		exec.CommandContext(ctx, "tar", "-xf", tarball, "-C", src),
	} {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	bin := filepath.Join(dir, "candidate-"+commit)
	build := exec.CommandContext(ctx, goTool(), "build", "-o", bin, "./chaos/candidate")
	build.Dir = filepath.Join(src, "integration")
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s's candidate: %v\n%s", commit, err, out)
	}
	return bin
}
