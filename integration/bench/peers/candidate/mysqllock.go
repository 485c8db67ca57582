package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// mysqlLockPeer is the scheme of github.com/sanketplus/go-mysql-lock (the Go
// module proxy does not serve that module, so this is a re-implementation of
// its published algorithm, not its code): GET_LOCK(key, 3600) on a
// connection of its own (its ObtainTimeout; MariaDB answers NULL to
// Obtain's timeout -1, which the library reports as an internal error), held as long as that connection lives; a refresher
// pings the connection every refresh interval (its default, 1 s) with the
// interval as the ping's deadline, and a failed ping cancels the lock's
// context (lock lost); Release runs DO RELEASE_LOCK and closes the
// connection. The library has no lease: the server frees the lock when the
// connection ends. The harness's DSN sets the session's wait_timeout to the
// lease (2 s), the nearest thing to a TTL the scheme allows: a holder
// stopped longer loses its connection, and so its lock. Its signal: a lock is
// held and its context is not cancelled.
type mysqlLockPeer struct {
	db      *sql.DB
	key     string
	refresh time.Duration
	held    atomic.Pointer[context.Context]
}

func newMySQLLock(o opts) (peer, error) {
	db, err := sql.Open("mysql", o.dsn)
	if err != nil {
		return nil, err
	}
	return &mysqlLockPeer{db: db, key: "bench-" + o.election, refresh: time.Second}, nil
}

func (p *mysqlLockPeer) leader() bool {
	c := p.held.Load()
	return c != nil && (*c).Err() == nil
}

func (p *mysqlLockPeer) fence(context.Context) (bool, string) { return noToken() }

func (p *mysqlLockPeer) run(ctx context.Context) error {
	defer p.db.Close()
	for ctx.Err() == nil {
		conn, err := p.db.Conn(ctx)
		if err != nil {
			sleepCtx(ctx, p.refresh)
			continue
		}
		var res int
		if err := conn.QueryRowContext(ctx, "SELECT COALESCE(GET_LOCK(?, ?), 2)", p.key, 3600).Scan(&res); err != nil || res != 1 {
			if res != 0 {
				fmt.Fprintf(os.Stderr, "candidate: GET_LOCK: %d, %v\n", res, err)
			}
			conn.Close()
			sleepCtx(ctx, p.refresh)
			continue
		}
		lost, cancel := context.WithCancel(context.Background())
		p.held.Store(&lost)
		unlock := make(chan struct{})
		go func() { // the refresher
			for {
				select {
				case <-time.After(p.refresh):
					pctx, pcancel := context.WithTimeout(context.Background(), p.refresh)
					err := conn.PingContext(pctx)
					pcancel()
					if err != nil {
						cancel()
						return
					}
				case <-unlock:
					cancel()
					return
				}
			}
		}()
		select {
		case <-ctx.Done(): // Release
			close(unlock)
			rctx, rcancel := context.WithTimeout(context.Background(), p.refresh)
			_, _ = conn.ExecContext(rctx, "DO RELEASE_LOCK(?)", p.key)
			rcancel()
			conn.Close()
			return nil
		case <-lost.Done(): // lost: campaign again
			conn.Close()
		}
	}
	return nil
}
