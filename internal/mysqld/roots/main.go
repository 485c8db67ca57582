// Command roots builds the Debian roots of the servers it is given (see
// mysqld.EnsureRoot), once per machine, so that tests that start those
// servers find them ready: make ci and make test-matrix run it before
// their tests, whose set-up would otherwise build a root within a test's
// deadline. Usage: go run ./internal/mysqld/roots mysql-9.7 mariadb-11.8.
// It needs root privileges and Debian's package mirror; it exits 1 on the
// first root it cannot build.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqld"
)

func main() {
	// Two roots take about a minute each on the 2-core machine.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	for _, name := range os.Args[1:] {
		root, err := mysqld.EnsureRoot(ctx, mysqld.DefaultRootCache, name, logf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "roots:", err)
			os.Exit(1)
		}
		fmt.Printf("roots: %s in %s\n", name, root)
	}
}
