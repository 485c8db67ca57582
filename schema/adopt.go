package schema

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jmoiron/sqlx"

	"github.com/sqlelect/sqlelect/internal/adoption"
)

// DefaultRecipeTimeout is the recipe's own timeout ("interval 20 second").
const DefaultRecipeTimeout = 20 * time.Second

// AdoptOptions tunes Adopt.
type AdoptOptions struct {
	// RecipeTimeout is the timeout in the recipe's statement (its
	// "interval N second"). The adopted rows' lease is RecipeTimeout plus
	// one second, because the recipe stores its renewals in whole seconds
	// (NOW() into a TIMESTAMP): so sqlelect candidates take over from a
	// recipe holder no sooner than RecipeTimeout after its last renewal,
	// as the recipe's own nodes. Whole seconds, 1 s to 4,294,966 s; default
	// DefaultRecipeTimeout. Give the recipe's value or a longer one, never a
	// shorter one.
	RecipeTimeout time.Duration
}

// Holder is an election row as Adopt found and kept it.
type Holder struct {
	Election  string        `db:"election"`   // the anchor, now the election's name (the recipe's 1 becomes "1")
	ID        string        `db:"id"`         // service_id: the holder
	LeaseLeft time.Duration `db:"lease_left"` // by the database clock, when Adopt finished; negative once expired
}

// Adopt converts the MySQL-table recipe's table (anchor, service_id,
// last_seen_active, driven by the recipe's INSERT … ON DUPLICATE KEY UPDATE)
// in place into sqlelect's, then applies the remaining migrations, and
// returns the rows it kept.
//
// One ALTER TABLE keeps every row: the anchor becomes the election's name
// as text (the recipe's 1 is election "1"), service_id stays the holder,
// last_seen_active its last renewal, and the lease is RecipeTimeout (plus the
// second the recipe's whole-second timestamps may lose), so the current
// holder keeps leading and sqlelect candidates take over no sooner than the
// recipe's nodes would. The recipe's statements keep working on the
// converted table, so its nodes may keep running during the switch; docs/adopting.md
// ("Moving from the MySQL-table recipe") gives the safe order of steps.
//
// Adopt begins an adoption period (see Adoption): until EndAdoption, a row
// written later without lease_ms (a recipe node's INSERT after a DELETE or
// into an empty table, an operator's plain REPLACE) gets the same lease,
// RecipeTimeout plus one second, whatever migrations run meanwhile, through
// package schema or golang-migrate's own CLI: lease_ms's default is that
// lease, and its comment marks the period, which migration 3 leaves alone.
//
// Adopt refuses (a *LayoutError, nothing done) a table that is neither the
// recipe's nor sqlelect's, returns ErrNoChange for a table that is already
// sqlelect's, and needs the version recorded in MigrationsTable to be none
// or 1 (an older sqlelect's "migrate up" recorded 1 over the recipe's table
// without changing it). Unadopt reverts it.
func (g *Migrator) Adopt(ctx context.Context, opts AdoptOptions) (hs []Holder, err error) {
	timeout := cmp.Or(opts.RecipeTimeout, DefaultRecipeTimeout)
	if err := CheckRecipeTimeout(timeout); err != nil {
		return nil, err
	}
	err = run(ctx, g.db, func(s *session, m *migrate.Migrate) error {
		if err := s.withLock(func() error { return s.adopt(timeout) }); err != nil {
			return err
		}
		if err := m.Up(); err != nil && !errors.Is(err, ErrNoChange) {
			return err
		}
		hs, err = s.holders()
		return err
	})
	return hs, err
}

// CheckRecipeTimeout checks AdoptOptions.RecipeTimeout: whole seconds, from
// 1 s to 4,294,966 s (lease_ms, an INT UNSIGNED, holds it plus 1 s).
func CheckRecipeTimeout(d time.Duration) error {
	if d < time.Second || d%time.Second != 0 || d > 4294966*time.Second {
		return fmt.Errorf("schema: recipe timeout %v: must be whole seconds, from 1s to 4294966s", d)
	}
	return nil
}

func (s *session) adopt(timeout time.Duration) error {
	v, err := s.expect("adopt", adoption.KindRecipe, adoption.KindSqlelect, "is sqlelect's")
	switch {
	case err != nil:
		return err
	case v > 1:
		return fmt.Errorf("schema: the table %s is the recipe's but %s records version %d: "+
			"run 'sqlelect migrate force -1' if no sqlelect migration ran on it, then adopt", tableName, MigrationsTable, v)
	}
	var long int
	if err := s.conn.QueryRowContext(s.ctx, `SELECT COUNT(*) FROM `+tableName+` WHERE CHAR_LENGTH(service_id) > 255`).Scan(&long); err != nil {
		return fmt.Errorf("schema: adopt: %w", err)
	}
	if long > 0 {
		return fmt.Errorf("schema: adopt refused, nothing done: %d rows of %s have a service_id longer than 255 characters", long, tableName)
	}
	// One statement: the rows keep their holder and last renewal, and get
	// the recipe's timeout as their lease, atomically. The columns are
	// those of migration 1 (a test compares SHOW CREATE TABLE).
	if _, err := s.conn.ExecContext(s.ctx, fmt.Sprintf(adoptSQL, (timeout+time.Second).Milliseconds())); err != nil {
		return fmt.Errorf("schema: adopt: %w", err)
	}
	// The column's default stays the adopted lease, marked by the
	// column's comment, for the rows written later without lease_ms (a
	// recipe node's INSERT, an operator's REPLACE): migration 3 leaves a
	// marked default alone, and EndAdoption restores the usual one.
	return s.SetVersion(1, false)
}

// adoptSQL turns the recipe's table into migration 1's; %d is the lease of
// the existing rows and the column's default, in milliseconds, and the
// column's comment marks the adoption period while the default is the
// adopted lease. Migration 3 leaves the default of a column whose comment
// starts with "sqlelect adoption" (adoption.Marker) alone; migrations that
// change lease_ms must do the same.
const adoptSQL = `ALTER TABLE ` + tableName + `
  MODIFY anchor VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  MODIFY service_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  MODIFY last_seen_active TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  ADD COLUMN term BIGINT UNSIGNED NOT NULL DEFAULT (FLOOR(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(6)) * 1000000)),
  ADD COLUMN term_started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  ADD COLUMN lease_ms INT UNSIGNED NOT NULL DEFAULT %d COMMENT '` + adoption.Marker + ` period: the default is the recipe timeout + 1 s; end it with: sqlelect migrate adopt-end',
  ADD COLUMN released TINYINT UNSIGNED NOT NULL DEFAULT 0,
  ADD COLUMN acquired VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'operator',
  ADD COLUMN value VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  ADD COLUMN backend VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'table',
  ADD COLUMN connection_id BIGINT UNSIGNED NULL DEFAULT NULL,
  ENGINE=InnoDB, DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// Unadopt reverts Adopt: it reverts the migrations down to version 1, turns
// the table back into the recipe's layout (anchor TINYINT UNSIGNED,
// service_id VARCHAR(128), last_seen_active TIMESTAMP; sqlelect's other
// columns are dropped, and with them terms, released marks and values), and
// removes the recorded version. The rows keep their holder and last renewal
// (to the second), so the recipe's nodes treat the current holder as live.
// It refuses, nothing done, rows the recipe's table cannot hold: an
// election whose name is not a number from 0 to 255, or a service_id longer
// than 128 characters. Stop sqlelect's candidates first: their statements
// fail on the recipe's table (a leader stands down within its renew
// deadline, which must be below the recipe's timeout).
func (g *Migrator) Unadopt(ctx context.Context) error {
	return run(ctx, g.db, func(s *session, m *migrate.Migrate) error {
		v, err := s.expect("unadopt", adoption.KindSqlelect, adoption.KindRecipe, "has the recipe's layout")
		if err != nil {
			return err
		}
		var bad, long string
		err = s.conn.QueryRowContext(s.ctx, `SELECT
  COALESCE((SELECT MIN(anchor) FROM `+tableName+` WHERE anchor NOT REGEXP '^[0-9]{1,3}$' OR CAST(anchor AS UNSIGNED) > 255), ''),
  COALESCE((SELECT MIN(anchor) FROM `+tableName+` WHERE CHAR_LENGTH(service_id) > 128), '')`).Scan(&bad, &long)
		switch {
		case err != nil:
			return fmt.Errorf("schema: unadopt: %w", err)
		case bad != "":
			return fmt.Errorf("schema: unadopt refused, nothing done: the election %q cannot go back into the recipe's "+
				"anchor TINYINT UNSIGNED (names must be numbers from 0 to 255): delete or rename it first", bad)
		case long != "":
			return fmt.Errorf("schema: unadopt refused, nothing done: the holder of the election %q has a service_id longer "+
				"than the recipe's 128 characters", long)
		}
		if v > 1 {
			if err := m.Migrate(1); err != nil {
				return err
			}
		}
		return s.withLock(func() error {
			if _, err := s.conn.ExecContext(s.ctx, unadoptSQL); err != nil {
				return fmt.Errorf("schema: unadopt: %w", err)
			}
			return s.SetVersion(database.NilVersion, false)
		})
	})
}

const unadoptSQL = `ALTER TABLE ` + tableName + `
  DROP COLUMN term, DROP COLUMN term_started_at, DROP COLUMN lease_ms, DROP COLUMN released,
  DROP COLUMN acquired, DROP COLUMN value, DROP COLUMN backend, DROP COLUMN connection_id,
  MODIFY anchor TINYINT(3) UNSIGNED NOT NULL,
  MODIFY service_id VARCHAR(128) NOT NULL,
  MODIFY last_seen_active TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP`

// holders reads the rows after Adopt.
func (s *session) holders() (hs []Holder, err error) {
	rows, err := s.conn.QueryContext(s.ctx, `SELECT anchor AS election, service_id AS id,
  TIMESTAMPDIFF(MICROSECOND, SYSDATE(6), last_seen_active + INTERVAL lease_ms * 1000 MICROSECOND) * 1000 AS lease_left
FROM `+tableName+` ORDER BY anchor`)
	if err == nil {
		defer rows.Close()
		err = sqlx.StructScan(rows, &hs)
	}
	if err != nil {
		return nil, fmt.Errorf("schema: adopt: reading the rows: %w", err)
	}
	return hs, nil
}

// Adoption reports the adoption period that Adopt begins: while it runs,
// a row written without lease_ms (a recipe node's INSERT, an operator's
// plain REPLACE or INSERT) gets lease, the recipe's timeout plus one
// second, as its lease, instead of the usual default (15 s). ok is false
// outside the period, and on a table that is not sqlelect's.
func (g *Migrator) Adoption(ctx context.Context) (lease time.Duration, ok bool, err error) {
	lease, ok, err = adoption.Lease(ctx, g.db, tableName)
	return lease, ok, wrap(ctx, err) // lease and ok are zero on an error
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
	return run(ctx, g.db, func(s *session, _ *migrate.Migrate) error { return s.withLock(s.endAdoption) })
}

// expect reads the state for verb ("adopt", "unadopt" or "adopt-end"): the
// recorded version when the table has the layout want, else ErrNoChange
// when it has the layout done (the table "is sqlelect's already", say), or
// a *LayoutError.
func (s *session) expect(verb string, want, done adoption.Kind, already string) (int, error) {
	v, _, cols, err := s.state("migrate "+verb, false)
	switch kind := adoption.Classify(cols); {
	case err != nil || kind == want:
		return v, err
	case kind == done:
		return 0, fmt.Errorf("%w: the table %s %s already", ErrNoChange, tableName, already)
	}
	return 0, &LayoutError{columns: cols, Table: tableName, Version: v, Action: verb}
}

func (s *session) endAdoption() error {
	v, err := s.expect("adopt-end", adoption.KindSqlelect, adoption.KindSqlelect, "")
	if err != nil {
		return err
	}
	if _, ok, err := adoption.Lease(s.ctx, s.conn, tableName); err != nil {
		return err // run prefixes it
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
