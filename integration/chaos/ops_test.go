package chaos

import (
	"database/sql"

	"github.com/sqlelect/sqlelect/operator"
)

// ops is an operator of db's elections in the default table. New fails
// only on a nil db or an invalid table: here db is never nil.
func ops(db *sql.DB) *operator.Operator { op, _ := operator.New(db, ""); return op }
