package fence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	fence "fenced/client"
)

func newClient(t *testing.T, o fence.Options) *fence.Client {
	t.Helper()
	c, err := fence.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestMutexLockUnlock(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	c := newClient(t, fence.Options{})
	s1, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close(ctx)
	s2, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	if !s1.Valid() || time.Until(s1.ValidUntil()) > 5*time.Second {
		t.Fatalf("valid-until %v not within the TTL", time.Until(s1.ValidUntil()))
	}
	m1 := fence.NewMutex(s1, "t-mutex")
	m2 := fence.NewMutex(s2, "t-mutex")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	t1 := m1.Token()
	if t1.IsZero() {
		t.Fatal("no token")
	}
	if err := m2.TryLock(ctx); !errors.Is(err, fence.ErrLocked) {
		t.Fatalf("TryLock of a held lock: %v, want ErrLocked", err)
	}
	// Lock with a deadline that passes while queued.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = m2.Lock(short)
	cancel()
	if !errors.Is(err, fence.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline: %v, want ErrLocked and DeadlineExceeded", err)
	}
	// A queued Lock is granted when the holder unlocks.
	got := make(chan error, 1)
	go func() { got <- m2.Lock(ctx) }()
	time.Sleep(50 * time.Millisecond) // let it queue; correctness does not depend on it
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if t2 := m2.Token(); t2.Value <= t1.Value {
		t.Fatalf("token %d after %d: not increasing", t2.Value, t1.Value)
	}
	if err := m1.Unlock(ctx); !errors.Is(err, fence.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLockCancelled(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	c := newClient(t, fence.Options{})
	s1, _ := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
	s2, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close(ctx)
	defer s2.Close(ctx)
	m1, m2 := fence.NewMutex(s1, "t-cancel"), fence.NewMutex(s2, "t-cancel")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- m2.Lock(cctx) }()
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	cancel()
	err = <-got
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, want context.Canceled", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("cancel took %v", d)
	}
	// The cancelled wait left nothing queued: after Unlock the lock is free.
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, "LOCK.INFO", "t-cancel")
	if err != nil || v.Kind != fence.KindNil {
		t.Fatalf("LOCK.INFO after cancel+unlock: %v %v, want nil", v, err)
	}
}

func TestAcquireRelease(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	c := newClient(t, fence.Options{})
	l, err := c.Acquire(ctx, "t-acq", fence.AcquireOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "t-acq", fence.AcquireOptions{TTL: time.Second}); !errors.Is(err, fence.ErrLocked) {
		t.Fatalf("second Acquire: %v, want ErrLocked", err)
	}
	// Kept alive past several TTLs.
	first := l.ValidUntil()
	deadline := time.Now().Add(5 * time.Second)
	for !l.ValidUntil().After(first.Add(900*time.Millisecond)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-l.Done():
		t.Fatalf("lease lost: %v", l.Err())
	default:
	}
	if !l.ValidUntil().After(first.Add(900 * time.Millisecond)) {
		t.Fatal("valid-until did not move: no keepalive")
	}
	// A waiter longer than TTL/2 goes through LEASE.GRANT + LOCK WAIT.
	got := make(chan *fence.Lock, 1)
	go func() {
		l2, err := c.Acquire(ctx, "t-acq", fence.AcquireOptions{TTL: 600 * time.Millisecond, Wait: 5 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	// Hold it for several of the waiter's TTLs: its lease must be kept
	// alive while its LOCK ... WAIT is queued.
	time.Sleep(1500 * time.Millisecond)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	if l2.Token().Value <= l.Token().Value {
		t.Fatal("token not increasing")
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l2.Release(ctx); !errors.Is(err, fence.ErrClosed) {
		t.Fatalf("second Release: %v", err)
	}
}

func TestSessionCloseRevokes(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	c := newClient(t, fence.Options{})
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := fence.NewMutex(s, "t-close")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if !errors.Is(s.Err(), fence.ErrClosed) {
		t.Fatalf("Err after Close: %v", s.Err())
	}
	if _, err := c.Do(ctx, "LEASE.KEEPALIVE", strconv.FormatUint(s.Lease(), 10)); !errors.Is(err, fence.ErrNoLease) || !errors.Is(err, fence.ErrLeaseLost) {
		t.Fatalf("keepalive of a revoked lease: %v, want NOLEASE", err)
	}
	var se *fence.ServerError
	_, err = c.Do(ctx, "LEASE.KEEPALIVE", strconv.FormatUint(s.Lease(), 10))
	if !errors.As(err, &se) || se.Code != "NOLEASE" || se.Message == "" {
		t.Fatalf("ServerError not carrying the server's message: %#v", err)
	}
	if err := m.TryLock(ctx); !errors.Is(err, fence.ErrClosed) {
		t.Fatalf("TryLock on a closed session: %v", err)
	}
}

// A lease the server forgets (revoked behind the session's back) closes
// Done with an error matching ErrLeaseLost.
func TestSessionLost(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	c := newClient(t, fence.Options{})
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "LEASE.REVOKE", strconv.FormatUint(s.Lease(), 10)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("Done not closed after the lease was revoked")
	}
	if !errors.Is(s.Err(), fence.ErrLeaseLost) || !s.ValidUntil().IsZero() {
		t.Fatalf("Err %v, ValidUntil %v", s.Err(), s.ValidUntil())
	}
}

func TestSignedTokens(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	dir := t.TempDir()
	fencectl := binPath("FENCECTL_BIN", "fencectl")
	if out, err := execOut(fencectl, "keygen", dir); err != nil {
		t.Skipf("fencectl keygen: %v %s", err, out)
	}
	f := startFenced(t, "--token-signing-key", dir+"/signing.key")
	st := startStore(t, "--token-verify-keys", dir+"/verify.keys")
	c := newClient(t, fence.Options{Servers: []string{f.addr}})
	l, err := c.Acquire(ctx, "t-signed", fence.AcquireOptions{Signed: true})
	if err != nil {
		t.Fatal(err)
	}
	tok := l.Token()
	if tok.Signed == "" || tok.String() != tok.Signed || tok.Value == 0 {
		t.Fatalf("signed token %#v", tok)
	}
	s, _ := fence.OpenStore(fence.StoreOptions{Addr: st.addr})
	defer s.Close()
	if err := s.Set(ctx, "t-signed", tok, "k", []byte("v")); err != nil {
		t.Fatalf("FSET with the signed token: %v", err)
	}
	// The bare number is refused by a verifying store.
	if err := s.Set(ctx, "t-signed", fence.Token{Value: tok.Value}, "k", []byte("v")); !errors.Is(err, fence.ErrBadToken) {
		t.Fatalf("FSET with the bare number: %v, want ErrBadToken", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Session + Mutex, signed.
	sess, err := fence.NewSession(ctx, c, fence.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	m := fence.NewMutex(sess, "t-signed", fence.Signed())
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if m.Token().Signed == "" || m.Token().Value <= tok.Value {
		t.Fatalf("mutex signed token %#v", m.Token())
	}
	if err := s.Set(ctx, "t-signed", m.Token(), "k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// An election and a semaphore's slot, signed for their fence names.
	e := fence.NewElection(sess, "t-signed-elect", fence.Signed())
	if err := e.Campaign(ctx, []byte("me")); err != nil {
		t.Fatal(err)
	}
	if e.Token().Signed == "" {
		t.Fatalf("election signed token %#v", e.Token())
	}
	if err := s.Set(ctx, e.Name(), e.Token(), "ke", []byte("v")); err != nil {
		t.Fatalf("FSET with the leader's signed token: %v", err)
	}
	if _, err := e.Proclaim(ctx, []byte("me too")); err != nil {
		t.Fatal(err)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := c.AcquireSlot(ctx, "t-signed-sem", 3, fence.AcquireOptions{Signed: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, p.Name(), p.Token(), "ks", []byte("v")); err != nil {
		t.Fatalf("FSET %s with the slot's signed token: %v", p.Name(), err)
	}
	// Signed for name#slot: not valid at the semaphore's name.
	if err := s.Set(ctx, "t-signed-sem", p.Token(), "ks", []byte("v")); !errors.Is(err, fence.ErrBadToken) {
		t.Fatalf("a slot's signed token at the semaphore's name: %v, want ErrBadToken", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestStore(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	s, err := fence.OpenStore(fence.StoreOptions{Addr: os.Getenv("FENCE_STORE")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Names of this run only (go test -count=N reuses the store).
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	fn, fo, k, missing, kn := "t-store."+run, "t-store-other."+run, "t-store-k."+run, "t-store-missing."+run, "t-store-n."+run
	if err := s.Admit(ctx, fn, fence.Token{Value: 10}); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, fn, fence.Token{Value: 10}, k, []byte("a\r\nb")); err != nil {
		t.Fatal(err)
	}
	v, ok, err := s.Get(ctx, k)
	if err != nil || !ok || string(v) != "a\r\nb" {
		t.Fatalf("FGET: %q %v %v", v, ok, err)
	}
	if _, ok, err := s.Get(ctx, missing); ok || err != nil {
		t.Fatalf("FGET missing: %v %v", ok, err)
	}
	err = s.Set(ctx, fn, fence.Token{Value: 9}, k, []byte("x"))
	var se *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) || se.Token != 9 || se.Highest != 10 {
		t.Fatalf("stale FSET: %#v", err)
	}
	if err := s.Admit(ctx, fn, fence.Token{Value: 8}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale FENCE.ADMIT: %v", err)
	}
	err = s.Set(ctx, fo, fence.Token{Value: 99}, k, []byte("x"))
	var sv *fence.ServerError
	if !errors.Is(err, fence.ErrWrongFence) || !errors.As(err, &sv) || sv.Code != "WRONGFENCE" {
		t.Fatalf("FSET through another fence: %#v", err)
	}
	if n, err := s.Incr(ctx, fn, fence.Token{Value: 11}, kn); err != nil || n != 1 {
		t.Fatalf("FINCR: %d %v", n, err)
	}
	if h, err := s.High(ctx, fn); err != nil || h != 11 {
		t.Fatalf("FENCE.HIGH: %d %v", h, err)
	}
	if ok, err := s.Del(ctx, fn, fence.Token{Value: 11}, kn); err != nil || !ok {
		t.Fatalf("FDEL: %v %v", ok, err)
	}
	if v, _, _ := s.Get(ctx, k); string(v) != "a\r\nb" {
		t.Fatalf("value changed by refused writes: %q", v)
	}
}

type fixedHolder struct{ tok fence.Token }

func (f fixedHolder) Name() string       { return "orders" }
func (f fixedHolder) Token() fence.Token { return f.tok }

func TestTransport(t *testing.T) {
	var gotLock, gotToken string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotLock, gotToken = r.Header.Get("Fencing-Lock"), r.Header.Get("Fencing-Token")
		if gotToken == "3" {
			w.Header().Set("Fencing-Highest", "7")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, "STALE 3 7 token 3 is older than the fence's highest (7)\n")
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &fence.Transport{Holder: fixedHolder{fence.Token{Value: 7, Signed: "7.k1.abc"}}}}
	req, _ := http.NewRequest("PUT", srv.URL+"/x", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if gotLock != "orders" || gotToken != "7.k1.abc" {
		t.Fatalf("headers %q %q", gotLock, gotToken)
	}
	if req.Header.Get("Fencing-Token") != "" {
		t.Fatal("the caller's request was modified")
	}
	hc.Transport = &fence.Transport{Holder: fixedHolder{fence.Token{Value: 3}}}
	resp, err = hc.Post(srv.URL+"/x", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	perr := fence.ProxyError(resp, body)
	var se *fence.StaleError
	if !errors.As(perr, &se) || se.Highest != 7 || se.Token != 3 {
		t.Fatalf("ProxyError: %#v", perr)
	}
	hc.Transport = &fence.Transport{Holder: fixedHolder{}}
	if _, err := hc.Get(srv.URL); !errors.Is(err, fence.ErrNotHeld) {
		t.Fatalf("request without a token: %v", err)
	}
}

// REQID: a LEASE.GRANT retried with the same id is applied once; the
// library reuses the id on every retry of one call.
func TestReqIDDedup(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{})
	a, err := c.Do(ctx, "LEASE.GRANT", "5000", "REQID", "4242")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Do(ctx, "LEASE.GRANT", "5000", "REQID", "4242")
	if err != nil || a.Int != b.Int {
		t.Fatalf("same REQID granted %v then %v (%v)", a, b, err)
	}
	c.Do(ctx, "LEASE.REVOKE", fmt.Sprint(a.Int))
}

func TestUnreachable(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, fence.Options{Servers: []string{fmt.Sprintf("127.0.0.1:%d", freePort()),
		fmt.Sprintf("127.0.0.1:%d", freePort())}})
	t0 := time.Now()
	err := c.Ping(ctx)
	if !errors.Is(err, fence.ErrUnreachable) {
		t.Fatalf("Ping of nothing: %v", err)
	}
	if time.Since(t0) > 3*time.Second {
		t.Fatalf("took %v: refused servers are not retried until the deadline", time.Since(t0))
	}
}

func TestUnixSocket(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	sock := filepath.Join(t.TempDir(), "fenced.sock")
	startFenced(t, "--unix-socket", sock)
	c := newClient(t, fence.Options{Servers: []string{"unix:" + sock}})
	l, err := c.Acquire(ctx, "t-unix", fence.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
