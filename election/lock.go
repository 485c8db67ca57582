package election

import (
	"database/sql"
	"errors"
)

// NewLock returns a candidate of the GET_LOCK backend. Not implemented yet.
func NewLock(db *sql.DB, cfg Config) (Election, error) {
	return nil, errors.New("election: the lock backend is not implemented yet")
}
