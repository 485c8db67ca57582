package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

var runCmd = &command{
	name:    "run",
	args:    "ELECTION [campaign flags] [--grace D] -- CMD [ARGS...]",
	summary: "run a command only while leading an election",
	detail: `Campaigns like 'sqlelect campaign' and runs CMD while this candidate leads:

- When elected, CMD starts in a process group of its own, with stdout and
  stderr passed through (stdin is /dev/null) and, in its environment,
  SQLELECT_ELECTION, SQLELECT_ID and SQLELECT_TERM (the fencing term: pass it
  to systems outside the database so they can refuse a stale leader).
- When leadership ends (lease lost, deposed by assume or reelect), the group
  gets SIGTERM, and SIGKILL after --grace; the candidate releases the row
  only once CMD has exited, then campaigns again and restarts CMD when it is
  elected again. --grace (default (lease - renew-deadline)/2) must be less
  than lease - renew-deadline, so that CMD is dead before another candidate
  may lead.
- When CMD exits by itself while leading, sqlelect resigns (another
  candidate takes over at once) and exits with CMD's exit status (128+N when
  a signal N killed it), like 'consul lock'. If CMD cannot be started,
  sqlelect resigns and exits 1.
- On SIGTERM or SIGINT, sqlelect stops CMD as above, resigns and exits 0
  (130, or 143 for SIGTERM, when the signal came while it was connecting).

The JSON event lines of campaign go to stderr here, so that CMD's stdout
stays its own; sqlelect's log lines go there too. CMD's stderr is the same
stream, written by CMD directly: --output FILE sends sqlelect's own lines
(events and logs) to FILE instead, so that stderr carries CMD's alone. --http-addr and --health-cmd work as for campaign: a failing
health command stops CMD as above (demoted, reason unhealthy) and leadership
passes to another candidate. If sqlelect itself is frozen (SIGSTOP, a paused
VM) it cannot stop CMD in time: use SQLELECT_TERM as a fencing token where
that matters. If sqlelect is killed with SIGKILL, CMD gets SIGKILL too
(Linux).`,
	example: `sqlelect run reports --id "$(hostname)" --lease 10s -- ./send-reports --daily
sqlelect run web-primary -- sh -c 'echo leading as $SQLELECT_ID term $SQLELECT_TERM; exec ./serve'
sqlelect run reports --http-addr :8081 --health-cmd 'test ! -e /etc/maintenance' -- ./send-reports`,
	run: (*cli).run,
}

func (c *cli) run(cmd *command, args []string) error {
	fs := newFlagSet(cmd)
	var grace time.Duration
	var output string
	fs.DurationVar(&grace, "grace", 0, "time between SIGTERM and SIGKILL when leadership ends (default (lease - renew-deadline)/2)")
	fs.StringVar(&output, "output", "", "append sqlelect's own lines (events and logs) to `FILE` instead of stderr, apart from CMD's stderr")
	f, names, argv, err := c.parseCandidate(cmd, fs, args)
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return failf(exitUsage, "missing the command: sqlelect run ELECTION [flags] -- CMD [ARGS...]")
	}
	if len(names) != 1 {
		return failf(exitUsage, "want exactly one election before -- (see 'sqlelect run --help')")
	}
	if output == "" && f.set("output") {
		return failf(exitUsage, "--output is empty: give a file, or leave the flag out for stderr")
	}
	own, closeOwn, err := c.ownOutput(output)
	if err != nil {
		return err
	}
	defer closeOwn()
	cfg, log, err := f.config(names[0], own)
	if err != nil {
		return err
	}
	if grace, err = checkGrace(grace, cfg); err != nil {
		return err
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return wrapf(exitError, err, "cannot start %q", argv[0])
	}

	r := &runner{name: cfg.Name, id: cfg.ID, path: path, argv: argv, grace: grace, log: log,
		exited: make(chan int, 1)}
	j, err := c.join(f, cfg, log, newEvents(own, cfg.Name, cfg.ID), r.lead)
	if err != nil {
		return err
	}
	defer j.stop()

	return r.wait(j, f.backend, log)
}

// ownOutput opens --output for sqlelect's own lines (stderr when empty).
func (c *cli) ownOutput(output string) (io.Writer, func(), error) {
	if output == "" {
		return c.stderr, func() {}, nil
	}
	out, err := os.OpenFile(output, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, wrapf(exitUsage, err, "--output")
	}
	return out, func() { _ = out.Close() }, nil
}

// wait campaigns until Run ends or CMD exits; then it resigns and returns
// the exit status.
func (r *runner) wait(j *joined, backend string, log *slog.Logger) error {
	runCtx, cancelRun := context.WithCancel(j.ctx)
	defer cancelRun()
	errc := make(chan error, 1)
	go func() { errc <- j.run(runCtx) }()
	select {
	case err := <-errc:
		return campaignError(err, backend)
	case code := <-r.exited:
		// CMD exited by itself, or could not start: resign and exit. Ending
		// Run's context makes it stand down and release the row.
		cancelRun()
		if err := <-errc; err != nil {
			return campaignError(err, backend)
		}
		if code < 0 {
			return wrapf(exitError, r.startErr, "cannot start %q", r.argv[0])
		}
		log.Info("command exited; resigned", "status", code)
		return exitStatus(code)
	}
}

// checkGrace returns --grace, or its default (lease - renew-deadline)/2,
// and a usage error unless CMD is sure to be dead before another candidate
// may lead.
func checkGrace(grace time.Duration, cfg election.Config) (time.Duration, error) {
	margin := cfg.LeaseDuration - cfg.Tuning.RenewDeadline
	if grace == 0 {
		grace = margin / 2
	}
	if grace <= 0 || grace >= margin {
		return 0, failf(exitUsage, "--grace %v: must be positive and less than lease - renew-deadline (%v - %v = %v), "+
			"so that CMD is dead before another candidate may lead", grace, cfg.LeaseDuration, cfg.Tuning.RenewDeadline, margin)
	}
	if cfg.Tuning.LockDelay < cfg.Tuning.RenewDeadline+grace {
		return 0, failf(exitUsage, "--lock-delay %v: must be at least renew-deadline + grace (%v), "+
			"so that a deposed leader's CMD is dead before this one starts", cfg.Tuning.LockDelay, cfg.Tuning.RenewDeadline+grace)
	}
	return grace, nil
}

// runner starts and stops the command on leadership changes.
type runner struct {
	name, id string
	path     string
	argv     []string
	grace    time.Duration
	log      *slog.Logger

	exited   chan int // CMD's status when it exited by itself; -1: could not start
	startErr error    // written before -1 is sent on exited
}

// lead runs CMD until ctx (the leadership) ends or CMD exits by itself, and
// returns only once CMD and its process group are gone.
func (r *runner) lead(ctx context.Context, term uint64) {
	if ctx.Err() != nil {
		return
	}
	cmd := exec.Command(r.path, r.argv[1:]...)
	cmd.Args[0] = r.argv[0]
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"SQLELECT_ELECTION="+r.name,
		"SQLELECT_ID="+r.id,
		"SQLELECT_TERM="+strconv.FormatUint(term, 10))
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		r.log.Error("cannot start the command", "cmd", r.argv[0], "err", err)
		r.startErr = err
		r.report(-1)
		return
	}
	pgid := cmd.Process.Pid
	r.log.Info("command started", "pid", pgid, "term", term)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()

	select {
	case <-done:
		// Exited by itself while leading: stop what it left behind in its
		// group, then have sqlelect resign and exit with its status.
		code := exitCode(cmd.ProcessState)
		r.log.Info("command exited by itself", "pid", pgid, "status", code)
		stopGroup(cmd.Process, r.grace, done)
		r.report(code)
		return
	case <-ctx.Done():
	}
	r.log.Info("leadership ended: stopping the command", "pid", pgid, "grace", r.grace)
	stopGroup(cmd.Process, r.grace, done)
	r.log.Info("command stopped", "pid", pgid, "status", exitCode(cmd.ProcessState))
}

func (r *runner) report(code int) {
	select {
	case r.exited <- code:
	default:
	}
}

// stopGroup sends SIGTERM to CMD's process group (and to CMD, should it
// have left the group), waits up to grace for CMD to exit (done closed) and
// for the rest of the group to go, then sends SIGKILL to what is left and
// waits for CMD.
func stopGroup(p *os.Process, grace time.Duration, done <-chan struct{}) {
	pgid := p.Pid
	deadline := time.Now().Add(grace)
	_ = signalGroup(pgid, syscall.SIGTERM)
	_ = p.Signal(syscall.SIGTERM) // os.ErrProcessDone once reaped: fine
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
	for time.Now().Before(deadline) && groupAlive(pgid) {
		time.Sleep(10 * time.Millisecond)
	}
	_ = signalGroup(pgid, syscall.SIGKILL)
	_ = p.Signal(syscall.SIGKILL)
	<-done
}

// exitCode is the status sqlelect exits with for a finished command: its
// exit code, or 128+N when signal N killed it.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return exitError
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if c := ps.ExitCode(); c >= 0 {
		return c
	}
	return exitError
}
