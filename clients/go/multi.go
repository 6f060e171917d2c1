package fence

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Multi is an atomic multi-lock held by a Session's lease: every one of
// its names, all or none, with one fencing token valid at each of their
// fences (LOCK.MULTI). A waiting Lock holds none of the names, and two
// multi-locks cannot deadlock whatever the order of their names (the
// server queues them in arrival order at every name they share). Unlock
// releases every name. Safe for concurrent use; Lock/Unlock pair up as
// with Mutex.
type Multi struct {
	s     *Session
	names []string

	mu    sync.Mutex
	token Token
}

// NewMulti returns a multi-lock of names (1..64 distinct names of 1..256
// bytes, none spelled like an option word: WAIT, REQID, LOCKDELAY, SIGNED,
// SHARED) on session s. Bad names are reported by Lock and TryLock.
func NewMulti(s *Session, names ...string) *Multi {
	return &Multi{s: s, names: append([]string(nil), names...)}
}

// Names are the multi-lock's names.
func (m *Multi) Names() []string { return append([]string(nil), m.names...) }

// Name is the first name (a TokenHolder's fence name; the token is valid
// at every name's fence: pass it to each resource with its own name).
func (m *Multi) Name() string {
	if len(m.names) == 0 {
		return ""
	}
	return m.names[0]
}

// Token is the fencing token of the current hold, the zero Token when not
// held.
func (m *Multi) Token() Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

// Session is the session whose lease holds the names.
func (m *Multi) Session() *Session { return m.s }

func (m *Multi) what() string { return "multi-lock " + strings.Join(m.names, " ") }

// Lock waits until every name is granted at once, until ctx is done (as
// Mutex.Lock: ErrLocked with ctx's error when ctx ends first,
// ErrLeaseLost when the lease is lost).
func (m *Multi) Lock(ctx context.Context) error {
	if err := checkNames(m.names); err != nil {
		return err
	}
	return untilDone(ctx, m.s, m.what(), func(wait time.Duration) error {
		tok, err := lockMulti(ctx, m.s.c, m.s.id, m.names, wait)
		if err != nil {
			return err
		}
		return m.granted(tok)
	}, m.cleanup)
}

// TryLock takes every name if all are free now (and no earlier waiter is
// first in line for one): ErrLocked otherwise, and then nothing was taken.
func (m *Multi) TryLock(ctx context.Context) error {
	if err := checkNames(m.names); err != nil {
		return err
	}
	if err := m.s.Err(); err != nil {
		return err
	}
	tok, err := lockMulti(ctx, m.s.c, m.s.id, m.names, 0)
	if err != nil {
		return err
	}
	return m.granted(tok)
}

func (m *Multi) granted(tok Token) error {
	if err := m.s.Err(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.s.c.timeout)
		_, _ = unlock(ctx, m.s.c, m.names[0], tok)
		cancel()
		return newErr(ErrLeaseLost, "the lease was lost while waiting", err)
	}
	m.mu.Lock()
	m.token = tok
	m.mu.Unlock()
	return nil
}

// cleanup releases the names if the session's lease got them (a Lock
// cancelled with its request in flight).
func (m *Multi) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), m.s.c.timeout)
	defer cancel()
	info, err := m.s.c.LockInfo(ctx, m.names[0])
	if err == nil && info != nil && !info.Shared && info.Lease == m.s.id {
		_, _ = unlock(ctx, m.s.c, m.names[0], Token{Value: info.Token})
	}
}

// Unlock releases every name (UNLOCK of the first name with the token;
// safe to retry, and a stale holder cannot release a successor's names).
// ErrNotHeld when not held, or when the names had moved on.
func (m *Multi) Unlock(ctx context.Context) error {
	m.mu.Lock()
	tok := m.token
	m.mu.Unlock()
	if tok.IsZero() {
		return newErr(ErrNotHeld, m.what(), nil)
	}
	ok, err := unlock(ctx, m.s.c, m.names[0], tok)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.token == tok {
		m.token = Token{}
	}
	m.mu.Unlock()
	if !ok {
		return newErr(ErrNotHeld, m.what()+": the names had moved on", nil)
	}
	return nil
}
