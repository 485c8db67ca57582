// Package groupconn connects database/sql to the writable member of a MySQL
// Group Replication group with go-sql-driver/mysql, which dials one
// address: the tests and the chaos suite's candidates follow the primary
// through it, as an application would without MySQL Router.
package groupconn

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// Connector is a database/sql driver.Connector for a Group Replication
// group in single-primary mode, built with go-sql-driver/mysql alone: the
// driver connects to one address, so the connector dials the members in
// turn (the last good one first) and keeps the first that accepts writes
// (@@global.super_read_only = 0: the primary; in multi-primary mode any
// ONLINE member). A connection whose statement the server refuses because
// its member turned read-only or left the group (errors 1290 and 3100:
// after a switchover, or when it was expelled) is discarded instead of
// going back to the pool, so that the next statement finds the new
// primary. Connections to a member that died fail by themselves.
//
// Open a pool with sql.OpenDB(c). MySQL Router's read-write port does the
// same job outside the process. Connector is safe for concurrent use.
type Connector struct {
	members []driver.Connector
	last    atomic.Int32
}

// New returns a Connector for the members cfgs (one go-sql-driver
// configuration each, in the order they are tried first).
func New(cfgs []*mysql.Config) (*Connector, error) {
	c := &Connector{}
	for _, cfg := range cfgs {
		mc, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		c.members = append(c.members, mc)
	}
	return c, nil
}

// Driver returns go-sql-driver/mysql's driver.
func (c *Connector) Driver() driver.Driver { return &mysql.MySQLDriver{} }

// Connect returns a connection to the first member, the last writable one
// first, whose @@global.super_read_only is 0; it fails when none is.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	first := int(c.last.Load())
	var errs []error
	for k := range c.members {
		i := (first + k) % len(c.members)
		conn, err := c.members[i].Connect(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ro, err := superReadOnly(ctx, conn)
		if err == nil && !ro {
			c.last.Store(int32(i))
			return &memberConn{Conn: conn}, nil
		}
		if err == nil {
			err = fmt.Errorf("member %d is read-only", i+1)
		}
		errs = append(errs, err)
		_ = conn.Close()
	}
	return nil, fmt.Errorf("groupconn: no writable member: %w", errors.Join(errs...))
}

// superReadOnly reads @@global.super_read_only on a fresh connection.
func superReadOnly(ctx context.Context, conn driver.Conn) (bool, error) {
	rows, err := conn.(driver.QueryerContext).QueryContext(ctx, "SELECT @@global.super_read_only", nil)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		return false, err
	}
	return fmt.Sprint(v[0]) != "0", nil
}

// memberConn is a connection of Connector: it forwards to the driver's
// connection and remembers a refusal that means "not the writable member".
type memberConn struct {
	driver.Conn
	wrong atomic.Bool
}

// notWritable reports whether err says the member does not take writes.
func notWritable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1290 || me.Number == 3100)
}

func (c *memberConn) note(err error) error {
	if notWritable(err) {
		c.wrong.Store(true)
	}
	return err
}

func (c *memberConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
	return r, c.note(err)
}

func (c *memberConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
	return r, c.note(err)
}

func (c *memberConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	s, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, c.note(err)
	}
	return &memberStmt{Stmt: s, c: c}, nil
}

func (c *memberConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, c.note(err)
	}
	return &memberTx{Tx: tx, c: c}, nil
}

func (c *memberConn) Ping(ctx context.Context) error { return c.note(c.Conn.(driver.Pinger).Ping(ctx)) }

func (c *memberConn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

// ResetSession and IsValid make database/sql discard the connection.
func (c *memberConn) ResetSession(ctx context.Context) error {
	if c.wrong.Load() {
		return driver.ErrBadConn
	}
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *memberConn) IsValid() bool { return !c.wrong.Load() && c.Conn.(driver.Validator).IsValid() }

type memberStmt struct {
	driver.Stmt
	c *memberConn
}

func (s *memberStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	return r, s.c.note(err)
}

func (s *memberStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	return r, s.c.note(err)
}

type memberTx struct {
	driver.Tx
	c *memberConn
}

func (t *memberTx) Commit() error { return t.c.note(t.Tx.Commit()) }

// ParseDSNs returns the configurations of a list of DSNs separated by
// semicolons (one per member), as the chaos suite's candidate takes them.
func ParseDSNs(list string) ([]*mysql.Config, error) {
	var out []*mysql.Config
	for _, dsn := range strings.Split(list, ";") {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("groupconn: %w", err)
		}
		out = append(out, cfg)
	}
	return out, nil
}
