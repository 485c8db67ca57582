package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	coordv1 "k8s.io/api/coordination/v1"
)

// leaseServer is a minimal Kubernetes API for client-go's LeaseLock: get,
// create and update of coordination.k8s.io/v1 Lease objects, in memory, with
// the apiserver's optimistic concurrency (an update must carry the current
// resourceVersion, else 409 Conflict; a create of an existing name is 409
// AlreadyExists). No etcd and no watch behind it: client-go's leader election
// only gets and writes its Lease, and all its timing is on the client's side.
// It counts the requests it serves.
type leaseServer struct {
	mu     sync.Mutex
	leases map[string]*coordv1.Lease
	rv     int64
	srv    *http.Server
	url    string

	reads, writes atomic.Int64
}

func startLeaseServer() (*leaseServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &leaseServer{leases: map[string]*coordv1.Lease{}, url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: s}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *leaseServer) close() { _ = s.srv.Close() }

// counts returns the requests served so far and the writes among them.
func (s *leaseServer) counts() (requests, writes float64) {
	w := float64(s.writes.Load())
	return float64(s.reads.Load()) + w, w
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, code)
}

func (s *leaseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]
	const pfx = "/apis/coordination.k8s.io/v1/namespaces/"
	rest, ok := strings.CutPrefix(r.URL.Path, pfx)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 2 || parts[1] != "leases" {
		status(w, http.StatusNotFound, "NotFound", "no such resource "+r.URL.Path)
		return
	}
	ns, name := parts[0], ""
	if len(parts) > 2 {
		name = parts[2]
	}
	if r.Method == http.MethodGet {
		s.reads.Add(1)
	} else {
		s.writes.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	reply := func(code int, l *coordv1.Lease) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(l)
	}
	switch r.Method {
	case http.MethodGet:
		l := s.leases[ns+"/"+name]
		if l == nil {
			status(w, http.StatusNotFound, "NotFound", fmt.Sprintf("leases.coordination.k8s.io %q not found", name))
			return
		}
		reply(http.StatusOK, l)
	case http.MethodPost, http.MethodPut:
		var l coordv1.Lease
		if err := json.NewDecoder(r.Body).Decode(&l); err != nil {
			status(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		if r.Method == http.MethodPost {
			name = l.Name
		}
		key := ns + "/" + name
		old := s.leases[key]
		switch {
		case r.Method == http.MethodPost && old != nil:
			status(w, http.StatusConflict, "AlreadyExists", fmt.Sprintf("leases.coordination.k8s.io %q already exists", name))
			return
		case r.Method == http.MethodPut && old == nil:
			status(w, http.StatusNotFound, "NotFound", fmt.Sprintf("leases.coordination.k8s.io %q not found", name))
			return
		case r.Method == http.MethodPut && l.ResourceVersion != old.ResourceVersion:
			status(w, http.StatusConflict, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on leases.coordination.k8s.io %q: the object has been modified", name))
			return
		}
		s.rv++
		l.Namespace, l.Name = ns, name
		l.ResourceVersion = strconv.FormatInt(s.rv, 10)
		l.Kind, l.APIVersion = "Lease", "coordination.k8s.io/v1"
		s.leases[key] = &l
		code := http.StatusOK
		if r.Method == http.MethodPost {
			code = http.StatusCreated
		}
		reply(code, &l)
	default:
		status(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method)
	}
}
