package operator_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"

	"github.com/sqlelect/sqlelect/operator"
)

// ops is an operator of db's elections in the default table. New fails
// only on a nil db or an invalid table: here db is never nil.
func ops(db *sql.DB) *operator.Operator { op, _ := operator.New(db, ""); return op }

// randHex is n random bytes in hex: a random name per test.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
