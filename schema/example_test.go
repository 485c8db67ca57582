package schema_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"time"

	"github.com/sqlelect/sqlelect/schema"
)

// Migrate on the application's own pool: the DSN needs nothing special,
// and ctx bounds the whole call, also against a server that stopped
// answering.
func ExampleNew() {
	db, err := sql.Open("mysql", "app:secret@tcp(db:3306)/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close() // the application's: schema never closes it
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := schema.New(db)
	if err := m.Up(ctx); err != nil && !errors.Is(err, schema.ErrNoChange) {
		log.Fatal(err)
	}
	v, dirty, err := m.Version(ctx)
	log.Printf("schema version %d (dirty %v): %v", v, dirty, err)
}
