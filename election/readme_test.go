package election_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// docSQL returns the first ```sql block of file (relative to the
// repository's root) after the line that starts with after.
func docSQL(t *testing.T, file, after string) string {
	t.Helper()
	b, err := os.ReadFile("../" + file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+after)
	if i < 0 {
		t.Fatalf("%s has no line starting %q", file, after)
	}
	s = s[i:]
	start := strings.Index(s, "```sql\n")
	if start < 0 {
		t.Fatalf("%s: no sql block after %q", file, after)
	}
	s = s[start+len("```sql\n"):]
	return strings.TrimSpace(s[:strings.Index(s, "```")])
}

// readmeSQL returns the first ```sql block of README.md after the line
// that starts with after, and checks that docs/operations.md, the
// operators' reference, quotes the same statement after the same line.
func readmeSQL(t *testing.T, after string) string {
	t.Helper()
	s := docSQL(t, "README.md", after)
	if ops := docSQL(t, "docs/operations.md", after); ops != s {
		t.Errorf("README.md and docs/operations.md differ after %q:\n%s\n---\n%s", after, s, ops)
	}
	return s
}

// TestReadmeOperatorSQL runs the README's "who leads" query and its REPLACE
// (docs/operations.md quotes the same statements) on a real server: the query tells a holder that leads from one an operator
// assigned (not claimed yet) and one waiting out its lock delay, and the
// REPLACE gives the row the lease it names.
func TestReadmeOperatorSQL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	who := readmeSQL(t, "Who leads")
	replace := readmeSQL(t, "Force a given candidate to lead")
	readmeSQL(t, "Force a re-election")
	sfx := randHex(4)
	assigned, delayed, leading := "assigned-"+sfx, "delayed-"+sfx, "leading-"+sfx

	// An operator's REPLACE naming a candidate that does not run.
	if _, err := db.ExecContext(ctx, strings.ReplaceAll(replace, "orders-scheduler", assigned)); err != nil {
		t.Fatalf("README's REPLACE: %v", err)
	}
	// A candidate that inserts a new row for an election that existed (it
	// has a term floor: its row was deleted) waits out its lock delay (one
	// lease); one that takes an expired row leads at once.
	if _, err := db.ExecContext(ctx, "INSERT INTO service_election (anchor, service_id, last_seen_active) VALUES (?, 'gone', NOW(6) - INTERVAL 1 HOUR)", leading); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO service_election_floor (anchor, term_floor) VALUES (?, 1)", delayed); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	elected := make(chan string, 2)
	for _, name := range []string{delayed, leading} {
		e, err := election.NewTable(db, election.Config{Name: name, ID: "c", LeaseDuration: 30 * time.Second,
			Tuning: election.TuningConfig{RetryInterval: 100 * time.Millisecond}, Callbacks: election.Callbacks{
				OnElected: func(context.Context, election.Leadership) { elected <- name }}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = e.Run(rctx) }()
	}
	select {
	case n := <-elected:
		if n != leading {
			t.Fatalf("%s led first; its lock delay is a lease", n)
		}
	case <-ctx.Done():
		t.Fatal("no candidate led")
	}
	// Wait for the delayed candidate's row.
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM service_election WHERE anchor = ? AND service_id = 'c'", delayed).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the delayed candidate never inserted its row")
		case <-time.After(10 * time.Millisecond):
		}
	}

	got := map[string]string{}
	for _, row := range testdb.Rows(t, ctx, db, who) {
		got[row["election"]] = row["holder"] + " " + row["state"]
	}
	want := map[string]string{assigned: "web-3:4242:a1b2c3 assigned", delayed: "c lock delay", leading: "c leading"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: the query says %q, want %q (all: %v)", name, got[name], w, got)
		}
	}
	var lease int
	if err := db.QueryRowContext(ctx, "SELECT lease_ms FROM service_election WHERE anchor = ?", assigned).Scan(&lease); err != nil || lease != 15000 {
		t.Errorf("the README's REPLACE gave lease %d (%v), want the 15000 it names", lease, err)
	}
}
