package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sqlelect/sqlelect/internal/adoption"
)

// adoptedMillis is the adopted lease of cfg's table in milliseconds during
// an adoption period (package schema's Adopt begins one, adopt-end ends it;
// see package internal/adoption), 0 outside one. Run reads it at
// preflight.
//
// During the period a candidate writes lease_ms = max(its lease, the
// adopted lease) in every statement that sets the lease of a row it holds
// or leaves unreleased: a recipe node's takeover sets only service_id and
// last_seen_active, so the row keeps the lease sqlelect wrote, and a recipe
// holder may freeze for up to its timeout and still lead. A handover's
// window (the row released, reserved for a candidate) is left as it is.
func adoptedMillis(ctx context.Context, db *sql.DB, cfg settings) (int64, error) {
	lease, ok, err := adoption.Lease(ctx, db, cfg.Table)
	if err != nil {
		return 0, fmt.Errorf("election: %w", err)
	}
	if !ok {
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

// explainLayout adds to an ErrSchemaMismatch what the table holds, so that
// a table of another layout (the MySQL-table recipe's, say) is named as
// such instead of only "out of date": the columns found and what to do.
// The recipe's table is told apart as `sqlelect migrate` does
// (adoption.Classify). Other errors, and a failure to read the columns,
// return err as it is.
func explainLayout(ctx context.Context, db *sql.DB, table string, err error) error {
	if !errors.Is(err, ErrSchemaMismatch) {
		return err
	}
	cols, qerr := adoption.Columns(ctx, db, table)
	if qerr != nil || len(cols) == 0 {
		return err
	}
	found := make([]string, len(cols))
	for i, c := range cols {
		found[i] = c.Name + " " + c.Type
	}
	hint := "`sqlelect migrate up` brings sqlelect's table up to date, or says what to do with another table"
	if adoption.Classify(cols) == adoption.KindRecipe {
		hint = "this is the MySQL-table recipe's table: `sqlelect migrate adopt` converts it in place, keeping its holder"
	}
	return fmt.Errorf("%w (columns found: %s; %s)", err, strings.Join(found, ", "), hint)
}
