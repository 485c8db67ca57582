// Package ident checks the names sqlelect accepts: election names,
// candidate identities and table names (and quotes the latter); and it
// holds the limit of a candidate's published value. Its errors wrap ErrInvalid, which
// package election exports as ErrInvalidConfig.
package ident

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrInvalid wraps every validation failure; election.ErrInvalidConfig is
// this error.
var ErrInvalid = errors.New("election: invalid config")

// The limits of the names, and of a value.
const (
	// MaxValueLen is the longest value a candidate publishes
	// (election.Config.Value, Proclaim), in bytes of UTF-8.
	MaxValueLen = 1024

	maxNameLen  = 128
	maxIDLen    = 255
	maxIdentLen = 64
	// maxTableLen is the longest table name whose derived identifiers
	// fit MySQL's 64 characters: <table>_decision, the longest (migration
	// 7's CHECK constraint, renamed by schema.DDL).
	maxTableLen = maxIdentLen - len("_decision")

	// The ASCII letters, and with the digits: what names are made of.
	letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alnum   = letters + "0123456789"
)

// Name checks an election name: 1 to 128 characters among letters, digits
// and . _ - : / @.
func Name(name string) error {
	if name == "" || len(name) > maxNameLen || strings.Trim(name, alnum+"._:/@-") != "" {
		return fmt.Errorf("%w: election name %q: must be 1 to %d characters among letters, digits and . _ - : / @", ErrInvalid, name, maxNameLen)
	}
	return nil
}

// ID checks a candidate identity: 1 to 255 characters of UTF-8 without
// control characters, not only white space and not ending in a space. It
// refuses the identities that the server could confuse with another or that
// show as blank: a trailing space (under a PAD SPACE collation, as
// service_id has at schema version 1, 'n1 ' equals 'n1', so two candidates
// would both match the row), or only white space. The schema's later
// versions also compare service_id without padding (migration 2).
func ID(id string) error {
	switch {
	case id == "" || !utf8.ValidString(id) || utf8.RuneCountInString(id) > maxIDLen || strings.IndexFunc(id, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: candidate id %q: must be 1 to %d characters of UTF-8 without control characters", ErrInvalid, id, maxIDLen)
	case strings.TrimFunc(id, unicode.IsSpace) == "":
		return fmt.Errorf("%w: candidate id %q: only white space", ErrInvalid, id)
	case strings.HasSuffix(id, " "):
		return fmt.Errorf("%w: candidate id %q: ends with a space (the server ignores trailing spaces when comparing at schema version 1)",
			ErrInvalid, id)
	}
	return nil
}

// Table checks a table name: an identifier of letters, digits, _ and $ (not
// starting with a digit or $), optionally qualified by a database name of
// the same form; the database name at most 64 characters, the table's at
// most 55, so that the names the schema derives from it (its CHECK
// constraint <table>_decision and floor.Table) fit MySQL's 64.
func Table(table string) error {
	parts := strings.Split(table, ".")
	if len(parts) > 2 || slices.ContainsFunc(parts, func(p string) bool { return !identifier(p) }) {
		return fmt.Errorf("%w: table %q: must be an identifier ([A-Za-z_][A-Za-z0-9_$]*, at most 64 characters), optionally db.table", ErrInvalid, table)
	}
	if t := parts[len(parts)-1]; len(t) > maxTableLen {
		return fmt.Errorf("%w: table %q: %d characters, at most %d: the schema names its CHECK constraint %s_decision and its term floor table %s, and MySQL's identifiers have at most 64",
			ErrInvalid, table, len(t), maxTableLen, t, t+"_floor")
	}
	return nil
}

// Value checks a candidate's published value (Config.Value, Proclaim):
// valid UTF-8 of at most MaxValueLen bytes, as the value column holds.
func Value(v string) error {
	if len(v) > MaxValueLen || !utf8.ValidString(v) {
		return fmt.Errorf("%w: value: must be valid UTF-8 of at most %d bytes", ErrInvalid, MaxValueLen)
	}
	return nil
}

// Quote returns a table name that Table accepted quoted for SQL:
// `db`.`table`.
func Quote(table string) string { return "`" + strings.ReplaceAll(table, ".", "`.`") + "`" }

// identifier reports whether s matches [A-Za-z_][A-Za-z0-9_$]{0,63}.
func identifier(s string) bool {
	return s != "" && len(s) <= maxIdentLen && strings.IndexByte(letters+"_", s[0]) >= 0 && strings.Trim(s, alnum+"_$") == ""
}
