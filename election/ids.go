package election

import (
	"fmt"
	"strings"
	"unicode"
)

// checkIDSpaces refuses candidate identities that the server could confuse
// with another or that show as blank: a trailing space (under a PAD SPACE
// collation, as service_id has at schema version 1, 'n1 ' equals 'n1', so
// two candidates would both match the row), or only white space. Its error
// wraps ErrInvalidConfig. ValidateID calls it; the schema's later versions
// also compare service_id without padding (migration 2).
func checkIDSpaces(id string) error {
	switch {
	case id != "" && strings.TrimFunc(id, unicode.IsSpace) == "":
		return fmt.Errorf("%w: candidate id %q: only white space", ErrInvalidConfig, id)
	case strings.HasSuffix(id, " "):
		return fmt.Errorf("%w: candidate id %q: ends with a space (the server ignores trailing spaces when comparing at schema version 1)",
			ErrInvalidConfig, id)
	}
	return nil
}
