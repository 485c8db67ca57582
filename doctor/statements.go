package doctor

// statements are the doctor's own statements on the election table, with ?
// placeholders (database/sql). The statements it shares with Run (the
// privilege probes, the preflight checks, the heartbeat probe) are
// election's, through probe.Kit.
type statements struct {
	version       string // the server's version
	replicaStatus string // the replication channels
	slaveStatus   string // the same, before MySQL 8.0.22 and MariaDB 10.5.1
	replace       string // an operator's REPLACE over a row: anchor, service_id
	acquired      string // the acquired column of a row: anchor
	now           string // the term clock, in µs
	connectionID  string // the session's id
	lockRow       string // a locking read of a row: anchor
	insert        string // a scratch row: anchor, service_id
	skipLocked    string // a SKIP LOCKED read of two rows: anchor, anchor
	ping          string // a round trip
	cleanup       string // delete the scratch rows: anchor, anchor
	cleanupFix    string // what an operator runs when cleanup failed
}

// newStatements returns the statements on tbl (quoted); termNow is the
// database clock in µs (probe.Kit.TermNow).
func newStatements(tbl, termNow string) statements {
	return statements{
		version:       `SELECT VERSION()`,
		replicaStatus: `SHOW REPLICA STATUS`,
		slaveStatus:   `SHOW SLAVE STATUS`,
		replace:       `REPLACE INTO ` + tbl + ` (anchor, service_id, last_seen_active) VALUES (?, ?, NOW(6))`,
		acquired:      `SELECT acquired FROM ` + tbl + ` WHERE anchor = ?`,
		now:           `SELECT ` + termNow,
		connectionID:  `SELECT CONNECTION_ID()`,
		lockRow:       `SELECT anchor FROM ` + tbl + ` WHERE anchor = ? FOR UPDATE`,
		insert:        `INSERT INTO ` + tbl + ` (anchor, service_id, last_seen_active) VALUES (?, ?, NOW(6))`,
		skipLocked:    `SELECT anchor FROM ` + tbl + ` WHERE anchor IN (?, ?) FOR UPDATE SKIP LOCKED`,
		ping:          `SELECT 1`,
		cleanup:       `DELETE FROM ` + tbl + ` WHERE anchor IN (?, ?)`,
		cleanupFix:    `DELETE FROM ` + tbl + ` WHERE anchor LIKE '` + scratchPrefix + `%'`,
	}
}
