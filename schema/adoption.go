package schema

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golang-migrate/migrate/v4"

	"github.com/sqlelect/sqlelect/internal/adoption"
)

// adoptionComment is lease_ms's comment during an adoption period (see
// Adopt), while the column's default is the adopted lease. Migration 3
// leaves the default of a column whose comment starts with "sqlelect
// adoption" alone; migrations that change lease_ms must do the same.
const adoptionComment = adoption.Marker + " period: the default is the recipe timeout + 1 s; end it with: sqlelect migrate adopt-end"

// Adoption reports the adoption period that Adopt begins: while it runs,
// a row written without lease_ms (a recipe node's INSERT, an operator's
// plain REPLACE or INSERT) gets lease, the recipe's timeout plus one
// second, as its lease, instead of the usual default (15 s). ok is false
// outside the period, and on a table that is not sqlelect's.
func (g *Migrator) Adoption(ctx context.Context) (lease time.Duration, ok bool, err error) {
	return adoptionLease(ctx, g.db)
}

func adoptionLease(ctx context.Context, q adoption.Queryer) (lease time.Duration, ok bool, err error) {
	lease, ok, err = adoption.Lease(ctx, q, tableName)
	if err != nil {
		return 0, false, fmt.Errorf("schema: %w", err)
	}
	return lease, ok, nil
}

// EndAdoption ends the adoption period Adopt began: rows written later
// without lease_ms get the usual default lease again (15 s, migration 3's;
// 20 s below version 3). Run it once no recipe node runs any more: a recipe
// node that inserts the election's row afterwards (after a DELETE) gets that
// default as its lease, and a recipe holder frozen for longer than it, but
// less than the recipe's own timeout, would lead beside a sqlelect
// candidate. The rows that exist keep their lease. It returns ErrNoChange
// outside an adoption period.
func (g *Migrator) EndAdoption(ctx context.Context) error {
	return run(ctx, g.db, func(s *session, _ *migrate.Migrate) error { return s.endAdoption() })
}

func (s *session) endAdoption() (err error) {
	if err := s.Lock(); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Unlock()) }()
	v, l, err := s.state("migrate adopt-end")
	if err != nil {
		return err
	}
	if l.kind != adoption.KindSqlelect {
		return &LayoutError{layout: l, Table: tableName, Version: v, Action: "adopt-end"}
	}
	if _, ok, err := adoptionLease(s.ctx, s.conn); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %s is in no adoption period", ErrNoChange, tableName)
	}
	def := 15000 // migration 3's default
	if v < 3 {
		def = 20000 // migration 1's
	}
	if _, err := s.conn.ExecContext(s.ctx, fmt.Sprintf(`ALTER TABLE %s MODIFY lease_ms INT UNSIGNED NOT NULL DEFAULT %d`, tableName, def)); err != nil {
		return fmt.Errorf("schema: adopt-end: %w", err)
	}
	return nil
}
