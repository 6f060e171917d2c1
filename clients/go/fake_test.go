package fence_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fence "fenced/client"
)

// fakeServer is a scripted RESP server on 127.0.0.1: reply gets every
// request (and how many came before it) and returns the raw reply, or ""
// to close the connection without one. reply runs under the server's
// mutex (one at a time).
type fakeServer struct {
	addr string
	mu   sync.Mutex
	reqs [][]string
}

func newFake(t *testing.T, reply func(args []string, n int) string) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{addr: l.Addr().String()}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(c, reply)
		}
	}()
	return f
}

func (f *fakeServer) serve(c net.Conn, reply func([]string, int) string) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		args, err := readRequest(br)
		if err != nil {
			return
		}
		// Replies are computed one at a time, so scripts may count.
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, args)
		r := reply(args, n)
		f.mu.Unlock()
		if r == "" {
			return
		}
		if _, err := io.WriteString(c, r); err != nil {
			return
		}
	}
}

func (f *fakeServer) requests() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.reqs...)
}

func readRequest(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("bad request %q %v", line, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	args := make([]string, n)
	for i := range args {
		h, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		m, _ := strconv.Atoi(strings.TrimSpace(h[1:]))
		buf := make([]byte, m+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:m])
	}
	return args, nil
}

func argAfter(args []string, word string) string {
	for i := range args[:len(args)-1] {
		if args[i] == word {
			return args[i+1]
		}
	}
	return ""
}

// A LEASE.GRANT whose first attempt loses its connection and whose second
// gets TRYAGAIN is sent a third time, all three with the same REQID.
func TestRetrySameReqID(t *testing.T) {
	grants := 0
	f := newFake(t, func(args []string, n int) string {
		switch args[0] {
		case "LEASE.GRANT":
			grants++
			switch grants {
			case 1:
				return "" // the reply is lost with the connection
			case 2:
				return "-TRYAGAIN no leader is elected yet; retry shortly\r\n"
			}
			return ":7\r\n"
		case "LEASE.KEEPALIVE":
			return ":5000\r\n"
		case "LEASE.REVOKE":
			return "+OK\r\n"
		}
		return "-ERR unknown\r\n"
	})
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{Servers: []string{f.addr}})
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if s.Lease() != 7 {
		t.Fatalf("lease %d", s.Lease())
	}
	s.Close(ctx)
	var ids []string
	for _, r := range f.requests() {
		if r[0] == "LEASE.GRANT" {
			ids = append(ids, argAfter(r, "REQID"))
		}
	}
	if len(ids) != 3 || ids[0] == "" || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("REQIDs of the attempts: %q, want three equal ones", ids)
	}
}

// NOTLEADER moves the client to the leader it names.
func TestNotLeaderFollow(t *testing.T) {
	leader := newFake(t, func(args []string, n int) string { return "+PONG\r\n" })
	follower := newFake(t, func(args []string, n int) string {
		return "-NOTLEADER " + leader.addr + "\r\n"
	})
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{Servers: []string{follower.addr}})
	for i := 0; i < 3; i++ {
		if err := c.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(follower.requests()); n != 1 {
		t.Fatalf("the follower got %d requests, want 1 (the leader is kept)", n)
	}
	if n := len(leader.requests()); n != 3 {
		t.Fatalf("the leader got %d requests, want 3", n)
	}
}

// A follower that never names a leader: the call ends at its deadline
// with ErrNotLeader.
func TestNotLeaderDeadline(t *testing.T) {
	f := newFake(t, func(args []string, n int) string { return "-NOTLEADER\r\n" })
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{Servers: []string{f.addr}, Timeout: 300 * time.Millisecond})
	err := c.Ping(ctx)
	if !errors.Is(err, fence.ErrNotLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want ErrNotLeader and DeadlineExceeded", err)
	}
}

// A nil that comes clearly before the wait is up (a cancelled wait, after
// a reset connection) is asked again with a fresh REQID.
func TestEarlyNilAskedAgain(t *testing.T) {
	f := newFake(t, func(args []string, n int) string {
		switch args[0] {
		case "LEASE.GRANT":
			return ":3\r\n"
		case "LEASE.KEEPALIVE":
			return ":5000\r\n"
		case "LEASE.REVOKE":
			return "+OK\r\n"
		case "LOCK":
			if n < 2 {
				return "$-1\r\n"
			}
			return ":11\r\n"
		}
		return "-ERR unknown\r\n"
	})
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{Servers: []string{f.addr}})
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	m := fence.NewMutex(s, "x")
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.Lock(lctx); err != nil || m.Token().Value != 11 {
		t.Fatalf("Lock: %v token %v", err, m.Token())
	}
	var ids []string
	for _, r := range f.requests() {
		if r[0] == "LOCK" {
			ids = append(ids, argAfter(r, "REQID"))
			if w, _ := strconv.Atoi(argAfter(r, "WAIT")); w < 1000 {
				t.Errorf("LOCK asked to wait %d ms", w)
			}
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("LOCK REQIDs %q: want two different ones", ids)
	}
}

// A server that sends a reply of the wrong shape: ErrProtocol, no retry.
func TestBadReplyShape(t *testing.T) {
	f := newFake(t, func(args []string, n int) string {
		if args[0] == "ACQUIRE" {
			return "*3\r\n:1\r\n:2\r\n:3\r\n"
		}
		return "+OK\r\n"
	})
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{Servers: []string{f.addr}})
	if _, err := c.Acquire(ctx, "x", fence.AcquireOptions{}); !errors.Is(err, fence.ErrProtocol) {
		t.Fatalf("%v, want ErrProtocol", err)
	}
	f2 := newFake(t, func(args []string, n int) string { return "!3\r\nabc\r\n" })
	c2 := newClient(t, fence.Options{Servers: []string{f2.addr}})
	if err := c2.Ping(ctx); !errors.Is(err, fence.ErrProtocol) {
		t.Fatalf("unknown reply type: %v, want ErrProtocol", err)
	}
	if n := len(f2.requests()); n != 1 {
		t.Fatalf("a protocol error was retried: %d requests", n)
	}
}

// An idle pooled connection that the server closed (a restart, an idle
// timeout) is replaced at once, without the backoff.
func TestStaleIdleConnection(t *testing.T) {
	var f *fakeServer
	f = newFake(t, func(args []string, n int) string {
		if n == 1 {
			return "" // the second request finds the first connection closed
		}
		return "+PONG\r\n"
	})
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{Servers: []string{f.addr}, BackoffMin: 2 * time.Second, BackoffMax: 2 * time.Second})
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("the reconnect waited %v (a backoff)", d)
	}
}

// -LIMIT to the AUTH of a new connection (the server's --max-clients) is
// retried; it is not a refused login.
func TestAuthLimitRetried(t *testing.T) {
	f := newFake(t, func(args []string, n int) string {
		if args[0] == "AUTH" && n == 0 {
			return "-LIMIT max clients (10) reached\r\n"
		}
		if args[0] == "AUTH" {
			return "+OK\r\n"
		}
		return "+PONG\r\n"
	})
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{Servers: []string{f.addr}, User: "u", Password: "p"})
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("%v, want success after the retry", err)
	}
	bad := newFake(t, func(args []string, n int) string {
		return "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	})
	c2 := newClient(t, fence.Options{Servers: []string{bad.addr}, User: "u", Password: "secret-Qz"})
	err := c2.Ping(ctx)
	var se *fence.ServerError
	if !errors.Is(err, fence.ErrAuth) || !errors.As(err, &se) || se.Code != "WRONGPASS" || strings.Contains(err.Error(), "secret-Qz") {
		t.Fatalf("%v, want ErrAuth with WRONGPASS and no password", err)
	}
	if n := len(bad.requests()); n != 1 {
		t.Fatalf("a refused login was retried: %d AUTHs", n)
	}
}
