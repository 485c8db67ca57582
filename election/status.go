package election

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlelect/sqlelect/internal/probe"
	"github.com/sqlelect/sqlelect/internal/stmt"
)

// scan reads into r a row selected by probe.RecordColumns (internal/probe's:
// the privilege probe reads them too).
func (r *Record) scan(row interface{ Scan(dest ...any) error }) error {
	var since, seen, to sql.Null[string]
	var lease, left sql.Null[int64]
	*r = Record{}
	err := row.Scan(&r.Election, &r.ID, &r.Term, &since, &seen, &lease, &r.Released, &r.Acquired, &r.Value,
		&r.Backend, &r.ConnectionID, &to, &r.Priority, &left)
	r.Since, r.LastRenewal = unixDecimal(since.V), unixDecimal(seen.V)
	r.Lease, r.LeaseLeft = time.Duration(lease.V)*time.Millisecond, time.Duration(left.V)*time.Microsecond
	r.Transfer, r.TransferTo = to.Valid, to.V
	return err
}

// scanRecords reads the rows selected by probe.RecordColumns (none: an empty
// slice, not nil), and closes them; err is the error of their query,
// returned as it is.
func scanRecords(rows *sql.Rows, err error) ([]Record, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Record{}
	for rows.Next() {
		var r Record
		if err := r.scan(rows); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// unixDecimal parses "1763790000.123456" as a UTC time; "" gives zero.
// The seconds are read as a duration, which keeps every digit (to the
// nanosecond, until the year 2262).
func unixDecimal(s string) time.Time {
	d, err := time.ParseDuration(s + "s")
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, int64(d)).UTC()
}

// ReadRecord reads election name's record from table (a validated name, as
// Config.Validate accepts; not empty), whatever its state: what
// operator.Status returns. The error wraps ErrNoSuchElection when the
// election has no row; with the record, it wraps ErrNoLiveLease when the
// row holds no live lease (both match ErrNoLeader). Safe for concurrent use.
func ReadRecord(ctx context.Context, db *sql.DB, table, name string) (Record, error) {
	var rec Record
	err := rec.scan(stmt.Must(readSQL(quoteTable(table))).QueryRow(ctx, db, stmt.Params{Name: name}))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{Election: name}, fmt.Errorf("%w: %q in %s", ErrNoSuchElection, name, table)
	}
	if err != nil {
		return Record{}, probe.Classify(err, table)
	}
	switch {
	case rec.Released:
		return rec, fmt.Errorf("%w: %q: lease of %q released", ErrNoLiveLease, name, rec.ID)
	case !rec.Live():
		return rec, fmt.Errorf("%w: %q: lease of %q expired %v ago", ErrNoLiveLease, name, rec.ID, (-rec.LeaseLeft).Round(time.Millisecond))
	}
	return rec, nil
}

// ReadRecords reads every election's record in table (validated, not
// empty), ordered by name, live or not: what operator.List returns. Safe
// for concurrent use.
func ReadRecords(ctx context.Context, db *sql.DB, table string) ([]Record, error) {
	out, err := scanRecords(db.QueryContext(ctx, "SELECT "+probe.RecordColumns+" FROM "+quoteTable(table)+" ORDER BY anchor"))
	return out, probe.Classify(err, table)
}
