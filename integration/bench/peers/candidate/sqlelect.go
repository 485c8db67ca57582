package main

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/members"
)

// sqlelectPeer is the library itself, table or lock backend (or the table
// backend run through members.Run), with the
// timings of integration/bench: renew deadline 2/3 of the lease, renew and
// retry intervals 1/10, query timeout 1/5. Its signal is IsLeader.
type sqlelectPeer struct {
	e      *election.Candidate
	db     *sql.DB
	id     string
	cfg    election.Config
	member bool // run through members.Run (peer sqlelect-members)
}

// newSqlelect makes the table (or lock) backend's candidate; noDelay sets
// Config.Tuning.DisableLockDelay (the first election then needs no lock delay).
func newSqlelect(o opts, lock, noDelay bool) (peer, error) {
	db, err := sql.Open("mysql", o.dsn)
	if err != nil {
		return nil, err
	}
	L := o.lease
	cfg := election.Config{Name: o.election, ID: o.id, Value: o.id, LeaseDuration: L,
		Tuning: election.TuningConfig{RenewDeadline: L * 2 / 3, RenewInterval: L / 10,
			RetryInterval: L / 10, QueryTimeout: L / 5, DisableLockDelay: noDelay}}
	p := &sqlelectPeer{db: db, id: o.id, cfg: cfg}
	if lock {
		p.e, err = election.NewLock(db, cfg)
	} else {
		p.e, err = election.NewTable(db, cfg)
	}
	return p, err
}

func (p *sqlelectPeer) run(ctx context.Context) error {
	defer p.db.Close()
	if p.member {
		return members.Run(ctx, p.db, p.e, p.cfg, members.Options{Version: "bench"})
	}
	return p.e.Run(ctx)
}

func (p *sqlelectPeer) leader() bool { return p.e.IsLeader() }

func (p *sqlelectPeer) fence(ctx context.Context) (bool, string) {
	err := p.e.Fenced(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO peer_fence (who) VALUES (?)", p.id)
		return err
	})
	if err != nil {
		return false, fmt.Sprintf("term %d: %v", p.e.Term(), err)
	}
	return true, fmt.Sprintf("term %d", p.e.Term())
}
