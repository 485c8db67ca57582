package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// recordRow is a row of the election table as selected by recordColumns.
// Timestamps come as decimal Unix seconds (UNIX_TIMESTAMP of a TIMESTAMP
// column is exact and needs no time zone), so the DSN needs no parseTime.
type recordRow struct {
	Anchor       string         `db:"anchor"`
	ServiceID    string         `db:"service_id"`
	Term         uint64         `db:"term"`
	Since        string         `db:"since"`
	LastSeen     string         `db:"last_seen"`
	LeaseMS      int64          `db:"lease_ms"`
	Released     bool           `db:"released"`
	Acquired     string         `db:"acquired"`
	Value        string         `db:"value"`
	Backend      string         `db:"backend"`
	ConnectionID uint64         `db:"connection_id"`
	LeftUS       int64          `db:"left_us"`
	TransferTo   sql.NullString `db:"transfer_to"`
	Priority     int            `db:"priority"`
}

const recordColumns = `anchor, service_id, term,
  CAST(UNIX_TIMESTAMP(term_started_at) AS CHAR) AS since,
  CAST(UNIX_TIMESTAMP(last_seen_active) AS CHAR) AS last_seen,
  lease_ms, released <> 0 AS released, acquired, value, backend,
  COALESCE(connection_id, 0) AS connection_id, transfer_to, priority,
  TIMESTAMPDIFF(MICROSECOND, NOW(6), last_seen_active + INTERVAL lease_ms * 1000 MICROSECOND) AS left_us`

func (r recordRow) record() Record {
	return Record{
		Election:     r.Anchor,
		ID:           r.ServiceID,
		Term:         r.Term,
		Since:        unixDecimal(r.Since),
		LastRenewal:  unixDecimal(r.LastSeen),
		Lease:        time.Duration(r.LeaseMS) * time.Millisecond,
		LeaseLeft:    time.Duration(r.LeftUS) * time.Microsecond,
		Released:     r.Released,
		Acquired:     r.Acquired,
		Value:        r.Value,
		Backend:      r.Backend,
		ConnectionID: r.ConnectionID,
		Transfer:     r.TransferTo.Valid,
		TransferTo:   r.TransferTo.String,
		Priority:     r.Priority,
	}
}

// unixDecimal parses "1763790000.123456" as a UTC time; "" gives zero.
func unixDecimal(s string) time.Time {
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	frac = (frac + "000000000")[:9]
	nanos, _ := strconv.ParseInt(frac, 10, 64)
	return time.Unix(secs, nanos).UTC()
}

// Status reads one election's record from table (DefaultTable when empty),
// whatever its state; it returns an error wrapping ErrNoSuchElection when
// the election has no row, and the record with an error wrapping
// ErrNoLiveLease when the row holds no live lease (both match ErrNoLeader).
// Safe for concurrent use.
func Status(ctx context.Context, db *sql.DB, table, name string) (Record, error) {
	if table == "" {
		table = DefaultTable
	}
	if err := ValidateTable(table); err != nil {
		return Record{}, err
	}
	if db == nil {
		return Record{}, ErrNilDB
	}
	return readRecord(ctx, sqlx.NewDb(db, "mysql"), table, name)
}

func readRecord(ctx context.Context, db *sqlx.DB, table, name string) (Record, error) {
	var row recordRow
	err := db.GetContext(ctx, &row, "SELECT "+recordColumns+" FROM "+quoteTable(table)+" WHERE anchor = ?", name)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{Election: name}, fmt.Errorf("%w: %q in %s", ErrNoSuchElection, name, table)
	}
	if err != nil {
		return Record{}, classify(err, table)
	}
	rec := row.record()
	if !rec.Live() {
		return rec, fmt.Errorf("%w: %q: lease of %q %s", ErrNoLiveLease, name, rec.ID, deadState(rec))
	}
	return rec, nil
}

func deadState(r Record) string {
	if r.Released {
		return "released"
	}
	return "expired " + (-r.LeaseLeft).Round(time.Millisecond).String() + " ago"
}

// List reads every election's record in table (DefaultTable when empty),
// ordered by name, live or not. Safe for concurrent use.
func List(ctx context.Context, db *sql.DB, table string) ([]Record, error) {
	if table == "" {
		table = DefaultTable
	}
	if err := ValidateTable(table); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, ErrNilDB
	}
	var rows []recordRow
	if err := sqlx.NewDb(db, "mysql").SelectContext(ctx, &rows,
		"SELECT "+recordColumns+" FROM "+quoteTable(table)+" ORDER BY anchor"); err != nil {
		return nil, classify(err, table)
	}
	out := make([]Record, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}
