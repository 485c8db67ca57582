package testdb

import (
	"strings"

	"github.com/sqlelect/sqlelect/internal/stmt"
)

// Inline writes into sql, a statement with a ? for each of args, the
// arguments that stmt.Bind writes as literals (stmt.Literal), and returns
// the others: the statement as Bind sends it, for the tests that compare
// the library's statements with ones assembled by hand.
func Inline(sql string, args []any) (string, []any) {
	var b strings.Builder
	var left []any
	quoted := false
	for _, c := range sql {
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted && len(args) > 0:
			x := args[0]
			args = args[1:]
			if lit, ok := stmt.Literal(x); ok {
				b.WriteString(lit)
				continue
			}
			left = append(left, x)
		}
		b.WriteRune(c)
	}
	return b.String(), append(left, args...)
}
