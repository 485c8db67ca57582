package election_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestTermAfterDeleteFollowsDatabaseClock documents the limit of the term
// promise. While the row exists a new term is GREATEST(term + 1, database
// clock in µs), and Assume reads the old term too, so terms strictly
// increase even when the database clock is behind the terms (a failover to a
// server whose clock is behind, a clock stepped back). A row deleted (plain
// DELETE, Reelect) or replaced with plain SQL loses the old term: the next
// term is the database clock, lower than the old one in that case. Here the
// clock is "behind" because the row's term is moved an hour ahead of it.
func TestTermAfterDeleteFollowsDatabaseClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn := testdb.DSN(t)
	testdb.Migrate(t, dsn)
	db := testdb.Open(t, dsn)
	name := "term-clock-" + randHex(4)
	const hour = uint64(time.Hour / time.Microsecond)

	// ahead moves the row's term an hour ahead of the database clock and
	// returns it.
	ahead := func() uint64 {
		t.Helper()
		if _, err := db.ExecContext(ctx, `UPDATE service_election SET term = term + ? WHERE anchor = ?`, hour, name); err != nil {
			t.Fatal(err)
		}
		rec, err := election.Status(ctx, db, "", name)
		if err != nil && !errors.Is(err, election.ErrNoLeader) {
			t.Fatal(err)
		}
		return rec.Term
	}
	assume := func(id string) uint64 {
		t.Helper()
		rec, err := election.Assume(ctx, db, "", name, id)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Term
	}

	// Assume keeps the order: it reads the old term.
	assume("a")
	old := ahead()
	if got := assume("b"); got <= old {
		t.Fatalf("Assume: term %d after %d; want higher", got, old)
	}

	// A candidate's takeover of an expired row keeps it too.
	old = ahead()
	if _, err := db.ExecContext(ctx, `UPDATE service_election SET last_seen_active = NOW(6) - INTERVAL 1 HOUR WHERE anchor = ?`, name); err != nil {
		t.Fatal(err)
	}
	if got := campaignTerm(t, ctx, db, name, "c"); got <= old {
		t.Fatalf("takeover of an expired row: term %d after %d; want higher", got, old)
	}

	// Reelect (a DELETE), then a candidate inserts a new row: the term is
	// the database clock, lower than the old term.
	old = ahead()
	if _, err := election.Reelect(ctx, db, "", name); err != nil {
		t.Fatal(err)
	}
	if got := campaignTerm(t, ctx, db, name, "d"); got >= old {
		t.Fatalf("after a DELETE: term %d after %d; the documented limit no longer holds (update the docs)", got, old)
	} else {
		t.Logf("after a DELETE the term went down: %d after %d (the database clock)", got, old)
	}

	// A plain-SQL REPLACE: the column's default, the database clock.
	old = ahead()
	if _, err := db.ExecContext(ctx, `REPLACE INTO service_election (anchor, service_id, last_seen_active) VALUES (?, 'e', NOW(6))`, name); err != nil {
		t.Fatal(err)
	}
	rec, err := election.Status(ctx, db, "", name)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Term >= old {
		t.Fatalf("after a plain REPLACE: term %d after %d; the documented limit no longer holds (update the docs)", rec.Term, old)
	}
	t.Logf("after a plain REPLACE the term went down: %d after %d", rec.Term, old)
}

// campaignTerm runs candidate id of election name until it holds the row
// (leading, or waiting out its lock delay), stops it, and returns the term
// it held.
func campaignTerm(t *testing.T, ctx context.Context, db *sql.DB, name, id string) uint64 {
	t.Helper()
	e, err := election.NewTable(db, election.Config{Name: name, ID: id, LeaseDuration: tLease,
		RenewDeadline: tRenewDeadline, RenewInterval: tRenewInterval, RetryInterval: tRetryInterval,
		QueryTimeout: tQueryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	defer func() { rcancel(); <-done }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rec, err := election.Status(ctx, db, "", name)
		if err == nil && rec.ID == id {
			return rec.Term
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not hold the row: %+v, %v", id, rec, err)
		}
	}
}
