package main

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/members"
)

// sqlelectPeer is the library itself, table or lock backend (either also
// run through members.Run: peers sqlelect-members and
// sqlelect-members-lock), with the
// timings of integration/bench: renew deadline 2/3 of the lease, renew and
// retry intervals 1/10, query timeout 1/5. Its signal is IsLeader.
type sqlelectPeer struct {
	e      *election.Candidate
	db     *sql.DB
	id     string
	cfg    election.Config
	member *members.Options // run through members.Run with these (peers sqlelect-members*)
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
	if p.member != nil {
		return members.Run(ctx, p.db, p.e, p.cfg, *p.member)
	}
	return p.e.Run(ctx)
}

// asMember makes p run through members.Run with o's version, follow mode
// (none, newest, oldest) and hold-down.
func (p *sqlelectPeer) asMember(o opts) error {
	mo := members.Options{Version: o.appVersion, HoldDown: o.holdDown}
	switch o.follow {
	case "", "none":
	case "newest":
		mo.Follow = members.FollowNewest
	case "oldest":
		mo.Follow = members.FollowOldest
	default:
		return fmt.Errorf("unknown --follow %q: none, newest or oldest", o.follow)
	}
	p.member = &mo
	return nil
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
