package main

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// clientGoPeer is client-go's tools/leaderelection with a LeaseLock, against
// the harness's Lease server (a minimal coordination.k8s.io/v1 Lease API:
// get, create, update with resourceVersion checks; see the harness). Its
// timings are the lease's: LeaseDuration = lease, RenewDeadline 2/3, RetryPeriod
// 1/10 (client-go's own defaults keep the same ratios less tightly: 15 s,
// 10 s, 2 s). ReleaseOnCancel is set. Its signal: OnStartedLeading's
// context is live (client-go cancels it when a renewal misses the renew
// deadline). It has no fencing token.
type clientGoPeer struct {
	o      opts
	cs     *kubernetes.Clientset
	active atomic.Pointer[context.Context]
}

func newClientGo(o opts) (peer, error) {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: o.endpoint, QPS: 1000, Burst: 1000, Timeout: o.lease,
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}})
	if err != nil {
		return nil, err
	}
	return &clientGoPeer{o: o, cs: cs}, nil
}

func (p *clientGoPeer) leader() bool {
	c := p.active.Load()
	return c != nil && (*c).Err() == nil
}

func (p *clientGoPeer) fence(context.Context) (bool, string) { return noToken() }

func (p *clientGoPeer) run(ctx context.Context) error {
	L := p.o.lease
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: p.o.election},
		Client:     p.cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: p.o.id},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: L, RenewDeadline: L * 2 / 3, RetryPeriod: L / 10, ReleaseOnCancel: true,
			Name: p.o.election,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) { p.active.Store(&lctx); <-lctx.Done() },
				OnStoppedLeading: func() { p.active.Store(nil) },
			},
		})
		if err != nil {
			return err
		}
		le.Run(ctx) // returns when leadership is lost or ctx ends
		p.active.Store(nil)
		if ctx.Err() == nil {
			sleepCtx(ctx, 10*time.Millisecond)
		}
	}
	return nil
}
