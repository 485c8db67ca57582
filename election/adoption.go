package election

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sqlelect/sqlelect/internal/adoption"
	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/probe"
)

// verdict is what a preflight that passed read (readVerdict): the site
// (the server's flavour, where the lock and the handover hint's lock are)
// and the adopted lease (adoptedMillis judges it). at is when a Batcher's
// shared one began, by its clock (tableBackend.verdict).
type verdict struct {
	db    *sql.DB
	at    time.Time
	site  getlock.Site
	lease time.Duration
}

// readVerdict runs Run's preflight on db for backend (probe.Preflight, with
// peek), then reads the adopted lease of table.
func readVerdict(ctx context.Context, db *sql.DB, table, backend, peek string) (v verdict, err error) {
	v.db = db
	if v.site, err = probe.Preflight(ctx, db, table, backend, peek); err != nil {
		return v, err
	}
	if v.lease, _, err = adoption.Lease(ctx, db, table); err != nil {
		return v, fmt.Errorf("election: %w", err)
	}
	return v, nil
}

// adoptedMillis is the adopted lease of cfg's table in milliseconds during
// an adoption period (package schema's Adopt begins one, adopt-end ends it;
// see package internal/adoption), 0 outside one. Run's preflight reads the
// lease.
//
// During the period a candidate writes lease_ms = max(its lease, the
// adopted lease) in every statement that sets the lease of a row it holds
// or leaves unreleased: a recipe node's takeover sets only service_id and
// last_seen_active, so the row keeps the lease sqlelect wrote, and a recipe
// holder may freeze for up to its timeout and still lead. A handover's
// window (the row released, reserved for a candidate) is left as it is.
//
// lease is the adopted lease as adoption.Lease reads it, 0 outside a
// period.
func adoptedMillis(lease time.Duration, cfg settings) (int64, error) {
	if lease == 0 {
		return 0, nil
	}
	// A recipe node takes the row over when last_seen_active is older than
	// its timeout (the adopted lease less 1 s), judged in whole seconds
	// (another second): whatever lease_ms says, a sqlelect leader must
	// stand down before that.
	if limit := lease - 2*time.Second; cfg.RenewDeadline > limit {
		return 0, fmt.Errorf("%w: renew deadline %v: during the adoption period of %s (a recipe timeout of %v) it must be at most %v, "+
			"or a recipe node may take the row over while this candidate leads", ErrInvalidConfig, cfg.RenewDeadline, cfg.Table,
			lease-time.Second, limit)
	}
	return ceilMillis(lease), nil
}
