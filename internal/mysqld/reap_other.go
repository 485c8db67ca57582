//go:build !linux

package mysqld

const (
	ownerFile     = "owner.pid"
	serverPidFile = "server.pid"
)

// reapStale does nothing: without /proc a stale server cannot be told from
// an unrelated process that reused its pid.
func reapStale(string, string, func(string, ...any)) {}

// writeServerPid does nothing; see reapStale.
func writeServerPid(string, int) {}
