package fence

import (
	"context"
	"sync"
	"time"
)

// Option configures NewMutex, NewElection and NewSemaphore.
type Option func(*options)

type options struct {
	signed bool
	shared bool
}

// MutexOption is Option's former name (NewMutex's options).
type MutexOption = Option

// Signed makes a Mutex, Election or Semaphore ask for signed tokens (...
// SIGNED; fenced needs --token-signing-key). Token().String() is then the
// signed string, to be passed to the resource unchanged.
func Signed() Option { return func(o *options) { o.signed = true } }

// Shared makes a Mutex take shared (read) holds: LOCK name lease SHARED,
// released with UNLOCK name token LEASE lease. The shared holders admitted
// together (one phase) carry one token; an exclusive Lock of the name
// waits until all of them have gone, and its token is higher, so it fences
// them all out at the resource (docs/recipes.md). A reader must not write
// through its shared token. Only for NewMutex.
func Shared() Option { return func(o *options) { o.shared = true } }

func applyOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// Mutex is a lock held by a Session's lease, as etcd's concurrency.Mutex:
// it is held until Unlock, the session's Close, or the lease's loss
// (Session.Done). Safe for concurrent use, but Lock/Unlock pair up as with
// sync.Mutex: one holder at a time per Mutex value. With Shared, its holds
// are shared (read) ones.
type Mutex struct {
	s      *Session
	name   string
	signed bool
	shared bool

	mu    sync.Mutex
	token Token
}

// NewMutex returns a Mutex for the lock name (1..256 bytes) on session s.
func NewMutex(s *Session, name string, opts ...Option) *Mutex {
	o := applyOptions(opts)
	return &Mutex{s: s, name: name, signed: o.signed, shared: o.shared}
}

// Name is the lock's name (use it as the fence name at the resource).
func (m *Mutex) Name() string { return m.name }

// Shared reports whether the Mutex takes shared (read) holds.
func (m *Mutex) Shared() bool { return m.shared }

// Token is the fencing token of the current hold, the zero Token when not
// held. Pass it with every write to the resource (with Shared: with every
// read; the holders of one phase share it).
func (m *Mutex) Token() Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

// Session is the session whose lease holds the lock.
func (m *Mutex) Session() *Session { return m.s }

// untilDone runs try with the waits waitFor(ctx) gives until it succeeds,
// ctx ends, the session's lease is lost, or it fails with anything but
// ErrLocked (what: the name, for the error). cleanup runs when ctx ended
// with a request in flight (its reply, maybe a grant, was never read).
func untilDone(ctx context.Context, s *Session, what string, try func(wait time.Duration) error, cleanup func()) error {
	for {
		if err := s.Err(); err != nil {
			return err
		}
		wait := waitFor(ctx)
		if wait < time.Millisecond {
			if err := ctx.Err(); err != nil {
				return newErr(ErrLocked, what, err)
			}
			return newErr(ErrLocked, what, context.DeadlineExceeded)
		}
		err := try(wait)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			cleanup()
			return newErr(ErrLocked, what, err)
		}
		if !isLocked(err) {
			return err
		}
		if _, ok := ctx.Deadline(); ok {
			// The wait ran out: the deadline is (nearly) here.
			<-ctx.Done()
			return newErr(ErrLocked, what, ctx.Err())
		}
	}
}

// Lock waits for the lock until ctx is done (LOCK ... WAIT, queued FIFO on
// the server, while the session keeps the lease alive). It returns an
// error matching ctx's error (and ErrLocked) when ctx ends first, and
// ErrLeaseLost when the session's lease is lost.
func (m *Mutex) Lock(ctx context.Context) error {
	return untilDone(ctx, m.s, m.name, func(wait time.Duration) error {
		tok, err := lockOn(ctx, m.s.c, m.s.id, m.name, wait, m.signed, m.shared)
		if err != nil {
			return err
		}
		return m.granted(tok)
	}, m.cleanup)
}

func isLocked(err error) bool {
	w, ok := err.(*wrapErr)
	return ok && w.kind == ErrLocked
}

// release gives back the hold tok of the Mutex's lease.
func (m *Mutex) release(ctx context.Context, tok Token) (bool, error) {
	if m.shared {
		return unlockLease(ctx, m.s.c, m.name, tok, m.s.id)
	}
	return unlock(ctx, m.s.c, m.name, tok)
}

// granted records a grant, unless the lease was lost meanwhile (then the
// grant is undone and ErrLeaseLost returned).
func (m *Mutex) granted(tok Token) error {
	if err := m.s.Err(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.s.c.timeout)
		_, _ = m.release(ctx, tok)
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
	info, err := m.s.c.LockInfo(ctx, m.name)
	if err != nil || info == nil || !info.HeldBy(m.s.id) {
		return
	}
	_, _ = m.release(ctx, Token{Value: info.Token})
}

// TryLock takes the lock if it is free (LOCK without WAIT): ErrLocked if
// someone else holds it (with Shared: if it is held exclusively, or a
// request is queued on it).
func (m *Mutex) TryLock(ctx context.Context) error {
	if err := m.s.Err(); err != nil {
		return err
	}
	tok, err := lockOn(ctx, m.s.c, m.s.id, m.name, 0, m.signed, m.shared)
	if err != nil {
		return err
	}
	return m.granted(tok)
}

// Unlock releases the lock (UNLOCK name token, with Shared UNLOCK name
// token LEASE lease; safe to retry, and a stale holder cannot release its
// successor). ErrNotHeld when it was not held, or had moved on (the lease
// was lost and someone else got it).
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	tok := m.token
	m.mu.Unlock()
	if tok.IsZero() {
		return newErr(ErrNotHeld, m.name, nil)
	}
	ok, err := m.release(ctx, tok)
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
