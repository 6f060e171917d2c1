package fence_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	fence "fenced/client"
)

// leaseReplies answers the session's commands of a fake server.
func leaseReplies(args []string) (string, bool) {
	switch args[0] {
	case "LEASE.GRANT":
		return ":3\r\n", true
	case "LEASE.KEEPALIVE":
		return ":5000\r\n", true
	case "LEASE.REVOKE":
		return "+OK\r\n", true
	}
	return "", false
}

// Every kind's creating request: a lost reply is retried with the same
// REQID (applied once), and an early nil (a cancelled wait) is asked again
// with a fresh one.
func TestKindsReqID(t *testing.T) {
	kinds := []struct {
		cmd, grant string
		run        func(ctx context.Context, s *fence.Session) (uint64, error)
	}{
		{"ELECTION.CAMPAIGN", "*2\r\n:11\r\n:3\r\n", func(ctx context.Context, s *fence.Session) (uint64, error) {
			e := fence.NewElection(s, "e")
			err := e.Campaign(ctx, []byte("me"))
			return e.Token().Value, err
		}},
		{"SEM.ACQUIRE", "*2\r\n:1\r\n:11\r\n", func(ctx context.Context, s *fence.Session) (uint64, error) {
			p, err := fence.NewSemaphore(s, "jobs", 4).Acquire(ctx)
			if err != nil {
				return 0, err
			}
			return p.Token().Value, nil
		}},
		{"LOCK.MULTI", ":11\r\n", func(ctx context.Context, s *fence.Session) (uint64, error) {
			m := fence.NewMulti(s, "a", "b")
			err := m.Lock(ctx)
			return m.Token().Value, err
		}},
		{"LOCK", ":11\r\n", func(ctx context.Context, s *fence.Session) (uint64, error) {
			m := fence.NewMutex(s, "r", fence.Shared())
			err := m.Lock(ctx)
			return m.Token().Value, err
		}},
	}
	for _, k := range kinds {
		k := k
		t.Run(k.cmd, func(t *testing.T) {
			sent := 0
			f := newFake(t, func(args []string, n int) string {
				if r, ok := leaseReplies(args); ok {
					return r
				}
				if args[0] != k.cmd {
					return "-ERR unknown\r\n"
				}
				sent++
				switch sent {
				case 1:
					return "" // lost with the connection
				case 2:
					return "-TRYAGAIN not ready\r\n"
				case 3:
					return "$-1\r\n" // the early nil of a cancelled wait
				}
				return k.grant
			})
			ctx := ctxT(t, 10*time.Second)
			c := newClient(t, fence.Options{Servers: []string{f.addr}})
			s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			tok, err := k.run(lctx, s)
			if err != nil || tok != 11 {
				t.Fatalf("token %d, %v", tok, err)
			}
			var ids []string
			for _, r := range f.requests() {
				if r[0] == k.cmd {
					ids = append(ids, argAfter(r, "REQID"))
					if w, _ := strconv.Atoi(argAfter(r, "WAIT")); w < 1000 {
						t.Errorf("%s asked to wait %d ms", k.cmd, w)
					}
					if k.cmd == "LOCK" && r[3] != "SHARED" {
						t.Errorf("a shared LOCK without SHARED: %q", r)
					}
				}
			}
			if len(ids) != 4 || ids[0] == "" || ids[0] != ids[1] || ids[1] != ids[2] || ids[2] == ids[3] {
				t.Fatalf("REQIDs %q: want the first three equal, the fourth fresh", ids)
			}
		})
	}
}

// The observer passes AFTER its last revision on every request, asks
// again after a nil (nothing changed) and after a lost connection, and
// never delivers a state older than one it delivered (a lagging node).
func TestObserveNeverBack(t *testing.T) {
	f := newFake(t, func(args []string, n int) string {
		if args[0] != "ELECTION.OBSERVE" {
			return "-ERR unknown\r\n"
		}
		switch n + 1 {
		case 1:
			return "*4\r\n$1\r\na\r\n:7\r\n:3\r\n:5\r\n"
		case 2:
			return "$-1\r\n" // the wait ran out
		case 3:
			return "" // lost connection
		case 4:
			return "*4\r\n$1\r\nx\r\n:6\r\n:2\r\n:4\r\n" // a lagging node: revision 4 < 5
		case 5:
			return "*4\r\n$-1\r\n:0\r\n:0\r\n:9\r\n" // nobody leads
		}
		return "$-1\r\n"
	})
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{Servers: []string{f.addr}, BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond})
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := c.ObserveElection(octx, "e", 0)
	a := next(t, o)
	b := next(t, o)
	if string(a.Value) != "a" || a.Token != 7 || a.Lease != 3 || a.Revision != 5 {
		t.Fatalf("first state %+v", a)
	}
	if b.HasLeader() || b.Value != nil || b.Revision != 9 {
		t.Fatalf("second state %+v, want nobody leading at revision 9", b)
	}
	cancel()
	for range o.C {
	}
	var afters []string
	for _, r := range f.requests() {
		afters = append(afters, argAfter(append(r, ""), "AFTER"))
	}
	want := []string{"", "5", "5", "5", "5"}
	for i, w := range want {
		if afters[i] != w {
			t.Fatalf("AFTERs %q, want %q first", afters, want)
		}
	}
}
