package fence

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// MutexOption configures NewMutex.
type MutexOption func(*Mutex)

// Signed makes the Mutex ask for signed tokens (LOCK ... SIGNED; fenced
// needs --token-signing-key). Token().String() is then the signed string,
// to be passed to the resource unchanged.
func Signed() MutexOption { return func(m *Mutex) { m.signed = true } }

// Mutex is a lock held by a Session's lease, as etcd's concurrency.Mutex:
// it is held until Unlock, the session's Close, or the lease's loss
// (Session.Done). Safe for concurrent use, but Lock/Unlock pair up as with
// sync.Mutex: one holder at a time per Mutex value.
type Mutex struct {
	s      *Session
	name   string
	signed bool

	mu    sync.Mutex
	token Token
}

// NewMutex returns a Mutex for the lock name (1..256 bytes) on session s.
func NewMutex(s *Session, name string, opts ...MutexOption) *Mutex {
	m := &Mutex{s: s, name: name}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Name is the lock's name (use it as the fence name at the resource).
func (m *Mutex) Name() string { return m.name }

// Token is the fencing token of the current hold, the zero Token when not
// held. Pass it with every write to the resource.
func (m *Mutex) Token() Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

// Session is the session whose lease holds the lock.
func (m *Mutex) Session() *Session { return m.s }

// Lock waits for the lock until ctx is done (LOCK ... WAIT, queued FIFO on
// the server, while the session keeps the lease alive). It returns an
// error matching ctx's error (and ErrLocked) when ctx ends first, and
// ErrLeaseLost when the session's lease is lost.
func (m *Mutex) Lock(ctx context.Context) error {
	for {
		if err := m.s.Err(); err != nil {
			return err
		}
		wait := waitFor(ctx)
		if wait < time.Millisecond {
			if err := ctx.Err(); err != nil {
				return newErr(ErrLocked, m.name, err)
			}
			return newErr(ErrLocked, m.name, context.DeadlineExceeded)
		}
		tok, err := lockOn(ctx, m.s.c, m.s.id, m.name, wait, m.signed)
		if err == nil {
			return m.granted(tok)
		}
		if ctx.Err() != nil {
			// The reply may have been a grant that we never read: if the
			// lock is ours now, give it back.
			m.cleanup()
			return newErr(ErrLocked, m.name, err)
		}
		if !isLocked(err) {
			return err
		}
		if _, ok := ctx.Deadline(); ok {
			// The wait ran out: the deadline is (nearly) here.
			<-ctx.Done()
			return newErr(ErrLocked, m.name, ctx.Err())
		}
	}
}

func isLocked(err error) bool {
	w, ok := err.(*wrapErr)
	return ok && w.kind == ErrLocked
}

// granted records a grant, unless the lease was lost meanwhile (then the
// grant is undone and ErrLeaseLost returned).
func (m *Mutex) granted(tok Token) error {
	if err := m.s.Err(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.s.c.timeout)
		_, _ = unlock(ctx, m.s.c, m.name, tok)
		cancel()
		return newErr(ErrLeaseLost, "the lease was lost while waiting", err)
	}
	m.mu.Lock()
	m.token = tok
	m.mu.Unlock()
	return nil
}

// cleanup unlocks the lock if the session's lease holds it (after a Lock
// that was cancelled with its request in flight).
func (m *Mutex) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), m.s.c.timeout)
	defer cancel()
	v, err := m.s.c.do(ctx, m.s.c.calls, []string{"LOCK.INFO", m.name}, 0)
	if err != nil || v.Kind != KindArray || len(v.Array) < 2 {
		return
	}
	if v.Array[1].Kind == KindInt && uint64(v.Array[1].Int) == m.s.id && v.Array[0].Kind == KindInt {
		_, _ = unlock(ctx, m.s.c, m.name, Token{Value: uint64(v.Array[0].Int)})
	}
}

// TryLock takes the lock if it is free (LOCK without WAIT): ErrLocked if
// someone else holds it.
func (m *Mutex) TryLock(ctx context.Context) error {
	if err := m.s.Err(); err != nil {
		return err
	}
	tok, err := lockOn(ctx, m.s.c, m.s.id, m.name, 0, m.signed)
	if err != nil {
		return err
	}
	return m.granted(tok)
}

// Unlock releases the lock (UNLOCK name token; safe to retry, and a stale
// holder cannot release its successor). ErrNotHeld when it was not held,
// or had moved on (the lease was lost and someone else got it).
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	tok := m.token
	m.mu.Unlock()
	if tok.IsZero() {
		return newErr(ErrNotHeld, m.name, nil)
	}
	ok, err := unlock(ctx, m.s.c, m.name, tok)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.token == tok {
		m.token = Token{}
	}
	m.mu.Unlock()
	if !ok {
		return newErr(ErrNotHeld, m.name+": the lock had moved on", nil)
	}
	return nil
}

// AcquireOptions configure Client.Acquire.
type AcquireOptions struct {
	// TTL of the lock's lease (default 10 s).
	TTL time.Duration
	// Wait for the lock this long (0: try once). Up to TTL/2 it is one
	// round trip (ACQUIRE); longer, a lease is granted and kept alive
	// while LOCK ... WAIT is queued, as libfence does.
	Wait time.Duration
	// Signed asks for a signed token (see Signed).
	Signed bool
}

// Lock is a lock taken with Client.Acquire, with a lease of its own kept
// alive in the background (as libfence's fence_lock). Release it once.
type Lock struct {
	c     *Client
	name  string
	token Token
	s     *Session
	own   bool // s was granted by LEASE.GRANT (Release revokes it)
	once  sync.Once
}

// Acquire takes the lock name with a lease of its own, waiting up to
// o.Wait. ErrLocked when it was not granted in time.
func (c *Client) Acquire(ctx context.Context, name string, o AcquireOptions) (*Lock, error) {
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	ms, err := ttlMs(o.TTL)
	if err != nil {
		return nil, err
	}
	if len(name) == 0 || len(name) > 256 {
		return nil, newErr(ErrProtocol, "lock name must be 1..256 bytes", nil)
	}
	if o.Wait > o.TTL/2 {
		s, err := NewSession(ctx, c, SessionOptions{TTL: o.TTL})
		if err != nil {
			return nil, err
		}
		tok, err := lockOn(ctx, c, s.id, name, o.Wait, o.Signed)
		if err == nil && s.Err() != nil {
			_, _ = unlock(ctx, c, name, tok)
			err = newErr(ErrLeaseLost, "the lease was lost while waiting", s.Err())
		}
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			_ = s.Close(cctx)
			cancel()
			return nil, err
		}
		return &Lock{c: c, name: name, token: tok, s: s, own: true}, nil
	}
	end := time.Now().Add(o.Wait)
	for {
		args := []string{"ACQUIRE", name, ms}
		left := time.Until(end)
		if o.Wait > 0 {
			w := left.Milliseconds()
			if w < 1 {
				return nil, newErr(ErrLocked, name, nil)
			}
			args = append(args, "WAIT", strconv.FormatInt(w, 10))
		}
		args = append(args, "REQID", newReqID())
		if o.Signed {
			args = append(args, "SIGNED")
		}
		sent := time.Now()
		v, err := c.do(ctx, c.calls, args, left)
		if err != nil {
			return nil, err
		}
		if v.Kind == KindNil {
			if o.Wait > 0 && time.Since(sent) < left-left/10-20*time.Millisecond {
				continue // a wait cancelled by a lost connection: ask again
			}
			return nil, newErr(ErrLocked, name, nil)
		}
		if v.Kind != KindArray || len(v.Array) != 2 || v.Array[1].Kind != KindInt || v.Array[1].Int <= 0 {
			return nil, protoErr("ACQUIRE reply %s", v)
		}
		tok, err := parseToken(v.Array[0], o.Signed)
		if err != nil {
			return nil, err
		}
		s := startSession(c, uint64(v.Array[1].Int), o.TTL, sent, false)
		return &Lock{c: c, name: name, token: tok, s: s}, nil
	}
}

// Name is the lock's name.
func (l *Lock) Name() string { return l.name }

// Token is the lock's fencing token.
func (l *Lock) Token() Token { return l.token }

// Lease is the id of the lock's lease.
func (l *Lock) Lease() uint64 { return l.s.id }

// Done is closed when the lock's lease is lost (or the lock released).
func (l *Lock) Done() <-chan struct{} { return l.s.Done() }

// Err: nil while held, then why not (see Session.Err).
func (l *Lock) Err() error { return l.s.Err() }

// ValidUntil: see Session.ValidUntil (a liveness hint, never safety).
func (l *Lock) ValidUntil() time.Time { return l.s.ValidUntil() }

// Release stops the keepalive and unlocks (UNLOCK, which revokes an
// ACQUIRE's dedicated lease; else LEASE.REVOKE too). ErrNotHeld when the
// lock had moved on. Only the first call does anything.
func (l *Lock) Release(ctx context.Context) error {
	err := newErr(ErrClosed, "released already", nil)
	l.once.Do(func() {
		l.s.stop(newErr(ErrClosed, "lock released", nil))
		var ok bool
		ok, err = unlock(ctx, l.c, l.name, l.token)
		if l.own {
			if _, rerr := l.c.do(ctx, l.c.calls, []string{"LEASE.REVOKE", strconv.FormatUint(l.s.id, 10)}, 0); err == nil {
				err = rerr
			}
		}
		if err == nil && !ok {
			err = newErr(ErrNotHeld, l.name+": the lock had moved on", nil)
		}
	})
	return err
}
