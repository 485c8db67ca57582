// Command throwawaydb starts a throwaway MariaDB or MySQL server (from the
// binaries on this machine, as the examples do when SQLELECT_DSN is unset),
// creates the database sqlelect_examples with the election table, prints its
// DSN and keeps the server until SIGINT or SIGTERM, then deletes it. Use it
// to run several replicas of an example, or `sqlelect run`, on one server:
//
//	go run ./examples/throwawaydb
//	export SQLELECT_DSN='root@tcp(127.0.0.1:PORT)/sqlelect_examples?…'   # in other terminals
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sqlelect/sqlelect/examples/internal/exampledb"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if os.Getenv(exampledb.EnvDSN) != "" {
		fmt.Fprintln(os.Stderr, "throwawaydb: SQLELECT_DSN is set: use that server (unset it to start a throwaway one)")
		os.Exit(2)
	}
	dsn, cleanup, err := exampledb.DSN(ctx)
	defer cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "throwawaydb:", err)
		cleanup()
		os.Exit(1)
	}
	fmt.Printf("export SQLELECT_DSN='%s'\n", dsn)
	fmt.Fprintln(os.Stderr, "throwawaydb: server up, election table migrated; Ctrl-C stops it and deletes its data")
	<-ctx.Done()
}
