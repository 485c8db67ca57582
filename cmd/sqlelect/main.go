// Command sqlelect operates sqlelect leader elections from the shell and lets
// programs in any language take part in them.
//
//	sqlelect migrate up|down|version|force N|adopt|unadopt
//	sqlelect status [ELECTION] [--json]
//	sqlelect watch ELECTION [--interval 500ms]
//	sqlelect assume ELECTION ID [--yes]
//	sqlelect reelect ELECTION [--yes]
//	sqlelect campaign ELECTION [flags]
//	sqlelect run ELECTION [flags] -- CMD [ARGS...]
//	sqlelect version
//	sqlelect help [COMMAND]
//
// Run `sqlelect help` for the exit codes and `sqlelect COMMAND --help` for a
// command's flags and an example.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4/database"

	"github.com/sqlelect/sqlelect/election"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1 // any other error
	exitUsage       = 2 // usage, invalid name, duration, flag or DSN
	exitConnect     = 3 // cannot connect to the server
	exitAccess      = 4 // access denied
	exitTable       = 5 // the election table is missing or out of date
	exitUnknown     = 6 // no such election
	exitUnsupported = 7 // the backend is not supported on this server
)

// envDSN names the environment variable --dsn defaults to.
const envDSN = "SQLELECT_DSN"

// pingTimeout bounds the connectivity check done before any work.
const pingTimeout = 10 * time.Second

// command is one subcommand.
type command struct {
	name    string
	args    string // synopsis after the name
	summary string // one line for `sqlelect help`
	detail  string // paragraphs for `sqlelect COMMAND --help`
	example string
	run     func(c *cli, cmd *command, args []string) error
}

var commands []*command

func init() {
	commands = []*command{
		migrateCmd, statusCmd, watchCmd, assumeCmd, reelectCmd, campaignCmd, runCmd,
		{name: "version", summary: "print the version of sqlelect", example: "sqlelect version",
			run: (*cli).version},
		{name: "help", args: "[COMMAND]", summary: "print this help, or a command's", example: "sqlelect help campaign",
			run: (*cli).help},
	}
}

func lookup(name string) *command {
	for _, cmd := range commands {
		if cmd.name == name {
			return cmd
		}
	}
	return nil
}

// cli holds the process's streams, so that the commands can be driven by
// tests in the same process too.
type cli struct {
	stdin          *os.File
	stdout, stderr io.Writer
}

func main() {
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(c.main(os.Args[1:]))
}

// main runs the command named by args[0] and returns the exit code.
func (c *cli) main(args []string) int {
	if len(args) == 0 {
		c.usage(c.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	case "-version", "--version":
		name = "version"
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(c.stderr, "sqlelect: unknown command %q; run 'sqlelect help'\n", name)
		return exitUsage
	}
	err := cmd.run(c, cmd, args[1:])
	var st exitStatus
	switch {
	case err == nil, err == errHelp:
		return exitOK
	case errors.As(err, &st):
		return int(st)
	}
	code, msg := describe(err)
	lines := strings.Split(msg, "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = "\t" + strings.TrimLeft(lines[i], " \t")
	}
	fmt.Fprintf(c.stderr, "sqlelect %s: %s\n", cmd.name, strings.Join(lines, "\n"))
	return code
}

// exitErr is an error with an exit code and a message of its own; err, if
// any, is appended to the message.
type exitErr struct {
	code int
	msg  string
	err  error
}

func (e *exitErr) Error() string {
	if e.err == nil {
		return e.msg
	}
	if e.msg == "" {
		return e.err.Error()
	}
	return e.msg + ": " + e.err.Error()
}

func (e *exitErr) Unwrap() error { return e.err }

func failf(code int, format string, args ...any) error {
	return &exitErr{code: code, msg: fmt.Sprintf(format, args...)}
}

func wrapf(code int, err error, format string, args ...any) error {
	return &exitErr{code: code, msg: fmt.Sprintf(format, args...), err: err}
}

// exitStatus is returned by run to exit with the command's own status
// without a message.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// mysqlNumber returns the server error number in err's chain, or 0. It also
// looks through golang-migrate's database.Error, which does not unwrap.
func mysqlNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	var de database.Error
	if errors.As(err, &de) && de.OrigErr != nil {
		return mysqlNumber(de.OrigErr)
	}
	var dp *database.Error
	if errors.As(err, &dp) && dp.OrigErr != nil {
		return mysqlNumber(dp.OrigErr)
	}
	return 0
}

// describe maps an error to an exit code and a message for the operator.
func describe(err error) (int, string) {
	var ee *exitErr
	if errors.As(err, &ee) {
		return ee.code, ee.Error()
	}
	switch n := mysqlNumber(err); {
	case errors.Is(err, election.ErrAccessDenied), n == 1044, n == 1045, n == 1142, n == 1143, n == 1227:
		msg := err.Error()
		if !strings.Contains(strings.ToLower(msg), "access denied") {
			msg = "access denied: " + msg
		}
		return exitAccess, msg +
			"\n\tthe user needs SELECT, INSERT, UPDATE and DELETE on the election table (and CREATE, DROP, ALTER for migrate)"
	case errors.Is(err, election.ErrTableMissing), errors.Is(err, election.ErrSchemaMismatch), n == 1146:
		msg := err.Error()
		if !strings.Contains(msg, "sqlelect migrate up") {
			msg += "\n\tthe election table is missing or out of date: run `sqlelect migrate up`"
		}
		return exitTable, msg
	case errors.Is(err, election.ErrUnsupportedTopology):
		return exitUnsupported, err.Error() + "\n\tthis backend cannot be used on this server; use --backend table"
	case errors.Is(err, election.ErrInvalidConfig), errors.Is(err, election.ErrUnsafeTimeZone):
		return exitUsage, err.Error()
	}
	return exitError, err.Error()
}

// ---- flags ----------------------------------------------------------------

// newFlagSet returns a flag set for cmd that reports errors instead of
// printing them; the command's usage is printed by parse.
func newFlagSet(cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet("sqlelect "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses args with fs after moving flags before positional arguments
// (so that `status NAME --json` works). It prints the usage and returns
// errHelp for -h/--help, and a usage error for bad flags.
func (c *cli) parse(cmd *command, fs *flag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(reorder(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.commandUsage(c.stdout, cmd, fs)
			return nil, errHelp
		}
		msg := strings.Replace(err.Error(), "flag -", "flag --", 1)
		msg = strings.Replace(msg, "not defined: -", "not defined: --", 1)
		return nil, failf(exitUsage, "%s (see 'sqlelect %s --help')", msg, cmd.name)
	}
	return fs.Args(), nil
}

// errHelp ends a command successfully after its usage was printed.
var errHelp = &exitErr{code: exitOK, msg: "help"}

// reorder moves flags (and their values) ahead of positional arguments.
// Everything after "--" stays positional, in order.
func reorder(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' || a[1] >= '0' && a[1] <= '9' { // "-1" is a number
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil || isBool(f) {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return append(append(flags, "--"), pos...)
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// common are the flags of every command that talks to the database.
type common struct {
	dsn   string
	table string
}

func (co *common) register(fs *flag.FlagSet) {
	fs.StringVar(&co.dsn, "dsn", "", "go-sql-driver/mysql `DSN`, e.g. user:pass@tcp(db:3306)/app (default $"+envDSN+")")
	fs.StringVar(&co.table, "table", election.DefaultTable, "election `table`, optionally db.table")
}

// ---- connecting -----------------------------------------------------------

// dsnConfig parses the DSN of co (or $SQLELECT_DSN) and completes it with
// the settings the library needs: the session time zone UTC unless the DSN
// sets one. It returns the config to connect with and the DSN as it may be
// shown (password replaced by ***).
func (co *common) dsnConfig() (*mysql.Config, string, error) {
	dsn := co.dsn
	if dsn == "" {
		dsn = os.Getenv(envDSN)
	}
	if dsn == "" {
		return nil, "", failf(exitUsage, "no database: set --dsn or %s (e.g. user:pass@tcp(127.0.0.1:3306)/app)", envDSN)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The driver's messages never quote the DSN.
		return nil, "", wrapf(exitUsage, err, "invalid DSN")
	}
	if err := election.ValidateTable(co.table); err != nil {
		return nil, "", err
	}
	if cfg.DBName == "" && !strings.Contains(co.table, ".") {
		return nil, "", failf(exitUsage, "the DSN %s names no database: add /DBNAME, or qualify --table as db.table", redact(cfg))
	}
	shown := redact(cfg)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		// The library refuses session time zones with daylight saving time.
		cfg.Params["time_zone"] = "'+00:00'"
	}
	return cfg, shown, nil
}

// redact formats cfg with its password replaced by ***.
func redact(cfg *mysql.Config) string {
	c := cfg.Clone()
	if c.Passwd != "" {
		c.Passwd = "***"
	}
	return c.FormatDSN()
}

// connect opens the database of co and checks, within pingTimeout, that it
// answers. Driver log lines go to log at debug level (nil: discarded).
func (co *common) connect(ctx context.Context, log *slog.Logger) (*sql.DB, error) {
	cfg, shown, err := co.dsnConfig()
	if err != nil {
		return nil, err
	}
	if log != nil {
		cfg.Logger = driverLogger{log}
	} else {
		cfg.Logger = &mysql.NopLogger{}
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, wrapf(exitUsage, err, "invalid DSN %s", shown)
	}
	db := sql.OpenDB(conn)
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, connectError(err, shown)
	}
	return db, nil
}

// connectError classifies a failed ping.
func connectError(err error, shown string) error {
	switch mysqlNumber(err) {
	case 1044, 1045:
		return wrapf(exitAccess, err, "access denied connecting to %s", shown)
	case 1049:
		return wrapf(exitConnect, err, "cannot connect to %s: the database does not exist", shown)
	case 1298: // ER_UNKNOWN_TIME_ZONE
		return wrapf(exitUsage, err, "the DSN %s sets a time_zone the server does not know; "+
			"leave time_zone out (sqlelect then uses '+00:00')", shown)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v", pingTimeout)
	}
	return wrapf(exitConnect, err, "cannot connect to %s", shown)
}

// driverLogger sends the driver's log lines to slog at debug level.
type driverLogger struct{ log *slog.Logger }

func (d driverLogger) Print(v ...any) {
	d.log.Debug("mysql driver: " + strings.TrimSpace(fmt.Sprint(v...)))
}

// ---- confirmation ---------------------------------------------------------

// confirm asks question on a terminal unless yes; without a terminal it
// refuses unless yes.
func (c *cli) confirm(question string, yes bool) error {
	if yes {
		return nil
	}
	if !isTerminal(c.stdin) {
		return failf(exitUsage, "stdin is not a terminal: use --yes to confirm")
	}
	fmt.Fprintf(c.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(c.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return failf(exitError, "not confirmed; nothing done")
}

// ---- help and version -----------------------------------------------------

const exitCodesHelp = `Exit codes:
  0  success (for run: CMD's own status when it exits by itself, see 'sqlelect run --help')
  1  any other error
  2  usage error: unknown command or flag, invalid election name, ID, duration or DSN,
     missing --dsn, an unsafe time_zone in the DSN, or --yes needed
  3  cannot connect to the server (or the database does not exist)
  4  access denied (server error 1044, 1045, 1142, 1143, 1227)
  5  the election table is missing or out of date: run 'sqlelect migrate up'
     (migrate: a table that is not sqlelect's; the message says what to do)
  6  unknown election (status, watch, assume, reelect on an election with no row)
  7  the backend is not supported on this server (e.g. --backend lock on Galera)
  8  migrate: the database's schema is newer than this binary's migrations
`

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, `sqlelect operates leader elections kept in a MySQL/MariaDB table.

Usage:
  sqlelect COMMAND [ARGS] [FLAGS]

Commands:
`)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, `
Every command that talks to the database takes --dsn (default $%s), a
go-sql-driver/mysql DSN such as 'app:secret@tcp(db:3306)/app', and --table
(default %s). The session time zone is set to '+00:00' unless the DSN sets
time_zone; parseTime is not needed. Passwords are never printed.
Durations are in Go syntax: 500ms, 2s, 1m30s. Flags may follow arguments.

%s
Run 'sqlelect COMMAND --help' for a command's flags and an example.

Example:
  export SQLELECT_DSN='app:secret@tcp(db:3306)/app'
  sqlelect migrate up && sqlelect status
`, envDSN, election.DefaultTable, exitCodesHelp)
}

func (c *cli) commandUsage(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: sqlelect %s %s\n\n%s\n", cmd.name, cmd.args, cmd.summary)
	if cmd.detail != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(cmd.detail, "\n"))
	}
	if fs != nil {
		var n int
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(w, "\nFlags:\n")
			printFlags(w, fs)
		}
	}
	fmt.Fprintf(w, "\nExample:\n")
	for _, l := range strings.Split(strings.TrimRight(cmd.example, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
}

func (c *cli) help(_ *command, args []string) error {
	if len(args) == 0 {
		c.usage(c.stdout)
		return nil
	}
	if len(args) == 1 && args[0] != "help" && lookup(args[0]) != nil {
		// Let the command print its own usage, with its flags.
		cmd := lookup(args[0])
		return cmd.run(c, cmd, []string{"--help"})
	}
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		c.usage(c.stdout)
		return nil
	}
	return failf(exitUsage, "unknown command %q; run 'sqlelect help'", strings.Join(args, " "))
}

func (c *cli) version(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	if _, err := c.parse(cmd, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return failf(exitUsage, "version takes no arguments")
	}
	fmt.Fprintln(c.stdout, "sqlelect", buildVersion(), "("+runtime.Version()+")")
	return nil
}

// buildVersion is the module version, or devel for a build from a checkout
// (with the VCS revision when Go recorded it).
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		return "devel-" + rev + dirty
	}
	return "devel"
}

// printFlags is flag.PrintDefaults with GNU-style double dashes.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" && !strings.Contains(usage, "(default") {
			if _, ok := f.Value.(*durationValue); ok {
				line += fmt.Sprintf(" (default %s)", f.DefValue)
			} else {
				line += fmt.Sprintf(" (default %q)", f.DefValue)
			}
		}
		fmt.Fprintln(w, line)
	})
}

// durationValue is a flag.Value for a Go duration with a clearer error.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a Go duration such as 500ms, 10s or 1m30s")
	}
	*d = durationValue(v)
	return nil
}

// durationFlag defines a duration flag with that error message.
func durationFlag(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}
