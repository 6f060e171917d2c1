package fence_test

// serial: timing-bound (leases, elections, SIGSTOP)

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	fence "fenced/client"
)

// cluster3 starts three fenced nodes with one --peers list.
func cluster3(t *testing.T) []*proc {
	t.Helper()
	needBins(t)
	dir := t.TempDir()
	type nd struct{ port, raft int }
	nodes := make([]nd, 3)
	var peers []string
	for i := range nodes {
		nodes[i] = nd{freePort(), freePort()}
		peers = append(peers, fmt.Sprintf("%d=127.0.0.1:%d/%d", i+1, nodes[i].port, nodes[i].raft))
	}
	var ps []*proc
	for i, n := range nodes {
		d := filepath.Join(dir, fmt.Sprintf("n%d", i+1))
		os.MkdirAll(d, 0o700)
		p, err := start(d, fmt.Sprintf("fenced-n%d", i+1), fencedBin, fmt.Sprintf("127.0.0.1:%d", n.port),
			"--node-id", fmt.Sprint(i+1), "--port", fmt.Sprint(n.port), "--bind", "127.0.0.1",
			"--raft-port", fmt.Sprint(n.raft), "--data-dir", filepath.Join(d, "data"),
			"--peers", strings.Join(peers, ","))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.stop)
		ps = append(ps, p)
	}
	return ps
}

// role asks one node (only) for its INFO role.
func role(addr string) string {
	c, err := fence.New(fence.Options{Servers: []string{addr}, Timeout: time.Second})
	if err != nil {
		return ""
	}
	defer c.Close()
	v, err := c.Do(context.Background(), "INFO")
	if err != nil {
		return ""
	}
	role, ready := "", ""
	for _, ln := range strings.Split(string(v.Str), "\r\n") {
		if strings.HasPrefix(ln, "role:") {
			role = ln[5:]
		}
		if strings.HasPrefix(ln, "leader_ready:") {
			ready = ln[13:]
		}
	}
	if role == "leader" && ready != "1" {
		return "leader-not-ready"
	}
	return role
}

func waitLeader(t *testing.T, ps []*proc, skip *proc) *proc {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		for _, p := range ps {
			if p != skip && role(p.addr) == "leader" {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no leader within 20 s")
	return nil
}

// TestClusterFailover: a session holds a lock on a 3-node cluster; the
// leader is killed; the session keeps its lease through the election (the
// keepalive follows the new leader), the lock is still held with the same
// token, and Unlock works on the new leader.
func TestClusterFailover(t *testing.T) {
	ps := cluster3(t)
	leader := waitLeader(t, ps, nil)
	ctx := ctxT(t, 60*time.Second)
	// List a follower first: the client must follow NOTLEADER.
	var addrs []string
	for _, p := range ps {
		if p != leader {
			addrs = append(addrs, p.addr)
		}
	}
	addrs = append(addrs, leader.addr)
	c := newClient(t, fence.Options{Servers: addrs})
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := fence.NewMutex(s, "t-failover")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok := m.Token()

	killed := time.Now()
	leader.kill()
	// A call made right away rides out the election: refused by the dead
	// node, TRYAGAIN or NOTLEADER from the others, until a leader serves it.
	l2, err := c.Acquire(ctx, "t-failover-2", fence.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatalf("Acquire during the election: %v", err)
	}
	t.Logf("Acquire during the election took %v", time.Since(killed))
	nl := waitLeader(t, ps, leader)
	t.Logf("leader %s killed; new leader %s after %v", leader.addr, nl.addr, time.Since(killed))

	// Wait for a renewal sent after the failover: valid-until moves past
	// the kill time plus the TTL.
	end := time.Now().Add(15 * time.Second)
	for !s.ValidUntil().After(killed.Add(s.TTL()-s.TTL()/10)) && time.Now().Before(end) {
		select {
		case <-s.Done():
			t.Fatalf("lease lost during the failover: %v", s.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !s.ValidUntil().After(killed.Add(s.TTL() - s.TTL()/10)) {
		t.Fatal("no keepalive succeeded after the failover")
	}
	v, err := c.Do(ctx, "LOCK.INFO", "t-failover")
	if err != nil || v.Kind != fence.KindArray || uint64(v.Array[0].Int) != tok.Value || uint64(v.Array[1].Int) != s.Lease() {
		t.Fatalf("LOCK.INFO on the new leader: %v %v, want token %d lease %d", v, err, tok.Value, s.Lease())
	}
	// A new call (with REQID) goes to the new leader.
	s2, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.NewMutex(s2, "t-failover").TryLock(ctx); err == nil {
		t.Fatal("the lock was free after the failover")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock on the new leader: %v", err)
	}
	m2 := fence.NewMutex(s2, "t-failover")
	if err := m2.TryLock(ctx); err != nil || m2.Token().Value <= tok.Value {
		t.Fatalf("TryLock after Unlock: %v, token %d after %d", err, m2.Token().Value, tok.Value)
	}
	s2.Close(ctx)
	s.Close(ctx)
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPausedHolder is the pause scenario: a holder process takes the lock
// and admits its token at fence-store, is stopped (SIGSTOP) past its
// lease, a second holder gets the lock with a higher token and writes,
// and the first, continued, writes with its old token: fence-store refuses
// it (STALE, with the new holder's token), and the value is the new one.
func TestPausedHolder(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	f := startFenced(t)
	st := startStore(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FENCE_GO_HELPER=holder", "FENCE_SERVER="+f.addr, "FENCE_STORE="+st.addr)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	}()
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case ln := <-lines:
			return ln
		case <-time.After(20 * time.Second):
			t.Fatal("helper said nothing for 20 s")
		}
		return ""
	}
	ln := next()
	var old uint64
	if _, err := fmt.Sscanf(ln, "TOKEN %d", &old); err != nil {
		t.Fatalf("helper: %q", ln)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	// The second holder waits for the lock; it gets it once the stopped
	// holder's lease (600 ms) runs out on the server.
	c := newClient(t, fence.Options{Servers: []string{f.addr}})
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	m := fence.NewMutex(s, "pause")
	t0 := time.Now()
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("second holder got the lock after %v with token %d (old %d)", time.Since(t0), m.Token().Value, old)
	if m.Token().Value <= old {
		t.Fatalf("new token %d not above %d", m.Token().Value, old)
	}
	store, _ := fence.OpenStore(fence.StoreOptions{Addr: st.addr})
	defer store.Close()
	if err := store.Admit(ctx, "pause", m.Token()); err != nil {
		t.Fatal(err)
	}
	if err := store.Set(ctx, "pause", m.Token(), "pause-key", []byte("new holder")); err != nil {
		t.Fatal(err)
	}

	// Wake the stale holder and let it write.
	cmd.Process.Signal(syscall.SIGCONT)
	io.WriteString(stdin, "go\n")
	ln = next()
	want := fmt.Sprintf("SET STALE %d %d", old, m.Token().Value)
	if ln != want {
		t.Fatalf("stale holder's write: %q, want %q", ln, want)
	}
	v, _, err := store.Get(ctx, "pause-key")
	if err != nil || string(v) != "new holder" {
		t.Fatalf("value %q (%v), want the new holder's", v, err)
	}
	// And its session learns that the lease is gone.
	ln = next()
	if !strings.HasPrefix(ln, "LOST ") || !strings.HasSuffix(ln, "lease-lost=true") {
		t.Fatalf("stale holder's session: %q", ln)
	}
}
