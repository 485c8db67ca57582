package election_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
)

// Classify names the cause of a server error from your own statements on
// the election's database (a Ping, a migration) with the package's
// sentinels, so that errors.Is tells them apart.
func ExampleClassify() {
	err := election.Classify(&mysql.MySQLError{Number: 1146, Message: "Table 'app.service_election' doesn't exist"})
	fmt.Println(errors.Is(err, election.ErrTableMissing))
	// Output: true
}

// ErrorKind is a label of few values for a heartbeat's error, for metrics
// and logs (electionprom counts errors by it).
func ExampleErrorKind() {
	for _, err := range []error{
		context.DeadlineExceeded,
		&mysql.MySQLError{Number: 1213, Message: "Deadlock found"},
		fmt.Errorf("heartbeat: %w", election.ErrAccessDenied), // the package's errors are classified
		&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"},
		errors.New("dial tcp 10.0.0.5:3306: connect: connection refused"),
	} {
		fmt.Println(election.ErrorKind(err))
	}
	// Output:
	// timeout
	// deadlock
	// access
	// lock_wait
	// connection
}
