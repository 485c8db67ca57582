package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// healthFault is the candidate's Config.Health.Check. It passes at once,
// until SIGUSR2: then, for --health-fault-for, its runs go in turn slow but
// passing (8/10 of --health-timeout), failing, slow and passing, and
// hanging past the timeout until their context ends; then it passes at
// once again. A slow or flapping check must neither break safety nor
// leave the election without a leader for long: the leader stands down at
// a failure and another takes over.
type healthFault struct {
	timeout, lasts time.Duration

	mu    sync.Mutex
	until time.Time // the fault lasts until then
	n     int       // runs since the fault began
}

var errFlap = errors.New("chaos: health check failing (health_flap fault)")

// watch starts the fault on each SIGUSR2 until ctx ends.
func (h *healthFault) watch(ctx context.Context) {
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	go func() {
		defer signal.Stop(usr2)
		for {
			select {
			case <-ctx.Done():
				return
			case <-usr2:
				h.mu.Lock()
				h.until, h.n = time.Now().Add(h.lasts), 0
				h.mu.Unlock()
			}
		}
	}()
}

func (h *healthFault) check(ctx context.Context) error {
	h.mu.Lock()
	on := time.Now().Before(h.until)
	n := h.n
	h.n++
	h.mu.Unlock()
	if !on {
		return nil
	}
	switch n % 4 {
	case 1:
		return errFlap
	case 3:
		<-ctx.Done() // past the timeout
		return ctx.Err()
	}
	t := time.NewTimer(h.timeout * 8 / 10)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
