package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionhttp"
	"github.com/sqlelect/sqlelect/election/electionprom"
)

// shutdownTimeout bounds how long campaign and run wait, when they exit,
// for HTTP requests in flight; then the connections are closed.
const shutdownTimeout = 2 * time.Second

// checkAddr returns a usage error unless addr (the value of flag) is empty
// or [HOST]:PORT with a valid port.
func checkAddr(flag, addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return failf(exitUsage, "%s %q: want [HOST]:PORT, a port from 0 to 65535", flag, addr)
	}
	return nil
}

// endpoint is one listening address and what it serves.
type endpoint struct {
	flag string // the flags it serves, for the log
	ln   net.Listener
	mux  *http.ServeMux
	srv  *http.Server
	done chan struct{} // closed when Serve returned
}

func listen(flag, addr string) (*endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, wrapf(exitError, err, "%s %s", flag, addr)
	}
	mux := http.NewServeMux()
	return &endpoint{flag: flag, ln: ln, mux: mux,
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// sidecar is the HTTP side of campaign and run: Prometheus metrics on
// --metrics-addr, and the candidate's leader check, status and liveness
// on --http-addr; one server when both name the same address. Its
// listeners are open before the candidate campaigns, so that a port in use
// is an error before anything else happens.
type sidecar struct {
	metrics, http *endpoint // nil when off; the same when the addresses are equal
	reg           *prometheus.Registry
	m             *electionprom.Metrics

	closeOnce sync.Once
	started   bool
}

// listenSidecar listens on the addresses that are not empty (checked by
// checkAddr).
func listenSidecar(metricsAddr, httpAddr string) (*sidecar, error) {
	s := &sidecar{}
	var err error
	if metricsAddr != "" {
		if s.metrics, err = listen("--metrics-addr", metricsAddr); err != nil {
			return nil, err
		}
		s.reg, s.m = prometheus.NewRegistry(), electionprom.NewMetrics()
		s.reg.MustRegister(s.m, collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		s.metrics.mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	}
	switch {
	case httpAddr == "":
	case httpAddr == metricsAddr:
		s.http = s.metrics
		s.http.flag = "--metrics-addr and --http-addr"
	default:
		if s.http, err = listen("--http-addr", httpAddr); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// metricsFor returns the Metrics to give the candidate; nil (the
// default: none) without --metrics-addr.
func (s *sidecar) metricsFor() election.Metrics {
	if s.m == nil {
		return nil
	}
	return s.m
}

// endpoints returns the distinct endpoints.
func (s *sidecar) endpoints() []*endpoint {
	var out []*endpoint
	if s.metrics != nil {
		out = append(out, s.metrics)
	}
	if s.http != nil && s.http != s.metrics {
		out = append(out, s.http)
	}
	return out
}

// serve adds e's handlers to --http-addr and starts serving.
func (s *sidecar) serve(e election.Election, log *slog.Logger) {
	if s.http != nil {
		s.http.mux.Handle("GET /leader", electionhttp.LeaderCheckHandler(e, 0))
		s.http.mux.Handle("GET /status", electionhttp.StatusHandler(e))
		s.http.mux.Handle("GET /healthz", electionhttp.HealthzHandler(e))
	}
	s.started = true
	for _, ep := range s.endpoints() {
		ep.done = make(chan struct{})
		go func() {
			defer close(ep.done)
			_ = ep.srv.Serve(ep.ln) // http.ErrServerClosed once shut down
		}()
		log.Info("serving HTTP", "flag", ep.flag, "addr", "http://"+ep.ln.Addr().String())
	}
}

// close stops the servers: requests in flight get up to shutdownTimeout,
// then their connections are closed. It returns once every server's
// goroutine is done. Safe to call more than once.
func (s *sidecar) close() {
	s.closeOnce.Do(func() {
		if !s.started {
			for _, ep := range s.endpoints() {
				_ = ep.ln.Close()
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, ep := range s.endpoints() {
			wg.Go(func() {
				if ep.srv.Shutdown(ctx) != nil {
					_ = ep.srv.Close()
				}
				<-ep.done
			})
		}
		wg.Wait()
	})
}
