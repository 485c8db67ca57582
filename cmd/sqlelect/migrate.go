package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/operator"
	"github.com/sqlelect/sqlelect/schema"
)

var migrateCmd = &command{
	name:    "migrate",
	args:    "up|down|version|force N|adopt|adopt-end|unadopt [--yes] [--recipe-timeout 20s]",
	summary: "create, drop or inspect the election table (embedded golang-migrate migrations)",
	detail: `  up         apply every pending migration (creates ` + election.DefaultTable + `)
  down       revert every migration: DROPS the table and every election in it
             (asks on a terminal; --yes to confirm otherwise); refuses while
             an election in it has a live leader, naming it, unless --force
  version    print the applied version
  force N    record version N without running anything, after a failed
             migration left the schema dirty (-1: none)
  adopt      convert the MySQL-table recipe's ` + election.DefaultTable + ` (anchor, service_id,
             last_seen_active) in place, keeping its holder and its lease
             (--recipe-timeout: the recipe's "interval N second", default 20s);
             the recipe's nodes may keep running: see docs/adopting.md, "Moving
             from the MySQL-table recipe", for the order of steps (asks; --yes);
             until adopt-end, rows written without lease_ms (a recipe node's
             INSERT, an operator's REPLACE) get the recipe's timeout + 1s
  adopt-end  end the adoption period, once no recipe node runs: rows written
             without lease_ms get the usual default lease again (15s)
  unadopt    revert adopt: back to the recipe's three columns (asks; --yes)

up, down and adopt do nothing and exit 5 when ` + election.DefaultTable + ` has a layout
they do not know (they name the columns found and what to do), and exit 8
when the database records a version newer than this binary's migrations.
The applied version is kept in the table ` + schema.MigrationsTable + `. The DSN must name
a database; migrate manages the table ` + election.DefaultTable + ` only (to use another
name, copy the DDL from package schema into your own migrations).`,
	example: `export SQLELECT_DSN='app:secret@tcp(db:3306)/app'
sqlelect migrate up
sqlelect migrate version
sqlelect migrate adopt --recipe-timeout 20s --yes   # the recipe's table becomes sqlelect's; election "1"`,
	run: (*cli).migrate,
}

func (c *cli) migrate(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var co common
	co.register(fs)
	yes := fs.Bool("yes", false, "do not ask before migrate down, adopt or unadopt")
	force := fs.Bool("force", false, "migrate down: drop the table even while an election in it has a live leader")
	var recipeTimeout time.Duration
	fs.DurationVar(&recipeTimeout, "recipe-timeout", schema.DefaultRecipeTimeout, "adopt: the recipe's timeout (its `interval N second`), the adopted rows' lease")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	action, forceTo, err := migrateAction(args)
	if err != nil {
		return err
	}
	if err := schema.CheckRecipeTimeout(recipeTimeout); action == "adopt" && err != nil {
		return wrapf(exitUsage, err, "--recipe-timeout")
	}
	ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
	defer cancel()
	db, err := openMigrations(ctx, &co)
	if err != nil {
		return err
	}
	defer db.Close()
	m := schema.New(db)
	before, dirty, err := m.Version(ctx)
	if err != nil {
		return migrateError(err)
	}

	switch action {
	case "version":
		return c.migrateVersion(ctx, m, before, dirty)
	case "adopt":
		return c.adopt(ctx, m, before, recipeTimeout, *yes)
	case "unadopt":
		return c.unadopt(ctx, m, before, *yes)
	case "adopt-end":
		return c.adoptEnd(ctx, m)
	case "force":
		if err := m.Force(ctx, forceTo); err != nil {
			return migrateError(err)
		}
		fmt.Fprintf(c.stdout, "schema version forced from %d to %d (no migration was run)\n", before, forceTo)
		return nil
	}
	if action == "down" && !*force {
		if err := refuseLiveLeaders(ctx, db); err != nil {
			return err
		}
	}
	return c.migrateStep(ctx, m, action, before, *yes)
}

// refuseLiveLeaders refuses migrate down while an election in the table
// has a live leader, naming each: its candidates would fail (exit 5) the
// moment the table is dropped. A table that is not there has none; one
// whose rows this binary cannot read (an older schema version, or a table
// that is not sqlelect's, which Down then refuses with its layout) is left
// to Down.
func refuseLiveLeaders(ctx context.Context, db *sql.DB) error {
	op, err := operator.New(db, election.DefaultTable)
	if err != nil {
		return err
	}
	recs, err := op.List(ctx)
	if errors.Is(err, election.ErrTableMissing) || errors.Is(err, election.ErrSchemaMismatch) {
		return nil
	}
	if err != nil {
		return wrapf(exitError, err, "cannot tell whether an election in %s has a live leader (use --force to drop it anyway)", election.DefaultTable)
	}
	var live []string
	for _, r := range recs {
		if r.Live() {
			live = append(live, fmt.Sprintf("election %q is led by %s (term %d, lease %v left)",
				r.Election, printable(r.ID), r.Term, r.LeaseLeft.Round(time.Millisecond)))
		}
	}
	if len(live) == 0 {
		return nil
	}
	return failf(exitError, "%s: stop their candidates first (they exit 5 once the table is gone), or use --force to drop %s anyway",
		strings.Join(live, "; "), election.DefaultTable)
}

// migrateAction checks migrate's arguments: the action, and N for force.
func migrateAction(args []string) (action string, forceTo int, err error) {
	if len(args) == 0 {
		return "", 0, failf(exitUsage, "missing action: up, down, version, force N, adopt, adopt-end or unadopt (see 'sqlelect migrate --help')")
	}
	action = args[0]
	switch {
	case (action == "up" || action == "down" || action == "version" || action == "adopt" || action == "adopt-end" || action == "unadopt") && len(args) == 1:
	case action == "force" && len(args) == 2:
		forceTo, err = strconv.Atoi(args[1])
		if err != nil || forceTo < -1 {
			return "", 0, failf(exitUsage, "force %q: the version must be an integer, -1 or more", args[1])
		}
		if latest := int(schema.Latest()); forceTo > latest {
			return "", 0, failf(exitUsage, "force %d: this sqlelect knows versions up to %d only (-1 records none)", forceTo, latest)
		}
	default:
		return "", 0, failf(exitUsage, "invalid arguments %q: want up, down, version, force N, adopt, adopt-end or unadopt", args)
	}
	return action, forceTo, nil
}

// openMigrations checks the table and the DSN, and connects (a precise
// exit code when that fails).
func openMigrations(ctx context.Context, co *common) (*sql.DB, error) {
	if err := ident.Table(co.table); err != nil {
		return nil, err
	}
	if co.table != election.DefaultTable {
		return nil, failf(exitUsage, "--table %s: migrate manages the table %s only; for another, copy package schema's DDL(table) into your own migrations",
			co.table, election.DefaultTable)
	}
	cfg, _, err := co.dsnConfig()
	if err != nil {
		return nil, err
	}
	if cfg.DBName == "" {
		return nil, failf(exitUsage, "migrate needs a DSN that names a database (…/DBNAME)")
	}
	return co.connect(ctx, nil)
}

// migrateVersion prints the schema version; a version newer than this
// binary's migrations is exit 8.
func (c *cli) migrateVersion(ctx context.Context, m *schema.Migrator, before uint, dirty bool) error {
	fmt.Fprintf(c.stdout, "schema version %d (latest %d)%s\n", before, schema.Latest(), dirtyNote(before, dirty))
	if lease, ok, err := m.Adoption(ctx); err != nil {
		return migrateError(err)
	} else if ok {
		fmt.Fprintf(c.stdout, "adoption period: rows written without lease_ms get a %v lease (the recipe's timeout + 1s); "+
			"run 'sqlelect migrate adopt-end' once no recipe node runs\n", lease)
	}
	if before > schema.Latest() {
		return failf(exitSchemaNewer, "the schema (version %d) is newer than this binary's migrations (latest %d): "+
			"use the sqlelect that migrated it, or a newer one", before, schema.Latest())
	}
	return nil
}

// unadopt turns the table back into the recipe's, after asking.
func (c *cli) unadopt(ctx context.Context, m *schema.Migrator, before uint, yes bool) error {
	if err := c.confirm(fmt.Sprintf("Really turn %s back into the recipe's table (terms, values and released marks are dropped)?", election.DefaultTable), yes); err != nil {
		return err
	}
	if err := m.Unadopt(ctx); err != nil {
		return migrateError(err)
	}
	fmt.Fprintf(c.stdout, "schema version %d -> none: %s is the recipe's table again (anchor, service_id, last_seen_active); "+
		"its holders keep their last renewal\n", before, election.DefaultTable)
	return nil
}

// migrateStep runs up or down (after asking) and prints the versions.
func (c *cli) migrateStep(ctx context.Context, m *schema.Migrator, action string, before uint, yes bool) error {
	var err error
	if action == "down" {
		if err := c.confirm(fmt.Sprintf("Really drop the table %s and every election in it?", election.DefaultTable), yes); err != nil {
			return err
		}
		err = m.Down(ctx)
	} else {
		err = m.Up(ctx)
	}
	if errors.Is(err, schema.ErrNoChange) {
		fmt.Fprintf(c.stdout, "schema version %d (latest %d): no change\n", before, schema.Latest())
		return nil
	}
	if err != nil {
		return migrateError(err)
	}
	after, dirty, err := m.Version(ctx)
	if err != nil {
		return migrateError(err)
	}
	what := "applied"
	if action == "down" {
		what = "reverted; table " + election.DefaultTable + " dropped"
	}
	fmt.Fprintf(c.stdout, "schema version %d -> %d (latest %d): %s%s\n", before, after, schema.Latest(), what, dirtyNote(after, dirty))
	return nil
}

// exitSchemaNewer: the database records a schema version newer than this
// binary's migrations.
const exitSchemaNewer = 8

// migrateTimeout bounds a migrate command (its connection, migrations and
// statements).
const migrateTimeout = 5 * time.Minute

func (c *cli) adopt(ctx context.Context, m *schema.Migrator, before uint, timeout time.Duration, yes bool) error {
	if err := c.confirm(fmt.Sprintf("Convert the recipe's table %s in place into sqlelect's (reversible with 'migrate unadopt')?", election.DefaultTable), yes); err != nil {
		return err
	}
	holders, err := m.Adopt(ctx, schema.AdoptOptions{RecipeTimeout: timeout})
	if errors.Is(err, schema.ErrNoChange) {
		fmt.Fprintf(c.stdout, "schema version %d (latest %d): no change: %v\n", before, schema.Latest(), err)
		return nil
	}
	if err != nil {
		return migrateError(err)
	}
	fmt.Fprintf(c.stdout, "schema version %d -> %d (latest %d): adopted the recipe's table %s; lease %v (the recipe's timeout + 1s for its whole-second timestamps)\n",
		before, schema.Latest(), schema.Latest(), election.DefaultTable, timeout+time.Second)
	for _, h := range holders {
		state := fmt.Sprintf("live, %v left: it keeps leading while it renews", h.LeaseLeft.Round(time.Millisecond))
		if h.LeaseLeft <= 0 {
			state = "expired: the next candidate takes it"
		}
		fmt.Fprintf(c.stdout, "election %q: holder %s, %s\n", h.Election, h.ID, state)
	}
	fmt.Fprintf(c.stdout, "start sqlelect candidates with the election name above; stop the recipe's nodes, the holder last (docs/adopting.md: \"Moving from the MySQL-table recipe\")\n")
	fmt.Fprintf(c.stdout, "adoption period: rows written without lease_ms get a %v lease; run 'sqlelect migrate adopt-end' once no recipe node runs\n", timeout+time.Second)
	return nil
}

// adoptEnd ends the adoption period.
func (c *cli) adoptEnd(ctx context.Context, m *schema.Migrator) error {
	lease, _, err := m.Adoption(ctx)
	if err != nil {
		return migrateError(err)
	}
	err = m.EndAdoption(ctx)
	if errors.Is(err, schema.ErrNoChange) {
		fmt.Fprintf(c.stdout, "no change: %v\n", err)
		return nil
	}
	if err != nil {
		return migrateError(err)
	}
	fmt.Fprintf(c.stdout, "adoption period ended: rows written without lease_ms get the usual default lease again instead of %v; "+
		"the rows that exist keep theirs\n", lease)
	return nil
}

func dirtyNote(v uint, dirty bool) string {
	if !dirty {
		return ""
	}
	return fmt.Sprintf(", DIRTY: a migration failed half-way; repair the schema, then run 'sqlelect migrate force %d'", v)
}

func migrateError(err error) error {
	var d migrate.ErrDirty
	if errors.As(err, &d) {
		return wrapf(exitError, err, "the schema is dirty at version %d: repair it, then run 'sqlelect migrate force %d'", d.Version, d.Version)
	}
	if errors.Is(err, migrate.ErrLocked) || errors.Is(err, migrate.ErrLockTimeout) {
		return wrapf(exitError, err, "another migration is running")
	}
	if errors.Is(err, schema.ErrSchemaNewer) {
		return wrapf(exitSchemaNewer, err, "")
	}
	var le *schema.LayoutError
	if errors.As(err, &le) || errors.Is(err, schema.ErrUnrecorded) {
		return wrapf(exitTable, err, "")
	}
	return election.Classify(err)
}
