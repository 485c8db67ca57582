package election

import "strings"

// column is a column and the expression it gets, in an INSERT or REPLACE.
type column struct{ name, value string }

// insertColumns renders cols as "(name, …)\nVALUES (value, …)"'s two lists:
// the column list and the value list, generated from one list so that they
// cannot drift apart.
func insertColumns(cols []column) (names, values string) {
	n, v := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		n[i], v[i] = c.name, c.value
	}
	return strings.Join(n, ","), strings.Join(v, ",")
}
