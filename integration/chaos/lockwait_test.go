//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"syscall"
	"time"
)

// kindFrozenWaiter: a follower frozen (SIGSTOP) while its wait for a lock
// runs on the server (issue 20, item 6): the election's lock on the lock
// backend, the holder's handover lock on the table backend.
const kindFrozenWaiter = "frozen_waiter"

// frozenWaiter freezes a random follower F while the server shows it
// waiting in GET_LOCK, then at once has the leader resign (SIGUSR1:
// Election.Resign, and it goes on campaigning) or hand over, through an
// operator's request, to F or to the other follower; F is let run again a
// lease later. The fault is recorded as ending when the leader was asked to
// go, so that the checker measures the next election from then: nobody may
// wait for F. A server that granted F's queued wait the lock would keep it
// for F until it dropped F's idle session (wait_timeout, the lease rounded
// up).
func frozenWaiter(admin func() *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		others := c.others(l)
		if len(others) == 0 {
			return "no follower", nil
		}
		f := others[c.rng.IntN(len(others))]
		fid := f.proc.id
		ctx, cancel := context.WithTimeout(c.ctx, opStatementTime)
		defer cancel()
		// Stop F, and keep it stopped once the server shows its wait
		// running: a stopped process's statement runs on.
		for try := 1; ; try++ {
			if err := c.signal(f, syscall.SIGSTOP); err != nil {
				return fid, err
			}
			n, err := lockWaits(ctx, admin(), f.user)
			if err == nil && n > 0 {
				break
			}
			if err := c.signal(f, syscall.SIGCONT); err != nil {
				return fid, err
			}
			if err != nil {
				return fid, err
			}
			if try == 200 {
				return fid, fmt.Errorf("%s was never seen waiting in GET_LOCK", fid)
			}
			c.pause(5*time.Millisecond + c.jitter(20*time.Millisecond))
		}
		c.took = time.Now()
		var what string
		var err error
		switch others := c.others(l); c.rng.IntN(3) {
		case 0:
			what, err = fid+" frozen; resign", c.signal(l, syscall.SIGUSR1)
		case 1:
			what, err = c.request(admin(), fid)
			what = fid + " frozen; " + what
		default:
			if len(others) == 0 {
				what, err = fid+" frozen; resign", c.signal(l, syscall.SIGUSR1)
				break
			}
			what, err = c.request(admin(), others[c.rng.IntN(len(others))].proc.id)
			what = fid + " frozen; " + what
		}
		c.ended = time.Now()
		c.pause(c.tm.Lease + c.jitter(500*time.Millisecond))
		if cerr := c.signal(f, syscall.SIGCONT); err == nil {
			err = cerr
		}
		return what, err
	}
}

// lockWaits counts the connections of user that run a statement waiting in
// GET_LOCK (a GET_LOCK with a timeout other than 0).
func lockWaits(ctx context.Context, db *sql.DB, user string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE USER = ? AND COMMAND = 'Query' AND INSTR(INFO, 'GET_LOCK(') > 0 AND INSTR(INFO, ', 0)') = 0`, user).Scan(&n)
	return n, err
}
