package fence

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AcquireOptions configure Client.Acquire, AcquireMulti and AcquireSlot.
type AcquireOptions struct {
	// TTL of the lock's lease (default 10 s).
	TTL time.Duration
	// Wait for the lock this long (0: try once). Up to TTL/2 it is one
	// round trip (ACQUIRE); longer, a lease is granted and kept alive
	// while LOCK ... WAIT is queued, as libfence does.
	Wait time.Duration
	// Signed asks for a signed token (see Signed; not for AcquireMulti).
	Signed bool
	// Shared takes a shared (read) hold (see Shared; Acquire only).
	Shared bool
}

// Lock is a lock taken with Client.Acquire or AcquireMulti, with a lease
// of its own kept alive in the background (as libfence's fence_lock).
// Release it once.
type Lock struct {
	c      *Client
	names  []string // one, or a multi-lock's
	token  Token
	s      *Session
	own    bool // s was granted by LEASE.GRANT (Release revokes it)
	shared bool
	once   sync.Once
}

func (o *AcquireOptions) ttl() (string, error) {
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	return ttlMs(o.TTL)
}

// Acquire takes the lock name with a lease of its own, waiting up to
// o.Wait. ErrLocked when it was not granted in time.
func (c *Client) Acquire(ctx context.Context, name string, o AcquireOptions) (*Lock, error) {
	ms, err := o.ttl()
	if err != nil {
		return nil, err
	}
	if err := checkName("lock", name); err != nil {
		return nil, err
	}
	head := []string{"ACQUIRE", name, ms}
	if o.Shared {
		head = append(head, "SHARED")
	}
	return c.acquire(ctx, []string{name}, o, head, func(ctx context.Context, lease uint64, wait time.Duration) (Token, error) {
		return lockOn(ctx, c, lease, name, wait, o.Signed, o.Shared)
	})
}

// optionWords are the words that end a multi-lock's names on the server.
var optionWords = []string{"WAIT", "REQID", "LOCKDELAY", "SIGNED", "SHARED"}

// checkNames validates a multi-lock's names: 1..64 distinct names of
// 1..256 bytes, none spelled like an option word.
func checkNames(names []string) error {
	if len(names) == 0 || len(names) > 64 {
		return errors.New("fence: a multi-lock takes 1..64 names")
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if err := checkName("lock", n); err != nil {
			return err
		}
		for _, w := range optionWords {
			if strings.EqualFold(n, w) {
				return errors.New("fence: a multi-lock's name cannot be spelled like the option word " + w + " (take it with Lock)")
			}
		}
		if seen[n] {
			return errors.New("fence: a multi-lock names " + strconv.Quote(n) + " twice")
		}
		seen[n] = true
	}
	return nil
}

// lockMulti sends LOCK.MULTI lease name... [WAIT w] REQID id, waiting up
// to wait. ErrLocked when not granted.
func lockMulti(ctx context.Context, c *Client, lease uint64, names []string, wait time.Duration) (Token, error) {
	head := append([]string{"LOCK.MULTI", strconv.FormatUint(lease, 10)}, names...)
	v, err := waitCall(ctx, c, head, nil, wait)
	if err != nil {
		return Token{}, err
	}
	if v.Kind == KindNil {
		return Token{}, newErr(ErrLocked, strings.Join(names, " "), nil)
	}
	return parseToken(v, false)
}

// AcquireMulti takes every one of names (1..64, distinct), all or none,
// with one fencing token valid at each of them and a lease of its own
// (ACQUIRE.MULTI), waiting up to o.Wait; while it waits it holds none of
// them, and it cannot deadlock with other multi-locks whatever the order
// of the names. ErrLocked when not granted in time. Signed and Shared
// are not offered for multi-locks (the server has neither).
func (c *Client) AcquireMulti(ctx context.Context, names []string, o AcquireOptions) (*Lock, error) {
	ms, err := o.ttl()
	if err != nil {
		return nil, err
	}
	if o.Signed || o.Shared {
		return nil, errors.New("fence: multi-locks take neither Signed nor Shared")
	}
	if err := checkNames(names); err != nil {
		return nil, err
	}
	names = append([]string(nil), names...)
	head := append([]string{"ACQUIRE.MULTI", ms}, names...)
	return c.acquire(ctx, names, o, head, func(ctx context.Context, lease uint64, wait time.Duration) (Token, error) {
		return lockMulti(ctx, c, lease, names, wait)
	})
}

// acquire is Acquire and AcquireMulti: a wait up to TTL/2 is one round
// trip (head [WAIT ms] REQID id [SIGNED], answered [token, lease]); a
// longer one grants a lease, keeps it alive and calls onLease.
func (c *Client) acquire(ctx context.Context, names []string, o AcquireOptions, head []string,
	onLease func(ctx context.Context, lease uint64, wait time.Duration) (Token, error)) (*Lock, error) {
	if o.Wait > o.TTL/2 {
		s, err := NewSession(ctx, c, SessionOptions{TTL: o.TTL})
		if err != nil {
			return nil, err
		}
		tok, err := onLease(ctx, s.id, o.Wait)
		l := &Lock{c: c, names: names, token: tok, s: s, own: true, shared: o.Shared}
		if err == nil && s.Err() != nil {
			_, _ = l.unlock(ctx)
			err = newErr(ErrLeaseLost, "the lease was lost while waiting", s.Err())
		}
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			_ = s.Close(cctx)
			cancel()
			return nil, err
		}
		return l, nil
	}
	sent := time.Now()
	v, err := waitCall(ctx, c, head, signedTail(o.Signed), o.Wait)
	if err != nil {
		return nil, err
	}
	if v.Kind == KindNil {
		return nil, newErr(ErrLocked, strings.Join(names, " "), nil)
	}
	if v.Kind != KindArray || len(v.Array) != 2 || v.Array[1].Kind != KindInt || v.Array[1].Int <= 0 {
		return nil, protoErr("%s reply %s", head[0], v)
	}
	tok, err := parseToken(v.Array[0], o.Signed)
	if err != nil {
		return nil, err
	}
	s := startSession(c, uint64(v.Array[1].Int), o.TTL, sent, false)
	return &Lock{c: c, names: names, token: tok, s: s, shared: o.Shared}, nil
}

// Name is the lock's name (a multi-lock's first name).
func (l *Lock) Name() string { return l.names[0] }

// Names are the lock's names: one, or every name of a multi-lock (the
// token is valid at each of their fences).
func (l *Lock) Names() []string { return append([]string(nil), l.names...) }

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

// unlock sends the UNLOCK of the hold: by token (a multi-lock: any one
// name releases all), with LEASE for a shared one.
func (l *Lock) unlock(ctx context.Context) (bool, error) {
	if l.shared {
		return unlockLease(ctx, l.c, l.names[0], l.token, l.s.id)
	}
	return unlock(ctx, l.c, l.names[0], l.token)
}

// Release stops the keepalive and unlocks (UNLOCK, which revokes an
// ACQUIRE's dedicated lease; else LEASE.REVOKE too; a multi-lock's every
// name). ErrNotHeld when the lock had moved on. Only the first call does
// anything.
func (l *Lock) Release(ctx context.Context) error {
	err := newErr(ErrClosed, "released already", nil)
	l.once.Do(func() {
		l.s.stop(newErr(ErrClosed, "lock released", nil))
		var ok bool
		ok, err = l.unlock(ctx)
		if l.own {
			if _, rerr := l.c.do(ctx, l.c.calls, []string{"LEASE.REVOKE", strconv.FormatUint(l.s.id, 10)}, 0); err == nil {
				err = rerr
			}
		}
		if err == nil && !ok {
			err = newErr(ErrNotHeld, l.names[0]+": the lock had moved on", nil)
		}
	})
	return err
}
