package main

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"
)

// seedPeer is the seed recipe, as integration/bench/seedcandidate runs it
// (every candidate runs the recipe's INSERT … ON DUPLICATE KEY UPDATE and
// its "am I the leader" query once per second), with the timeout set to the
// lease rounded up to whole seconds (the recipe's NOW() has second
// precision). Its signal is the answer of its last "am I the leader" query.
// It has no release and no token.
type seedPeer struct {
	db      *sql.DB
	id      string
	timeout int
	is      atomic.Bool
}

func newSeed(o opts) (peer, error) {
	db, err := sql.Open("mysql", o.dsn)
	if err != nil {
		return nil, err
	}
	t := int((o.lease + time.Second - 1) / time.Second)
	return &seedPeer{db: db, id: o.id, timeout: t}, nil
}

func (p *seedPeer) leader() bool                         { return p.is.Load() }
func (p *seedPeer) fence(context.Context) (bool, string) { return noToken() }

func (p *seedPeer) run(ctx context.Context) error {
	defer p.db.Close()
	attempt := fmt.Sprintf(`insert ignore into seed_election (
	anchor, service_id, last_seen_active
) values (
	1, ?, now()
) on duplicate key update
	service_id = if(last_seen_active < now() - interval %d second, values(service_id), service_id),
	last_seen_active = if(service_id = values(service_id), values(last_seen_active), last_seen_active)`, p.timeout)
	const amI = `select count(*) as is_leader from seed_election where anchor=1 and service_id=?`
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		var n int
		if _, err := p.db.ExecContext(qctx, attempt, p.id); err == nil {
			_ = p.db.QueryRowContext(qctx, amI, p.id).Scan(&n)
		}
		cancel()
		p.is.Store(n == 1)
		select {
		case <-ctx.Done():
			p.is.Store(false)
			return nil
		case <-t.C:
		}
	}
}
