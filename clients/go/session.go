package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Token is a fencing token: the number fenced granted and, for a lock
// taken with Signed, the signed token string, which must be passed to the
// resource unchanged (String does).
type Token struct {
	Value  uint64 // the decimal token
	Signed string // the signed token string ("34.k1.<signature>"), or ""
}

// String is what a resource is given: the signed string when there is
// one, else the decimal number.
func (t Token) String() string {
	if t.Signed != "" {
		return t.Signed
	}
	return strconv.FormatUint(t.Value, 10)
}

// IsZero reports whether t is no token (nothing held).
func (t Token) IsZero() bool { return t.Value == 0 && t.Signed == "" }

// parseToken reads a LOCK/ACQUIRE token reply: an integer, or with SIGNED
// a bulk string that starts with the decimal token and a dot.
func parseToken(v Value, signed bool) (Token, error) {
	switch {
	case v.Kind == KindInt && !signed && v.Int > 0:
		return Token{Value: uint64(v.Int)}, nil
	case v.Kind == KindBulk && signed:
		s := string(v.Str)
		i := strings.IndexByte(s, '.')
		if i > 0 && len(s) <= 1024 {
			n, err := strconv.ParseUint(s[:i], 10, 64)
			if err == nil && n > 0 {
				return Token{Value: n, Signed: s}, nil
			}
		}
	}
	return Token{}, protoErr("token reply %s", v)
}

// SessionOptions configure NewSession.
type SessionOptions struct {
	// TTL of the lease (10 ms .. 7 days; default 10 s). The lease is
	// renewed about every TTL/3.
	TTL time.Duration
	// LockDelay: after the lease expires (not when it is revoked), its
	// locks stay unavailable this long (LOCKDELAY; default the server's).
	LockDelay time.Duration
}

// Session is a lease kept alive in the background. Locks taken with it
// (Mutex) are held while the lease lives; Done is closed when it is lost.
// As etcd's concurrency.Session. Safe for concurrent use.
type Session struct {
	c      *Client
	id     uint64
	ttl    time.Duration
	margin time.Duration
	revoke bool // Close revokes the lease (false: UNLOCK does, ACQUIRE's)

	mu         sync.Mutex
	validUntil time.Time
	err        error
	done       chan struct{}
	ctx        context.Context
	cancel     context.CancelFunc
	timer      *time.Timer // the next renewal (time.AfterFunc: no goroutine until it fires)
	closed     bool
}

func ttlMs(ttl time.Duration) (string, error) {
	ms := ttl.Milliseconds()
	if ms < 10 || ms > 604800000 {
		return "", errors.New("fence: TTL must be 10 ms .. 7 days")
	}
	return strconv.FormatInt(ms, 10), nil
}

// NewSession grants a lease (LEASE.GRANT ttl REQID id, retried with the
// same id) and starts keeping it alive.
func NewSession(ctx context.Context, c *Client, o SessionOptions) (*Session, error) {
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	ms, err := ttlMs(o.TTL)
	if err != nil {
		return nil, err
	}
	args := []string{"LEASE.GRANT", ms}
	if o.LockDelay > 0 {
		args = append(args, "LOCKDELAY", strconv.FormatInt(o.LockDelay.Milliseconds(), 10))
	}
	args = append(args, "REQID", newReqID())
	sent := time.Now()
	v, err := c.do(ctx, c.calls, args, 0)
	if err != nil {
		return nil, err
	}
	if v.Kind != KindInt || v.Int <= 0 {
		return nil, protoErr("LEASE.GRANT reply %s", v)
	}
	return startSession(c, uint64(v.Int), o.TTL, sent, true), nil
}

// startSession starts the keepalive of a lease granted by a request sent at
// sent.
func startSession(c *Client, id uint64, ttl time.Duration, sent time.Time, revoke bool) *Session {
	margin := ttl/10 + 5*time.Millisecond
	if margin > ttl/2 {
		margin = ttl / 2
	}
	s := &Session{c: c, id: id, ttl: ttl, margin: margin, revoke: revoke,
		validUntil: sent.Add(ttl - margin), done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	s.timer = time.AfterFunc(ttl/3, s.renew)
	s.mu.Unlock()
	return s
}

// Lease is the lease id.
func (s *Session) Lease() uint64 { return s.id }

// TTL is the lease's time to live.
func (s *Session) TTL() time.Duration { return s.ttl }

// Done is closed when the lease is lost (or the session closed).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is nil while the lease lives; then why it ended: an error matching
// ErrLeaseLost (the server said NOLEASE, or valid-until passed without a
// renewal), or ErrClosed after Close.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// ValidUntil is when the lease may have expired on the server, at the
// latest: the send time of the granting or last successful renewing
// request, plus the TTL, minus a margin (TTL/10 + 5 ms, at most TTL/2).
// The zero time once the lease is known lost. A liveness hint, never a
// safety check: only the resource's token check is.
func (s *Session) ValidUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return time.Time{}
	}
	return s.validUntil
}

// Valid reports time.Now() before ValidUntil().
func (s *Session) Valid() bool { return time.Now().Before(s.ValidUntil()) }

// end records why the session ended and closes Done, once.
func (s *Session) end(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}

// renew is the keepalive, run by the session's timer: it renews the lease
// about every TTL/3; a failed renewal is retried every TTL/20 (at least
// 10 ms), never past valid-until. One renew runs at a time (the timer is
// re-armed at its end), and none after stop.
func (s *Session) renew() {
	if s.ctx.Err() != nil {
		return
	}
	vu := s.ValidUntil()
	if !time.Now().Before(vu) {
		s.end(newErr(ErrLeaseLost, "valid-until passed without a renewal", nil))
		return
	}
	next := s.ttl / 20
	if next < 10*time.Millisecond {
		next = 10 * time.Millisecond
	}
	sent := time.Now()
	ctx, cancel := context.WithDeadline(s.ctx, vu)
	v, err := s.c.do(ctx, s.c.kas, []string{"LEASE.KEEPALIVE", strconv.FormatUint(s.id, 10)}, 0)
	cancel()
	switch {
	case err == nil && v.Kind == KindInt:
		s.mu.Lock()
		if s.err == nil {
			// The reply is how long the lease is guaranteed from our send:
			// a cluster's leader answering without a log entry replies the
			// TTL minus its election timeout (docs/leases.md).
			granted := s.ttl
			if r := time.Duration(v.Int) * time.Millisecond; v.Int > 0 && r < granted {
				granted = r
			}
			s.validUntil = sent.Add(granted - s.margin)
		}
		s.mu.Unlock()
		next = s.ttl / 3
	case errors.Is(err, ErrNoLease):
		s.end(err)
		return
	}
	if left := time.Until(s.ValidUntil()); next > left && left > 0 {
		next = left
	}
	s.mu.Lock()
	if s.ctx.Err() == nil && s.err == nil {
		s.timer.Reset(next)
	}
	s.mu.Unlock()
}

// stop ends the keepalive (an in-flight renewal is cancelled, not waited
// for: it is harmless) and records err.
func (s *Session) stop(err error) {
	s.cancel()
	s.mu.Lock()
	s.timer.Stop()
	s.mu.Unlock()
	s.end(err)
}

// Close stops the keepalive and revokes the lease (LEASE.REVOKE), which
// releases its locks at once. Closing again does nothing.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stop(newErr(ErrClosed, "session closed", nil))
	if !s.revoke {
		return nil
	}
	_, err := s.c.do(ctx, s.c.calls, []string{"LEASE.REVOKE", strconv.FormatUint(s.id, 10)}, 0)
	return err
}

// waitCall sends head [WAIT ms] REQID id tail, asking the server to wait
// up to wait (0: try once), and returns the reply (KindNil when it was not
// granted in time). A nil that comes clearly before the wait is up can
// only be a wait cancelled by a lost connection (a retry got the
// cancelled wait's nil): it is asked again, with a fresh REQID, for the
// time left. A wait over 24 h is asked again at the end of each 24 h.
func waitCall(ctx context.Context, c *Client, head, tail []string, wait time.Duration) (Value, error) {
	end := time.Now().Add(wait)
	for {
		args := append([]string(nil), head...)
		left := time.Until(end)
		if wait > 0 {
			ms := left.Milliseconds()
			if ms < 1 {
				return Value{}, nil
			}
			if ms > 86400000 {
				ms = 86400000
			}
			left = time.Duration(ms) * time.Millisecond
			args = append(args, "WAIT", strconv.FormatInt(ms, 10))
		}
		args = append(args, "REQID", newReqID())
		args = append(args, tail...)
		t0 := time.Now()
		v, err := c.do(ctx, c.calls, args, left)
		if err != nil || v.Kind != KindNil || wait <= 0 {
			return v, err
		}
		early := time.Since(t0) < left-left/10-20*time.Millisecond
		if early || (time.Until(end) >= time.Millisecond && left < time.Until(end)) {
			continue
		}
		return v, nil
	}
}

func checkName(what, name string) error {
	if len(name) == 0 || len(name) > 256 {
		return fmt.Errorf("fence: %s name must be 1..256 bytes, not %d", what, len(name))
	}
	return nil
}

func signedTail(signed bool) []string {
	if signed {
		return []string{"SIGNED"}
	}
	return nil
}

// lockOn sends LOCK name lease [SHARED] [WAIT w] REQID id [SIGNED] and
// waits up to wait (0: try once). Returns ErrLocked when not granted.
func lockOn(ctx context.Context, c *Client, lease uint64, name string, wait time.Duration, signed, shared bool) (Token, error) {
	if err := checkName("lock", name); err != nil {
		return Token{}, err
	}
	head := []string{"LOCK", name, strconv.FormatUint(lease, 10)}
	if shared {
		head = append(head, "SHARED")
	}
	v, err := waitCall(ctx, c, head, signedTail(signed), wait)
	if err != nil {
		return Token{}, err
	}
	if v.Kind == KindNil {
		return Token{}, newErr(ErrLocked, name, nil)
	}
	return parseToken(v, signed)
}

// unlock sends UNLOCK name token; false when the lock had moved on.
func unlock(ctx context.Context, c *Client, name string, tok Token) (bool, error) {
	return unlockLease(ctx, c, name, tok, 0)
}

// unlockLease sends UNLOCK name token [LEASE lease] (lease 0: without);
// false when that hold was not there any more.
func unlockLease(ctx context.Context, c *Client, name string, tok Token, lease uint64) (bool, error) {
	args := []string{"UNLOCK", name, strconv.FormatUint(tok.Value, 10)}
	if lease != 0 {
		args = append(args, "LEASE", strconv.FormatUint(lease, 10))
	}
	v, err := c.do(ctx, c.calls, args, 0)
	if err != nil {
		return false, err
	}
	if v.Kind != KindInt {
		return false, protoErr("UNLOCK reply %s", v)
	}
	return v.Int == 1, nil
}

// waitFor is how long a Lock(ctx) asks the server to wait: until a little
// before ctx's deadline (so the reply arrives in time), else 24 h (asked
// again after).
func waitFor(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 24 * time.Hour
	}
	left := time.Until(d)
	m := left / 10
	if m > 200*time.Millisecond {
		m = 200 * time.Millisecond
	}
	return left - m
}
