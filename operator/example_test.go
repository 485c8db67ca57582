package operator_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/sqlelect/sqlelect/operator"
)

// Force a given candidate to lead, as an operator would with REPLACE.
func ExampleOperator_Assume() {
	var db *sql.DB                  // the caller's pool
	op, err := operator.New(db, "") // election.DefaultTable
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := op.Assume(ctx, "orders-scheduler", "web-3:4242:a1b2c3")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("row now names", r.ID, "term", r.Term)
}
