package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"

	"github.com/sqlelect/sqlelect/internal/testdb"
)

// dockerPassword is root's password in the container. The container only
// lives as long as the test binary.
const dockerPassword = "sqlelect"

// startDocker runs the image named by SQLELECT_TEST_IMAGE (default
// mariadb:10.11) and waits until root can connect. It returns an error
// wrapping testdb.ErrNoDocker when no Docker engine answers a ping within 5 s.
// Pulling the image is not bounded by ctx; waiting for the server is
// bounded by ctx and 3 minutes.
func startDocker(ctx context.Context, logf func(string, ...any)) (*mysql.Config, func() error, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", testdb.ErrNoDocker, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = pool.Client.PingWithContext(pingCtx)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", testdb.ErrNoDocker, err)
	}

	image := os.Getenv(testdb.EnvImage)
	if image == "" {
		image = testdb.DefaultImage
	}
	repo, tag := splitImage(image)
	logf("testdb: starting Docker container %s:%s", repo, tag)
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository: repo,
		Tag:        tag,
		Env: []string{
			"MARIADB_ROOT_PASSWORD=" + dockerPassword,
			"MYSQL_ROOT_PASSWORD=" + dockerPassword,
		},
		Cmd:    []string{"--character-set-server=utf8mb4"},
		Labels: map[string]string{"org.sqlelect.testdb": "true"},
	}, func(hc *docker.HostConfig) {
		hc.RestartPolicy = docker.RestartPolicy{Name: "no"}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("run container %s: %w", image, err)
	}

	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Passwd = dockerPassword
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(dockerHost(), res.GetPort("3306/tcp"))
	if err := waitDocker(ctx, cfg.Clone()); err != nil {
		_ = pool.Purge(res)
		return nil, nil, fmt.Errorf("container %s at %s: %w", image, cfg.Addr, err)
	}
	purge := func() error {
		if err := pool.Purge(res); err != nil {
			return fmt.Errorf("purge container %s: %w", res.Container.ID, err)
		}
		return nil
	}
	return cfg, purge, nil
}

// waitDocker pings cfg (which it modifies) every 500 ms until it answers, for at most 3
// minutes or until ctx is done.
func waitDocker(ctx context.Context, cfg *mysql.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cfg.Timeout = 5 * time.Second
	cfg.Logger = &mysql.NopLogger{} // errors while the server boots are expected
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for {
		pingCtx, pingCancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.PingContext(pingCtx)
		pingCancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last error: %v)", ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

// dockerHost is where published ports are reachable: the host of a tcp://
// DOCKER_HOST, else the loopback address.
func dockerHost() string {
	if u, err := url.Parse(os.Getenv("DOCKER_HOST")); err == nil && u.Scheme == "tcp" && u.Hostname() != "" {
		return u.Hostname()
	}
	return "127.0.0.1"
}

// splitImage splits "repo[:tag]" (the repository may contain a registry
// host:port) into repository and tag, defaulting the tag to "latest".
func splitImage(image string) (repo, tag string) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i+1:], "/") {
		return image, "latest"
	}
	return image[:i], image[i+1:]
}
