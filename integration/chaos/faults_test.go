//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"syscall"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// Fault kinds, as the summary names them.
const (
	kindKill9       = "kill9"
	kindSigstop     = "sigstop"
	kindResign      = "resign"
	kindDBRestart   = "db_restart"
	kindKillConn    = "kill_conn"
	kindNetLatency  = "net_latency"
	kindNetBlack    = "net_blackhole"
	kindNetReset    = "net_reset"
	kindNetSlicer   = "net_slicer"
	kindNetLimit    = "net_limit"
	kindNetDown     = "net_down"
	kindOpReplace   = "op_replace"
	kindOpDelete    = "op_delete"
	kindOpTransfer  = "op_transfer" // a graceful transfer to a running follower, asked by an operator
	kindOpStepDown  = "op_stepdown" // a graceful step-down, asked by an operator
	kindNodeRejoin  = "node_kill_rejoin"
	opStatementTime = 10 * time.Second
)

// kill9 kills the leader with SIGKILL and starts a new candidate in its
// place a moment later.
func kill9(c *cluster, l *slot) (string, error) {
	id := l.proc.id
	if err := c.signal(l, syscall.SIGKILL); err != nil {
		return id, err
	}
	if err := c.waitExit(l, 10*time.Second); err != nil {
		return id, err
	}
	c.pause(c.jitter(500 * time.Millisecond))
	c.start(l)
	return id, nil
}

// sigstop freezes the leader for longer than the lease, then lets it run
// again: it must find that it no longer leads (its lease ran out by its
// monotonic clock while it was frozen).
func sigstop(c *cluster, l *slot) (string, error) {
	id := l.proc.id
	if err := c.signal(l, syscall.SIGSTOP); err != nil {
		return id, err
	}
	c.pause(c.tm.Lease + 200*time.Millisecond + c.jitter(time.Second))
	return id, c.signal(l, syscall.SIGCONT)
}

// resign stops the leader cleanly (SIGTERM: it resigns and releases the
// row), and starts a new candidate in its place.
func resign(c *cluster, l *slot) (string, error) {
	id := l.proc.id
	if err := c.signal(l, syscall.SIGTERM); err != nil {
		return id, err
	}
	if err := c.waitExit(l, 10*time.Second); err != nil {
		return id, err
	}
	c.start(l)
	return id, nil
}

// opReplace forces a random running candidate (the leader too, sometimes)
// to lead, with Operator.Assume or the recipe's plain REPLACE, through a
// database connection that admin picks.
func opReplace(admin func() *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		var running []*slot
		for _, s := range c.slots {
			if s.proc != nil && s.proc.running() && !s.proc.stopped {
				running = append(running, s)
			}
		}
		target := running[c.rng.IntN(len(running))].proc.id
		ctx, cancel := context.WithTimeout(c.ctx, opStatementTime)
		defer cancel()
		if c.rng.IntN(2) == 0 {
			_, err := ops(admin()).Assume(ctx, c.name, target)
			return "assume " + target, err
		}
		err := operatorExec(ctx, admin(),
			"REPLACE INTO service_election (anchor, service_id, last_seen_active) VALUES (?, ?, NOW(6))", c.name, target)
		return "replace " + target, err
	}
}

// opDelete forces a re-election, with Operator.Reelect or a plain DELETE.
func opDelete(admin func() *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		ctx, cancel := context.WithTimeout(c.ctx, opStatementTime)
		defer cancel()
		if c.rng.IntN(2) == 0 {
			_, err := ops(admin()).Reelect(ctx, c.name)
			return "reelect", err
		}
		err := operatorExec(ctx, admin(), "DELETE FROM service_election WHERE anchor = ?", c.name)
		return "delete", err
	}
}

// opTransfer asks the live leader to hand over to a random running
// follower, with Operator.Transfer or a plain UPDATE of transfer_to;
// the leader acts at its next renewal.
func opTransfer(admin func() *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		var followers []string
		for _, s := range c.others(l) {
			followers = append(followers, s.proc.id)
		}
		if len(followers) == 0 {
			return "no follower", nil
		}
		target := followers[c.rng.IntN(len(followers))]
		what, err := c.request(admin(), target)
		c.actedOn(l)
		return what, err
	}
}

// opStepDown asks the live leader to step down, with Operator.StepDown or
// a plain UPDATE of transfer_to to the empty string.
func opStepDown(admin func() *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		what, err := c.request(admin(), "")
		c.actedOn(l)
		return what, err
	}
}

// actedOn waits until leader l no longer leads, for at most a renew
// interval and a renew deadline: a request is acted on at the leader's next
// renewal, and the campaign's wait for the next leader must not find l
// still leading.
func (c *cluster) actedOn(l *slot) {
	deadline := time.Now().Add(c.tm.RenewInterval + c.tm.RenewDeadline)
	for c.leader() == l && time.Now().Before(deadline) && c.ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

// request sets transfer_to to to (the empty string: a step-down).
func (c *cluster) request(db *sql.DB, to string) (string, error) {
	ctx, cancel := context.WithTimeout(c.ctx, opStatementTime)
	defer cancel()
	what := "transfer to " + to
	if to == "" {
		what = "step down"
	}
	if c.rng.IntN(2) == 0 {
		var err error
		if to == "" {
			_, err = ops(db).StepDown(ctx, c.name)
		} else {
			_, err = ops(db).Transfer(ctx, c.name, to)
		}
		return what, err
	}
	err := operatorExec(ctx, db, "UPDATE service_election SET transfer_to = ? WHERE anchor = ? AND released = 0", to, c.name)
	return what + " (SQL)", err
}

// killConn has the server KILL every connection of the leader's database
// user.
func killConn(admin func(l *slot) *sql.DB) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		ctx, cancel := context.WithTimeout(c.ctx, opStatementTime)
		defer cancel()
		n, err := killConnections(ctx, admin(l), l.user)
		return fmt.Sprintf("%s (%d connections)", l.proc.id, n), err
	}
}

// dbRestart kills the database server (SIGKILL) and starts it again on its
// data directory.
func dbRestart(srv *mysqld.Server) func(c *cluster, l *slot) (string, error) {
	return func(c *cluster, l *slot) (string, error) {
		if err := srv.Kill(); err != nil {
			return srv.Addr, err
		}
		c.pause(c.jitter(time.Second))
		ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
		defer cancel()
		return srv.Addr, srv.Restart(ctx)
	}
}
