//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/mysqld"
)

// galeraProvider is Debian's galera-4 library.
const galeraProvider = "/usr/lib/galera/libgalera_smm.so"

// galeraNodes is the size of the cluster; node 0 bootstraps it.
const galeraNodes = 3

// galeraCandidatesPerNode is how many candidates talk to each node.
const galeraCandidatesPerNode = 2

// galeraArgs are the server options of node i of a loopback cluster whose
// nodes' group communication ports are gcomm, IST ports ist and SST ports
// sst.
func galeraArgs(i int, gcomm, ist, sst []int) []string {
	var addrs []string
	for _, p := range gcomm {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	args := []string{
		"--wsrep_on=ON",
		"--wsrep_provider=" + galeraProvider,
		"--wsrep_cluster_name=sqlelect_chaos",
		"--wsrep_cluster_address=gcomm://" + strings.Join(addrs, ","),
		"--wsrep_node_name=node" + fmt.Sprint(i+1),
		"--wsrep_node_address=127.0.0.1",
		fmt.Sprintf("--wsrep_provider_options=base_port=%d;gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=64M",
			gcomm[i], gcomm[i], ist[i]),
		fmt.Sprintf("--wsrep_sst_receive_address=127.0.0.1:%d", sst[i]),
		"--wsrep_sst_method=rsync",
		"--binlog_format=ROW",
		"--default_storage_engine=InnoDB",
		"--innodb_autoinc_lock_mode=2",
		"--innodb-buffer-pool-size=64M",
		"--max-connections=500",
	}
	if i == 0 {
		args = append(args, "--wsrep-new-cluster")
	}
	return args
}

// startGalera starts a cluster of n nodes on loopback with package mysqld,
// one after the other (each joiner gets its data by rsync SST from a
// running node). Node 0 bootstraps the cluster: it must never be restarted
// (it would bootstrap a second one).
func startGalera(t *testing.T, ctx context.Context, n int) []*mysqld.Server {
	t.Helper()
	ports, err := mysqld.FreePorts(3 * n)
	if err != nil {
		t.Fatal(err)
	}
	gcomm, ist, sst := ports[:n], ports[n:2*n], ports[2*n:]
	var nodes []*mysqld.Server
	for i := range n {
		start := time.Now()
		srv, err := mysqld.Start(ctx, mysqld.Options{Server: mysqld.ServerHost, ExtraArgs: galeraArgs(i, gcomm, ist, sst), StartTimeout: 2 * time.Minute})
		if err != nil {
			t.Fatalf("galera node %d: %v", i+1, err)
		}
		t.Cleanup(func() { _ = srv.Stop() })
		nodes = append(nodes, srv)
		if err := waitSynced(ctx, srv, i+1); err != nil {
			t.Fatalf("galera node %d: %v", i+1, err)
		}
		t.Logf("galera node %d on %s (gcomm %d) synced in %v", i+1, srv.Addr, gcomm[i], time.Since(start).Round(time.Millisecond))
	}
	return nodes
}

// waitSynced waits until the node is Synced in a primary component of at
// least size nodes.
func waitSynced(ctx context.Context, srv *mysqld.Server, size int) error {
	db, err := sql.Open("mysql", srv.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var state, status string
	var got int
	for {
		var name string
		err1 := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state)
		err2 := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_cluster_status'").Scan(&name, &status)
		err3 := db.QueryRowContext(ctx, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_SIZE'").Scan(&got)
		if err1 == nil && err2 == nil && err3 == nil && state == "Synced" && status == "Primary" && got >= size {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not synced: state %q, cluster %q, size %d (%v)", state, status, got, errors.Join(err1, err2, err3))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestChaosGalera runs the table backend on a real 3-node MariaDB Galera
// cluster with candidates spread over the nodes, injects the process,
// operator and connection faults and the death and rejoin of a node, and
// checks that the lock backend is refused.
func TestChaosGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos suite takes minutes; skipped under -short")
	}
	n := rounds(t)
	if ok, why := mysqld.GaleraSelected(); !ok {
		t.Skip(why)
	}
	if _, err := os.Stat(galeraProvider); err != nil {
		t.Skipf("Galera is not installed (%v): apt-get install -y galera-4 rsync", err)
	}
	candidateBinary(t)
	tm := defaultTimings
	var nodes []*mysqld.Server
	admins := make([]*sql.DB, galeraNodes)
	var c *cluster
	randomAdmin := func() *sql.DB { return admins[c.rng.IntN(len(admins))] }
	adminOf := func(l *slot) *sql.DB { return admins[l.node] }
	faults := []fault{
		{kind: kindKill9, inject: kill9},
		{kind: kindSigstop, inject: sigstop},
		{kind: kindResign, inject: resign},
		{kind: kindKillConn, inject: killConn(adminOf)},
		{kind: kindOpReplace, inject: opReplace(randomAdmin)},
		{kind: kindOpDelete, inject: opDelete(randomAdmin)},
		{kind: kindNodeRejoin, inject: func(c *cluster, l *slot) (string, error) { return nodeKillRejoin(c, l, nodes) }},
		{kind: kindOpAssumeResign, inject: opCompound(kindOpAssumeResign, randomAdmin, adminOf), once: true},
		{kind: kindOpAssumeShutdown, inject: opCompound(kindOpAssumeShutdown, randomAdmin, adminOf), once: true},
		{kind: kindOpReelectReelect, inject: opCompound(kindOpReelectReelect, randomAdmin, adminOf), once: true},
		{kind: kindOpAssumeReelect, inject: opCompound(kindOpAssumeReelect, randomAdmin, adminOf), once: true},
		{kind: kindNetHalfOpen, inject: netHalfOpen, once: true},
		{kind: kindNetHalfOpenWake, inject: netHalfOpenWake(randomAdmin), once: true},
		// No row_lock: a row lock taken on one node does not hold back the
		// other nodes' writes, which abort it (1213) when they replicate.
	}
	faults = selectFaults(t, faults)
	ctx, cancel := context.WithTimeout(context.Background(), budget(n, len(faults))+3*time.Minute)
	t.Cleanup(cancel)

	nodes = startGalera(t, ctx, galeraNodes)
	admin, adminDSN := setupDatabase(t, ctx, nodes[0].DSN(""))
	admins[0] = admin
	for i := 1; i < galeraNodes; i++ {
		dsn := strings.Replace(adminDSN, nodes[0].Addr, nodes[i].Addr, 1)
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		admins[i] = db
	}

	t.Run("LockBackendRefused", func(t *testing.T) { lockRefused(t, ctx, admins) })

	t.Run("FencedLongTransaction", func(t *testing.T) {
		fencedLongTransaction(t, ctx, adminDSN, strings.Replace(adminDSN, nodes[0].Addr, nodes[1].Addr, 1), false)
	})

	c = newCluster(t, ctx, "galera", "table", tm)
	for i := range galeraNodes * galeraCandidatesPerNode {
		node := i % galeraNodes
		user := fmt.Sprintf("g%d", i+1)
		h := newHole(t, nodes[node].Addr)
		s := c.addSlot(user, createUser(t, ctx, admin, user, h.Addr()), node, nil, h)
		c.start(s)
	}
	c.campaign(faults, n)
	for i := 1; i < galeraNodes; i++ { // let a rejoined node catch up before reading
		if err := waitSynced(ctx, nodes[i], galeraNodes); err != nil {
			t.Errorf("galera node %d: %v", i+1, err)
		}
	}
	res := c.finish(admin)
	t.Logf("galera: write conflicts (1213) the candidates retried as \"not leader this tick\": %.0f", res.Errors["deadlock"])
}

// nodeKillRejoin kills (SIGKILL) the leader's node, or another one when
// the leader talks to the bootstrap node, waits for more than a lease, and
// restarts it; it rejoins the cluster (IST) and the fault ends when it is
// Synced again.
func nodeKillRejoin(c *cluster, l *slot, nodes []*mysqld.Server) (string, error) {
	k := l.node
	if k == 0 {
		k = 1 + c.rng.IntN(len(nodes)-1)
	}
	srv := nodes[k]
	target := fmt.Sprintf("node%d (leader %s on node%d)", k+1, l.proc.id, l.node+1)
	if err := srv.Kill(); err != nil {
		return target, err
	}
	c.pause(c.tm.Lease + c.jitter(time.Second))
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Minute)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		return target, err
	}
	return target, waitSynced(ctx, srv, len(nodes))
}
