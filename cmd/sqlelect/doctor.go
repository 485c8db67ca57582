package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqlelect/sqlelect/doctor"
	"github.com/sqlelect/sqlelect/election"
)

// exitUnsafe is doctor's exit code when the chosen backend is not safe on
// the server.
const exitUnsafe = 9

// doctorTimeout bounds a whole doctor run (each statement is bounded by
// the query timeout).
const doctorTimeout = 2 * time.Minute

var doctorCmd = &command{
	name:    "doctor",
	args:    "[--backend table|lock] [--json]",
	summary: "check that the server keeps the promises the election relies on",
	detail: `Checks, on the server and table of the DSN, every property a backend relies
on, each pass, warn or fail with the consequence and the fix: the privileges;
read_only, super_read_only or a replica; the topology (Galera, Group
Replication); a session time zone without daylight saving time; the
heartbeat's affected rows (1, 2 and 0, or 1 under clientFoundRows); REPLACE;
NOW(6) (microseconds, never going back, one clock for two connections);
GET_LOCK with zero and fractional timeouts; IS_USED_LOCK; the release of a
lock when its session ends; SKIP LOCKED (for a Batcher); the statement
bounds; wait_timeout against the lease; the round trip against the renew
deadline.

It works in a scratch election (sqlelect-doctor-HEX) whose rows it deletes
afterwards, and takes about four seconds. A fail on a property only the
other backend relies on shows as a warning. Run it before trusting a server
that is not in the table of docs/servers.md, "Supported servers" (a
proxy, a fork, a managed service).

--json prints one object: server, backend, safe, unsafe_for (the backends
that are not safe here) and findings (property, status for the chosen
backend, backends, detail, consequence, fix).

Exit code 0 when the chosen backend is safe on the server, 9 when it is not.`,
	example: `sqlelect doctor
sqlelect doctor --backend lock --json`,
	json: true,
	run:  (*cli).doctor,
}

func (c *cli) doctor(cmd *command, args []string) error {
	var co common
	var backend string
	var asJSON bool
	var lease time.Duration
	fs := newFlagSet(cmd)
	co.register(fs)
	fs.StringVar(&backend, "backend", doctor.BackendTable, "`backend` to judge the server for: table or lock")
	fs.DurationVar(&lease, "lease", 0, "the candidates' --lease, which wait_timeout and the round trip are judged against (default 15s)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	args, err := c.parse(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return failf(exitUsage, "doctor takes no arguments")
	}
	if backend != doctor.BackendTable && backend != doctor.BackendLock {
		return failf(exitUsage, "--backend %q: want table or lock", backend)
	}
	// Check names its own scratch election; any valid name validates the rest.
	cfg := election.Config{Name: "doctor", Table: co.table, LeaseDuration: lease}
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, stop := signalContext(context.Background())
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	db, err := co.connect(ctx, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := doctor.Check(ctx, db, cfg)
	if err != nil {
		var i interrupted
		if errors.As(context.Cause(ctx), &i) {
			return interruptStatus(ctx)
		}
		return err
	}
	if asJSON {
		err = printDoctorJSON(c.stdout, r, backend)
	} else {
		printDoctor(c.stdout, r, backend)
	}
	if err != nil {
		return err
	}
	if !r.Safe(backend) {
		return exitStatus(exitUnsafe)
	}
	return nil
}

// unsafeFor lists the backends that are not safe on the server of r.
func unsafeFor(r doctor.Report) []string {
	out := []string{}
	for _, b := range []string{doctor.BackendTable, doctor.BackendLock} {
		if !r.Safe(b) {
			out = append(out, b)
		}
	}
	return out
}

func printDoctorJSON(w io.Writer, r doctor.Report, backend string) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Server    string           `json:"server"`
		Backend   string           `json:"backend"`
		Safe      bool             `json:"safe"`
		UnsafeFor []string         `json:"unsafe_for"`
		Findings  []doctor.Finding `json:"findings"`
	}{r.Server, backend, r.Safe(backend), unsafeFor(r), r.For(backend)})
}

// printDoctor prints a table of the findings for backend, the consequence
// and the fix under each one that does not pass, and the verdict.
func printDoctor(w io.Writer, r doctor.Report, backend string) {
	fmt.Fprintf(w, "server: %s\nbackend: %s\n\n", r.Server, backend)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROPERTY\tSTATUS\tDETAIL")
	for _, f := range r.For(backend) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Property, f.Status, f.Detail)
		if f.Status != doctor.CheckPass {
			fmt.Fprintf(tw, "\t\t  consequence: %s\n\t\t  fix: %s\n", f.Consequence, f.Fix)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	if failed := r.Failed(backend); failed != nil {
		fmt.Fprintf(w, "verdict: the %s backend is NOT safe on this server: %s\n", backend, strings.Join(failed, ", "))
	} else {
		fmt.Fprintf(w, "verdict: the %s backend is safe on this server\n", backend)
	}
	for _, b := range []string{doctor.BackendTable, doctor.BackendLock} {
		if b == backend {
			continue
		}
		if failed := r.Failed(b); failed != nil {
			fmt.Fprintf(w, "(the %s backend is not: %s)\n", b, strings.Join(failed, ", "))
		} else {
			fmt.Fprintf(w, "(so is the %s backend)\n", b)
		}
	}
}
