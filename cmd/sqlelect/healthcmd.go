package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// healthWaitDelay is how long a health command's output pipes are waited
// for once it exited or was killed (a background child may hold them).
const healthWaitDelay = 100 * time.Millisecond

// healthStderrMax bounds the stderr kept from one run of a health command.
const healthStderrMax = 4 << 10

// healthCmd is --health-cmd: a shell command run as Config.Health.Check,
// which writes an unhealthy event when the check starts failing and a
// healthy one when it passes again.
type healthCmd struct {
	script   string
	name, id string
	ev       *events
	e        election.Election // set once built, before Run: for the term
	runCtx   context.Context   // Run's context, set before Run

	failing bool // the last outcome; the library never runs two checks at once
}

// check implements Config.Health.Check: it runs the script with sh -c in a
// process group of its own, stdin /dev/null, stdout discarded, and
// SQLELECT_ELECTION and SQLELECT_ID in its environment. When ctx ends
// first, the group is killed and the check fails.
func (h *healthCmd) check(ctx context.Context) error {
	err := h.run(ctx)
	if h.runCtx != nil && h.runCtx.Err() != nil {
		return err // shutting down: the library ignores the outcome too
	}
	switch {
	case err != nil && !h.failing:
		h.ev.write(event{Event: "unhealthy", Term: h.term(), Err: err.Error()})
	case err == nil && h.failing:
		h.ev.write(event{Event: "healthy", Term: h.term()})
	}
	h.failing = err != nil
	return err
}

func (h *healthCmd) term() uint64 {
	if h.e == nil {
		return 0
	}
	return h.e.Term()
}

func (h *healthCmd) run(ctx context.Context) error {
	var bound time.Duration
	if dl, ok := ctx.Deadline(); ok {
		bound = time.Until(dl).Round(time.Millisecond)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", h.script)
	cmd.Env = append(os.Environ(), "SQLELECT_ELECTION="+h.name, "SQLELECT_ID="+h.id)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = childAttr()
	cmd.Cancel = func() error {
		_ = signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = healthWaitDelay
	err := cmd.Run()
	if ctx.Err() != nil {
		// Killed at the end of its bound, or exited just then: a check
		// that does not answer in time failed, whatever it returned.
		if bound > 0 {
			return fmt.Errorf("health command killed: no exit within %v", bound)
		}
		return fmt.Errorf("health command killed: %w", ctx.Err())
	}
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		// Exit status 0; ErrWaitDelay: its output pipes were still open
		// healthWaitDelay after that (a background child holds them, or,
		// on a loaded machine, they were not yet read to their end).
		return nil
	case errors.As(err, &ee):
		msg := "health command failed (" + ee.ProcessState.String() + ")" // exit status 1, signal: killed
		if line := stderr.firstLine(); line != "" {
			msg += ": " + line
		}
		return errors.New(msg)
	default:
		return fmt.Errorf("health command: %w", err)
	}
}

// limitedBuffer keeps the first healthStderrMax bytes written to it.
type limitedBuffer struct{ b bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if n := healthStderrMax - l.b.Len(); n > 0 {
		l.b.Write(p[:min(n, len(p))])
	}
	return len(p), nil
}

func (l *limitedBuffer) firstLine() string {
	line, _, _ := strings.Cut(l.b.String(), "\n")
	return strings.TrimSpace(line)
}
