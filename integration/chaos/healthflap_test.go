//go:build linux

package chaos

import (
	"syscall"
	"time"
)

// kindHealthFlap: the leader's health check turns slow and flapping.
const kindHealthFlap = "health_flap"

// healthFaultFor is how long a candidate's health check stays slow and
// flapping after SIGUSR2 (its --health-fault-for default).
const healthFaultFor = 3 * time.Second

// healthFlap makes the leader's health check slow and flapping for
// healthFaultFor (SIGUSR2, see the candidate's healthFault): its runs pass
// slowly, fail, and hang past their timeout in turn. The leader stands
// down at the first failure and another candidate takes over at once; the
// flapping candidate may lead again between failures, never beside
// another. The fault ends when the check is steady again.
func healthFlap(c *cluster, l *slot) (string, error) {
	id := l.proc.id
	if err := c.signal(l, syscall.SIGUSR2); err != nil {
		return id, err
	}
	c.pause(healthFaultFor)
	return id, nil
}
