package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	coordv1 "k8s.io/api/coordination/v1"
)

// TestLeaseServerConcurrency checks what client-go's mutual exclusion rests
// on: a create of an existing Lease and an update with a stale
// resourceVersion are refused with 409.
func TestLeaseServerConcurrency(t *testing.T) {
	s, err := startLeaseServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	base := s.url + "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	do := func(method, url string, l *coordv1.Lease) (int, coordv1.Lease) {
		t.Helper()
		var body bytes.Buffer
		if l != nil {
			if err := json.NewEncoder(&body).Encode(l); err != nil {
				t.Fatal(err)
			}
		}
		req, err := http.NewRequest(method, url, &body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out coordv1.Lease
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if code, _ := do(http.MethodGet, base+"/x", nil); code != http.StatusNotFound {
		t.Fatalf("GET of a missing lease: %d, want 404", code)
	}
	holder := "a"
	l := &coordv1.Lease{}
	l.Name = "x"
	l.Spec.HolderIdentity = &holder
	code, created := do(http.MethodPost, base, l)
	if code != http.StatusCreated || created.ResourceVersion == "" {
		t.Fatalf("POST: %d, resourceVersion %q", code, created.ResourceVersion)
	}
	if code, _ := do(http.MethodPost, base, l); code != http.StatusConflict {
		t.Fatalf("second POST: %d, want 409", code)
	}
	// Two writers read the same version; only the first update wins.
	b := "b"
	first := created
	first.Spec.HolderIdentity = &b
	code, updated := do(http.MethodPut, base+"/x", &first)
	if code != http.StatusOK || updated.ResourceVersion == created.ResourceVersion {
		t.Fatalf("PUT with the current version: %d, resourceVersion %q", code, updated.ResourceVersion)
	}
	c := "c"
	second := created
	second.Spec.HolderIdentity = &c
	if code, _ := do(http.MethodPut, base+"/x", &second); code != http.StatusConflict {
		t.Fatalf("PUT with a stale version: %d, want 409", code)
	}
	if code, got := do(http.MethodGet, base+"/x", nil); code != http.StatusOK || got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != "b" {
		t.Fatalf("GET after the updates: %d, holder %v", code, got.Spec.HolderIdentity)
	}
	if q, w := s.counts(); q != 6 || w != 4 {
		t.Fatalf("counts: %v requests, %v writes; want 6, 4", q, w)
	}
}
