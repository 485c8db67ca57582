//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// Fault kinds of issue 31: what an operator does to the tables and the
// server besides REPLACE and DELETE.
const (
	// kindOpRestore: the election's row restored from a copy taken more
	// than a lease before, as docs/operations.md says (a fresh lease).
	kindOpRestore = "op_restore"
	// kindDBRestartOptions: the server restarted under running candidates
	// with an option that changes every new session (completion_type=CHAIN:
	// every COMMIT opens the next transaction), for a few leases, then
	// restarted as it was.
	kindDBRestartOptions = "db_restart_options"
	// kindOpFloorTamper: the term floor's evidence gone while a leader
	// runs (TRUNCATE of the floor table, or a DELETE of the election's
	// floor row), then the election's row deleted: the next insert used to
	// lead at once, as the first of a name that never existed.
	kindOpFloorTamper = "op_floor_tamper"
)

// opFloorTamper truncates the floor table or deletes the election's floor
// row, at random, then deletes the election's row.
func opFloorTamper(admin func() *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		ctx, cancel := context.WithTimeout(c.ctx, opStatementTime)
		defer cancel()
		what, q, args := "truncate floor", "TRUNCATE service_election_floor", []any(nil)
		if c.rng.IntN(2) == 0 {
			what, q, args = "delete floor row", "DELETE FROM service_election_floor WHERE anchor = ?", []any{c.name}
		}
		if err := operatorExec(ctx, admin(), q, args...); err != nil {
			return what, err
		}
		// With its floor row gone, the election's terms are counted from
		// 0 again: its next terms go over the history's oldest rows. What
		// the history holds is read now, for the checker (the leader
		// takes no new term before the election's row is deleted below).
		if err := c.readHistory(admin(), c.name); err != nil {
			return what + ", reading the history", err
		}
		return what + ", delete", operatorExec(ctx, admin(), "DELETE FROM service_election WHERE anchor = ?", c.name)
	}
}

// opRestore copies the election's row into a backup table, waits until the
// copy reads as expired, and restores it with a fresh lease.
func opRestore(admin func() *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		ctx, cancel := context.WithTimeout(c.ctx, opStatementTime+2*c.tm.Lease)
		defer cancel()
		db := admin()
		for _, q := range []string{
			"CREATE TABLE IF NOT EXISTS chaos_backup LIKE service_election",
			"DELETE FROM chaos_backup",
			"INSERT INTO chaos_backup SELECT * FROM service_election WHERE anchor = ?",
		} {
			if err := operatorExec(ctx, db, q, argsFor(q, c.name)...); err != nil {
				return "backup", err
			}
		}
		c.pause(c.tm.Lease + c.jitter(c.tm.Lease))
		err := operatorExec(ctx, db, fmt.Sprintf(`REPLACE INTO service_election (anchor, service_id, term, term_started_at, last_seen_active, lease_ms, acquired, value, backend, priority)
SELECT anchor, service_id, term, term_started_at, NOW(6), GREATEST(lease_ms, %d), acquired, value, backend, priority
FROM chaos_backup`, c.tm.Lease.Milliseconds()))
		return "restore", err
	}
}

// argsFor gives name to a query that has a placeholder.
func argsFor(query, name string) []any {
	for _, r := range query {
		if r == '?' {
			return []any{name}
		}
	}
	return nil
}

// dbRestartOptions kills srv and starts it with extra, then, a few leases
// later, kills it and starts it with base again.
func dbRestartOptions(srv func() *mysqld.Server, base, extra []string) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		ctx, cancel := context.WithTimeout(c.ctx, 4*time.Minute)
		defer cancel()
		// Killed, as dbRestart does (a crash, or a failover to another
		// server), then started with the other options.
		s := srv()
		restart := func(args ...string) error {
			if err := s.Kill(); err != nil {
				return err
			}
			c.pause(c.jitter(time.Second))
			return s.RestartWith(ctx, args...)
		}
		if err := restart(append(append([]string{}, base...), extra...)...); err != nil {
			return "restart with options", err
		}
		c.pause(3*c.tm.Lease + c.jitter(c.tm.Lease))
		return fmt.Sprint(extra), restart(base...)
	}
}
