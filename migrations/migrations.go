// Package migrations embeds the golang-migrate SQL files that create the
// service_election table. Use package schema to apply them, or copy the files
// into your own migrations directory.
//
// A migration that sets lease_ms's default must leave a column whose
// comment starts with "sqlelect adoption" alone, as 000003 does: that is
// the adoption period of package schema's Adopt, whose default is the
// recipe's timeout until EndAdoption.
//
// Package schema runs a file's statements one at a time, split as the files
// are laid out: each statement ends with a line that ends with a semicolon,
// and comments are whole lines that begin with "--" (a semicolon within a
// line, in a string or a comment, ends nothing).
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed *.sql
var files embed.FS

// FS returns the migration files, named NNNNNN_title.up.sql / .down.sql as
// golang-migrate expects. The file system is read-only and safe for
// concurrent use.
func FS() fs.FS { return files }
