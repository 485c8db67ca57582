package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// errNumbers is a slog.Handler that counts the MySQL error numbers of the
// failed heartbeats the library logs ("follow failed" and "renewal
// failed", at debug level, attribute err; "other" when not a MySQL error),
// with 1180 "Got error 149" (a transaction a remote write set aborted) as
// "1180/149", and passes every record its inner handler wants on to it.
// Each failed heartbeat is counted in sqlelect_heartbeat_errors_total
// before it is logged, and logged at most once: the suite checks that the
// certification conflicts among these numbers are counted as kind
// deadlock (chaos.Result.ErrNumbers).
type errNumbers struct {
	inner slog.Handler
	c     *numberCounts
}

type numberCounts struct {
	mu sync.Mutex
	n  map[string]float64
}

// snapshot returns the counts so far.
func (c *numberCounts) snapshot() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]float64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func (h errNumbers) Enabled(context.Context, slog.Level) bool { return true }

func (h errNumbers) WithAttrs(as []slog.Attr) slog.Handler {
	return errNumbers{inner: h.inner.WithAttrs(as), c: h.c}
}

func (h errNumbers) WithGroup(name string) slog.Handler {
	return errNumbers{inner: h.inner.WithGroup(name), c: h.c}
}

func (h errNumbers) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "follow failed" || r.Message == "renewal failed" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "err" {
				return true
			}
			key := "other"
			var me *mysql.MySQLError
			if err, ok := a.Value.Any().(error); ok && errors.As(err, &me) {
				key = fmt.Sprint(me.Number)
				if me.Number == 1180 && strings.HasPrefix(me.Message, "Got error 149 ") {
					key = "1180/149"
				}
			}
			h.c.mu.Lock()
			h.c.n[key]++
			h.c.mu.Unlock()
			return false
		})
	}
	if !h.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}
