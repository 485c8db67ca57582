// Command sqlelect operates sqlelect leader elections from the shell and lets
// programs in any language take part in them.
//
//	sqlelect migrate up|down|version|force N|adopt|adopt-end|unadopt
//	sqlelect status [ELECTION] [--json]
//	sqlelect members ELECTION [--json]
//	sqlelect watch ELECTION [--interval 500ms] [--json]
//	sqlelect transfer ELECTION ID [--wait D] [--yes]
//	sqlelect assume ELECTION ID [--yes]
//	sqlelect reelect ELECTION [--graceful [--wait D]] [--yes]
//	sqlelect campaign ELECTION [flags]
//	sqlelect run ELECTION [flags] -- CMD [ARGS...]
//	sqlelect doctor [--backend table|lock] [--json]
//	sqlelect ui [--listen 127.0.0.1:8080]
//	sqlelect completion bash|zsh|fish
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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/members"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1   // any other error
	exitUsage       = 2   // usage, invalid name, duration, flag or DSN
	exitConnect     = 3   // cannot connect to the server
	exitAccess      = 4   // access denied
	exitTable       = 5   // the election table is missing or out of date
	exitUnknown     = 6   // no such election
	exitUnsupported = 7   // the backend is not supported on this server
	exitDuplicate   = 10  // campaign, run: another live process runs with this --id
	exitInterrupt   = 128 // plus the signal's number: interrupted before anything was done
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
	json    bool // has --json: errors are reported on stdout as JSON too
	run     func(c *cli, cmd *command, args []string) error
}

// commands returns the command table, in the order of `sqlelect help`.
func commands() []*command {
	return []*command{
		migrateCmd, statusCmd, membersCmd, historyCmd, watchCmd, transferCmd, assumeCmd, reelectCmd, campaignCmd, runCmd, shardsCmd, doctorCmd, uiCmd, completionCmd,
		{name: "version", summary: "print the version of sqlelect", example: "sqlelect version",
			run: (*cli).version},
		{name: "help", args: "[COMMAND]", summary: "print this help, or a command's", example: "sqlelect help campaign",
			run: (*cli).help},
	}
}

// cli holds the process's streams and the command table, so that the
// commands can be driven by tests in the same process too.
type cli struct {
	stdin          *os.File
	stdout, stderr io.Writer
	commands       []*command
	// flagSet, when set, is given each command's flag set at parse instead
	// of parsing it (the command then ends with errHelp): completion
	// learns the flags this way.
	flagSet func(*pflag.FlagSet)
}

func main() {
	c := &cli{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, commands: commands()}
	os.Exit(c.main(os.Args[1:]))
}

func (c *cli) lookup(name string) *command {
	for _, cmd := range c.commands {
		if cmd.name == name {
			return cmd
		}
	}
	return nil
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
	cmd := c.lookup(name)
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
	if cmd.json && wantsJSON(args[1:]) {
		// A script that reads stdout learns of the error too.
		for i := range lines {
			lines[i] = strings.TrimLeft(lines[i], "\t")
		}
		_ = json.NewEncoder(c.stdout).Encode(jsonError{Command: cmd.name, Error: strings.Join(lines, "\n"), ExitCode: code})
	}
	return code
}

// jsonError is how a command given --json reports an error on stdout (as
// well as on stderr): one object on a line of its own.
type jsonError struct {
	Command  string `json:"command"`
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// wantsJSON reports whether args ask for JSON output (--json before any
// "--"), read without the command's flag set: parsing may be what failed.
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
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

// describe maps an error to an exit code and a message for the operator:
// the library's sentinels first (errors.Is), then the CLI's own exit codes.
func describe(err error) (int, string) {
	msg := err.Error()
	is := func(target error) bool { return errors.Is(err, target) }
	switch {
	case is(election.ErrAccessDenied):
		if n := mysqlerr.Errno(err); n == mysqlerr.AccessDenied || n == mysqlerr.AccessDeniedNoPass {
			// Refused at login: not a privilege, the credentials.
			return exitAccess, msg + "\n\tthe server refused the user or its password: check the DSN's user:password, " +
				"and that the user may log in from this host (its 'user'@'host' account)"
		}
		return exitAccess, msg +
			"\n\tthe user needs SELECT, INSERT, UPDATE and DELETE on the election table and its _members table (and CREATE, DROP, ALTER for migrate)"
	case is(election.ErrTableMissing), is(election.ErrSchemaMismatch):
		if !strings.Contains(msg, "sqlelect migrate up") {
			msg += "\n\tthe election table is missing or out of date: run `sqlelect migrate up`"
		}
		return exitTable, msg
	case is(election.ErrNoSuchElection):
		return exitUnknown, msg
	case is(members.ErrDuplicateID):
		return exitDuplicate, msg + "\n\tanother live process runs with this --id: stop it first, or wait for its lease to run out " +
			"if it was killed (see 'sqlelect members')"
	case is(election.ErrUnsafeServer):
		return exitUnsafe, msg
	case is(election.ErrUnsupportedTopology):
		return exitUnsupported, msg + "\n\tthis backend cannot be used on this server; use --backend table"
	case is(election.ErrUnknownDatabase):
		return exitConnect, msg + "\n\tthe database does not exist: create it (CREATE DATABASE), or name an existing one " +
			"in the DSN (…/DBNAME) or in --table (db.table)"
	case is(election.ErrUnknownTimeZone):
		return exitUsage, msg + "\n\tleave time_zone out of the DSN (sqlelect then uses '+00:00'), or load the server's time zone tables"
	case is(election.ErrInvalidConfig), is(election.ErrUnsafeTimeZone):
		return exitUsage, msg
	}
	var ee *exitErr
	if errors.As(err, &ee) {
		return ee.code, msg
	}
	return exitError, msg
}

// ---- flags ----------------------------------------------------------------

// newFlagSet returns a GNU-style flag set for cmd (flags may follow
// arguments; "--" ends them) that reports errors instead of printing them.
func newFlagSet(cmd *command) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sqlelect "+cmd.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	return fs
}

// negativeNumber is an argument such as "-1" (migrate force -1), which is
// positional, not a flag.
var negativeNumber = regexp.MustCompile(`^-[0-9]+$`)

// parse parses args with fs and returns the positional arguments. It prints
// the usage and returns errHelp for -h/--help, and a usage error for bad
// flags.
func (c *cli) parse(cmd *command, fs *pflag.FlagSet, args []string) ([]string, error) {
	if c.flagSet != nil {
		c.flagSet(fs)
		return nil, errHelp
	}
	// A negative number that is not a flag's value is positional: hide it
	// from pflag, which would take it for a shorthand flag.
	const hide = "\x00"
	args = append([]string(nil), args...)
	for i, a := range args {
		if a == "--" {
			break
		}
		if negativeNumber.MatchString(a) && !(i > 0 && takesValue(fs, args[i-1])) {
			args[i] = hide + a
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			c.commandUsage(c.stdout, cmd, fs)
			return nil, errHelp
		}
		var bad *pflag.InvalidValueError
		var unknown *pflag.NotExistError
		switch {
		case errors.As(err, &bad) && bad.GetFlag().Value.Type() == "duration":
			err = fmt.Errorf("--%s %q: want a Go duration such as 500ms, 10s or 1m30s", bad.GetFlag().Name, bad.GetValue())
		case errors.As(err, &unknown) && unknown.GetSpecifiedShortnames() != "":
			err = fmt.Errorf("%w: flags take two dashes, and an argument that starts with - goes after --", err)
		}
		return nil, failf(exitUsage, "%v (see 'sqlelect %s --help')", err, cmd.name)
	}
	pos := fs.Args()
	for i, a := range pos {
		pos[i] = strings.TrimPrefix(a, hide)
	}
	return pos, nil
}

// takesValue reports whether arg is a long flag of fs that takes the next
// argument as its value.
func takesValue(fs *pflag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "--")
	f := fs.Lookup(name)
	return ok && f != nil && f.NoOptDefVal == ""
}

// errHelp ends a command successfully after its usage was printed.
var errHelp = &exitErr{code: exitOK, msg: "help"}

// common are the flags of every command that talks to the database.
type common struct {
	dsn   string
	table string
	// dsnGiven reports whether --dsn was given (pflag's Changed): an empty
	// --dsn is a mistake (an unset shell variable), not a request for
	// $SQLELECT_DSN.
	dsnGiven func() bool
}

func (co *common) register(fs *pflag.FlagSet) {
	fs.StringVar(&co.dsn, "dsn", "", "go-sql-driver/mysql `DSN`, e.g. user:pass@tcp(db:3306)/app (default $"+envDSN+")")
	fs.StringVar(&co.table, "table", election.DefaultTable, "election `table`, optionally db.table")
	co.dsnGiven = func() bool { return fs.Changed("dsn") }
}

// ---- connecting -----------------------------------------------------------

// dsnConfig parses the DSN of co (or $SQLELECT_DSN) and completes it with
// the settings the library needs: the session time zone UTC unless the DSN
// sets one. It returns the config to connect with and the DSN as it may be
// shown (password replaced by ***).
func (co *common) dsnConfig() (*mysql.Config, string, error) {
	dsn := co.dsn
	if dsn == "" && co.dsnGiven != nil && co.dsnGiven() {
		return nil, "", failf(exitUsage, "--dsn is empty: give a DSN, or leave the flag out for $%s", envDSN)
	}
	if dsn == "" {
		dsn = os.Getenv(envDSN)
	}
	if dsn == "" {
		return nil, "", failf(exitUsage, "no database: set --dsn or %s (e.g. user:pass@tcp(127.0.0.1:3306)/app)", envDSN)
	}
	if err := checkURL(dsn); err != nil {
		return nil, "", err
	}
	if err := checkTimeZone(dsn); err != nil {
		return nil, "", err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, "", dsnError(dsn, err)
	}
	if err := checkJDBCParams(cfg); err != nil {
		return nil, "", err
	}
	if err := ident.Table(co.table); err != nil {
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

// dsnURL matches a URL (mysql://user:pass@host:port/db?params), the form
// golang-migrate's CLI and many other tools take, which the driver parses
// as a user named after the scheme.
var dsnURL = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*://`)

// dsnForm is how a DSN is written, for error messages.
const dsnForm = "user:pass@tcp(host:3306)/db?param=value"

// checkURL refuses a DSN written as a URL (mysql://…), the form
// golang-migrate's CLI and many other tools take: the driver would take the
// scheme for the user name ("Access denied for user 'mysql'"). The error
// shows the DSN to pass instead, password hidden.
func checkURL(dsn string) error {
	if !dsnURL.MatchString(dsn) {
		return nil
	}
	scheme, rest, _ := strings.Cut(dsn, "://")
	hint := ""
	if strings.Contains(rest, "@tcp(") || strings.Contains(rest, "@unix(") {
		hint = rest // golang-migrate's form: mysql:// then a DSN
	} else if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		hint = fmt.Sprintf("%s@tcp(%s)%s", u.User.String(), u.Host, u.Path)
		if u.RawQuery != "" {
			hint += "?" + u.RawQuery
		}
	}
	if cfg, err := mysql.ParseDSN(hint); hint != "" && err == nil {
		return failf(exitUsage, "the DSN is a URL (%s://…); sqlelect takes a go-sql-driver/mysql DSN, %s: here %s", scheme, dsnForm, redact(cfg))
	}
	return failf(exitUsage, "the DSN is a URL (%s://…); sqlelect takes a go-sql-driver/mysql DSN, %s", scheme, dsnForm)
}

// dsnError explains why a DSN does not parse (a usage error): the driver's
// messages name neither the DSN's form nor the parameter at fault.
func dsnError(dsn string, err error) error {
	if strings.Contains(err.Error(), "default addr for network") {
		return failf(exitUsage, "the DSN's address must be written as tcp(host:port) (or unix(/path/to/socket)): %s (%v)", dsnForm, err)
	}
	if strings.Contains(err.Error(), "duration") {
		if i := strings.IndexByte(dsn, '?'); i >= 0 {
			for _, kv := range strings.Split(dsn[i+1:], "&") {
				k, v, _ := strings.Cut(kv, "=")
				if _, derr := time.ParseDuration(v); derr != nil && strings.HasSuffix(strings.ToLower(k), "timeout") {
					return failf(exitUsage, "the DSN's %s=%s is not a duration: write it as 5s or 500ms", k, v)
				}
			}
		}
	}
	// The driver's messages start with "invalid DSN" and never quote it.
	return &exitErr{code: exitUsage, err: err}
}

// jdbcParams are JDBC connection options that users carry over from Java.
// go-sql-driver/mysql sends DSN parameters it does not know as session
// variables, so the server refuses each with error 1193 at every connect.
var jdbcParams = map[string]string{
	"allowPublicKeyRetrieval": "not needed: the driver asks for the server's RSA key itself (caching_sha2_password over TCP works without TLS)",
	"useSSL":                  "use tls=true, tls=skip-verify or tls=preferred",
	"sslMode":                 "use tls=true, tls=skip-verify or tls=preferred",
	"serverTimezone":          "use loc=UTC (how times are read) and time_zone='+00:00' (the session's)",
	"characterEncoding":       "use charset=utf8mb4",
	"autoReconnect":           "not needed: database/sql replaces broken connections",
}

// checkJDBCParams refuses JDBC options in a DSN with the driver's way to
// say the same thing (a usage error).
func checkJDBCParams(cfg *mysql.Config) error {
	for name := range cfg.Params {
		for jdbc, instead := range jdbcParams {
			if strings.EqualFold(name, jdbc) {
				return failf(exitUsage, "DSN parameter %s is a JDBC option, which go-sql-driver/mysql would send as a session variable "+
					"(the server refuses it: error 1193): remove it; %s", name, instead)
			}
		}
	}
	return nil
}

// dsnTimeZone finds the time_zone parameter of a DSN.
var dsnTimeZone = regexp.MustCompile(`[?&]time_zone=([^&]*)`)

// checkTimeZone refuses a time_zone DSN parameter that is not a quoted SQL
// string (or a bare word such as SYSTEM): the driver sends it as it is, so
// SET time_zone=Europe/Berlin fails, and an unescaped / breaks the DSN. The
// error shows the parameter as it should be written.
func checkTimeZone(dsn string) error {
	m := dsnTimeZone.FindAllStringSubmatch(dsn, -1)
	if m == nil {
		return nil
	}
	raw := m[len(m)-1][1]
	v, err := url.PathUnescape(raw)
	if err != nil {
		v = raw
	}
	if strings.HasPrefix(v, "'") || regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(v) {
		return nil
	}
	return failf(exitUsage, "the DSN's time_zone=%s is not a quoted SQL string: quote it, as time_zone=%s",
		raw, url.QueryEscape("'"+v+"'"))
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
		cfg.Logger = useDriverLogger(log)
	} else {
		cfg.Logger = &mysql.NopLogger{}
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, wrapf(exitUsage, err, "the DSN %s", shown)
	}
	db := sql.OpenDB(conn)
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, connectError(err, shown)
	}
	if err := co.checkTableDatabase(pctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// checkTableDatabase checks that the database of a qualified --table
// (db.table) exists: the server says "table doesn't exist" (error 1146)
// for a table in an unknown database, which would read as "run migrate
// up". A database the user may not see (error 1044), or any other error,
// is left to the statements that follow, which report it as before.
func (co *common) checkTableDatabase(ctx context.Context, db *sql.DB) error {
	schema, table, ok := strings.Cut(co.table, ".")
	if !ok {
		return nil
	}
	// Both names are identifiers ([A-Za-z_][A-Za-z0-9_$]*, checked by
	// dsnConfig): safe to quote as they are.
	rows, err := db.QueryContext(ctx, "SHOW TABLES FROM `"+schema+"` LIKE '"+table+"'")
	if err != nil {
		if err = election.Classify(err); errors.Is(err, election.ErrUnknownDatabase) {
			return wrapf(exitConnect, err, "--table %s", co.table)
		}
		return nil
	}
	rows.Close()
	return nil
}

// connectError explains a failed ping: exit code 3 unless the library
// names its cause (access denied, an unknown time zone).
func connectError(err error, shown string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v", pingTimeout)
	}
	if mysqlerr.Errno(err) == mysqlerr.UnknownSystemVariable {
		// The driver sends DSN parameters it does not know as SET name=value.
		return wrapf(exitUsage, err, "the DSN %s has a parameter that is neither a go-sql-driver/mysql option nor a server variable", shown)
	}
	return wrapf(exitConnect, election.Classify(err), "cannot connect to %s", shown)
}

// driverLogger sends the driver's log lines to slog at debug level.
type driverLogger struct{ log *slog.Logger }

// useDriverLogger makes log the driver's default logger too (mysql.SetLogger),
// so that every line the driver prints, on any connection, comes out in the
// CLI's log format rather than as plain "[mysql] …" text; it returns the
// logger for a config.
func useDriverLogger(log *slog.Logger) mysql.Logger {
	l := driverLogger{log}
	_ = mysql.SetLogger(l) // fails only for a nil logger
	return l
}

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
	if !term.IsTerminal(int(c.stdin.Fd())) {
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

// ---- signals --------------------------------------------------------------

// interrupted is the cause of a context that a signal ended.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return i.sig.String() + " received" }

// signalContext returns a context that SIGINT or SIGTERM cancels with an
// interrupted cause; stop releases the signals and the goroutine.
func signalContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			cancel(interrupted{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// interruptStatus is the exit status of a command that a signal stopped
// before it did anything, as a shell reports it: 128+N (130 for SIGINT).
func interruptStatus(ctx context.Context) error {
	var i interrupted
	if errors.As(context.Cause(ctx), &i) {
		return exitStatus(exitInterrupt + int(i.sig))
	}
	return exitStatus(exitInterrupt + int(syscall.SIGINT))
}

// ---- help and version -----------------------------------------------------

const exitCodesHelp = `Exit codes:
  0  success (for run: CMD's own status when it exits by itself, see 'sqlelect run --help')
  1  any other error
  2  usage error: unknown command or flag, invalid election name, ID, duration, address
     or DSN, missing --dsn, an unsafe or unknown time_zone in the DSN, or --yes needed
  3  cannot connect to the server (or the database does not exist)
  4  access denied: a wrong user or password, or a missing privilege
  5  the election table (or its members table) is missing or out of date: run 'sqlelect migrate up'
     (migrate: a table that is not sqlelect's; the message says what to do)
  6  unknown election (status, watch, assume, reelect on an election with no row)
  7  the backend is not supported on this server (e.g. --backend lock on Galera)
  8  migrate: the database's schema is newer than this binary's migrations
  9  the server breaks a promise the backend relies on: doctor found the chosen backend
     unsafe (the report says why), or campaign/run's preflight found wrong affected rows
  10  campaign, run: another live process runs with this --id (the message names its host
      and start time; see 'sqlelect members')
  130  interrupted (SIGINT; 143 for SIGTERM) before anything was done
`

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, `sqlelect operates leader elections kept in a MySQL/MariaDB table.

Usage:
  sqlelect COMMAND [ARGS] [FLAGS]

Commands:
`)
	for _, cmd := range c.commands {
		fmt.Fprintf(w, "  %-9s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, `
Every command that talks to the database takes --dsn (default $%s), a
go-sql-driver/mysql DSN such as 'app:secret@tcp(db:3306)/app', and --table
(default %s). The session time zone is set to '+00:00' unless the DSN sets
time_zone (quoted: time_zone=%%27%%2B01%%3A00%%27); parseTime is not needed.
Passwords are never printed. Durations are in Go syntax: 500ms, 2s, 1m30s.
Flags may follow arguments; arguments that start with - go after --.
Commands given --json report an error on stdout too, as one JSON object:
{"command":"status","error":MESSAGE,"exit_code":N}.

%s
Run 'sqlelect COMMAND --help' for a command's flags and an example.

Example:
  export SQLELECT_DSN='app:secret@tcp(db:3306)/app'
  sqlelect migrate up && sqlelect status
`, envDSN, election.DefaultTable, exitCodesHelp)
}

func (c *cli) commandUsage(w io.Writer, cmd *command, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: sqlelect %s %s\n\n%s\n", cmd.name, cmd.args, cmd.summary)
	if cmd.detail != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(cmd.detail, "\n"))
	}
	if fs.HasFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsagesWrapped(100))
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
	if len(args) == 1 && args[0] != "help" && c.lookup(args[0]) != nil {
		// Let the command print its own usage, with its flags.
		cmd := c.lookup(args[0])
		return cmd.run(c, cmd, []string{"--help"})
	}
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		c.usage(c.stdout)
		return nil
	}
	return failf(exitUsage, "unknown command %q; run 'sqlelect help'", strings.Join(args, " "))
}

func (c *cli) version(cmd *command, args []string) error {
	args, err := c.parse(cmd, newFlagSet(cmd), args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return failf(exitUsage, "version takes no arguments")
	}
	fmt.Fprintln(c.stdout, "sqlelect", buildVersion(), "("+runtime.Version()+")")
	return nil
}

// release is the version of this source tree: the CHANGELOG's newest
// release (a test checks that they agree).
const release = "v0.1.0"

func buildVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(bi)
}

// releaseVersion matches a release's tag (v1.2.3, v1.2.3-rc.1); a Go
// pseudo-version (a build between tags) ends in a 14-digit time and a
// 12-digit revision, which pseudoVersion matches.
var (
	releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)
	pseudoVersion  = regexp.MustCompile(`[-.][0-9]{14}-([0-9a-f]{12})(\+dirty)?$`)
)

// versionOf is the version sqlelect reports for a binary built as bi
// describes: the tag when it was built at a release (go install …@v0.1.0,
// or make build in a clean checkout of the tag), else the CHANGELOG's
// latest release with -devel and the revision, v0.1.0-devel+18321b7bdbf5
// (".dirty" after it for a checkout with changes), the same under make
// build (the revision from the checkout) and go install …@COMMIT (from the
// pseudo-version). Without either, v0.1.0-devel.
func versionOf(bi *debug.BuildInfo) string {
	if bi == nil {
		return release + "-devel"
	}
	v := bi.Main.Version
	if releaseVersion.MatchString(v) && !pseudoVersion.MatchString(v) {
		return v
	}
	var rev string
	dirty := strings.HasSuffix(v, "+dirty")
	if m := pseudoVersion.FindStringSubmatch(v); m != nil {
		rev = m[1]
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = true
		}
	}
	out := release + "-devel"
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		out += "+" + rev
		if dirty {
			out += ".dirty"
		}
	}
	return out
}
