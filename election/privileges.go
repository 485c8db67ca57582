package election

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
)

// checkPrivileges checks that the session's user may run every statement a
// candidate sends to tbl: SELECT (every look), INSERT and UPDATE (the
// heartbeat's INSERT … ON DUPLICATE KEY UPDATE, takes, renewals, releases).
// It sends one statement per privilege that matches no row (WHERE 1 = 0):
// the server checks privileges before it looks for rows, so nothing is
// written and no row is locked. A user without them is refused here, at
// preflight, instead of campaigning as a follower that fails only when it
// tries to take over (a standby that cannot fail over, unseen until the
// failover it exists for). It returns an error wrapping ErrAccessDenied
// that names every missing privilege, or nil; other errors (a read-only
// server, which may become writable) are left to the campaign.
func checkPrivileges(ctx context.Context, db *sql.DB, tbl string) error {
	var missing []string
	var first error
	for _, p := range privilegeProbes(tbl) {
		if p.Name == "DELETE" {
			continue // operators' (Reelect), not candidates'
		}
		_, err := db.ExecContext(ctx, p.Query)
		if err == nil {
			continue
		}
		if serverCause(err) != ErrAccessDenied {
			if ctx.Err() != nil || mysqlerr.Errno(err) == 0 {
				return fmt.Errorf("election: checking privileges on %s: %w", tbl, err)
			}
			continue // not a privilege: the campaign will say
		}
		missing = append(missing, p.Name)
		first = cmp.Or(first, err)
	}
	if missing == nil {
		return nil
	}
	return fmt.Errorf("%w: the user lacks %s on %s, which a candidate needs to take over "+
		"(GRANT SELECT, INSERT, UPDATE ON %s TO the user): %w",
		ErrAccessDenied, strings.Join(missing, ", "), tbl, tbl, first)
}

// privilegeProbes are the probes of SELECT, INSERT, UPDATE and DELETE on
// tbl (quoted), for checkPrivileges and the doctor: each matches no row
// (WHERE 1 = 0), and the server checks privileges before it looks for rows.
func privilegeProbes(tbl string) []probe.Privilege {
	return []probe.Privilege{
		{Name: "SELECT", Query: `SELECT ` + recordColumns + ` FROM ` + tbl + ` WHERE 1 = 0`},
		{Name: "INSERT", Query: `INSERT INTO ` + tbl + ` (anchor, service_id) SELECT '', '' FROM DUAL WHERE 1 = 0`},
		{Name: "UPDATE", Query: `UPDATE ` + tbl + ` SET service_id = service_id WHERE 1 = 0`},
		{Name: "DELETE", Query: `DELETE FROM ` + tbl + ` WHERE 1 = 0`},
	}
}
