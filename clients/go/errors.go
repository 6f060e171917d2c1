package fence

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors. Every error this package returns for one of these
// conditions matches it with errors.Is; server refusals are *ServerError
// (or *StaleError) values that carry the server's message and match the
// sentinel of their code.
var (
	// ErrStale: the resource refused the token because it has admitted a
	// higher one (fence-store -STALE, fence-proxy 409). A newer holder
	// exists: stop. Use errors.As with *StaleError for the numbers.
	ErrStale = errors.New("fence: stale token")
	// ErrWrongFence: fence-store refused a write of a key that belongs
	// to another fence (-WRONGFENCE).
	ErrWrongFence = errors.New("fence: key belongs to another fence")
	// ErrBadToken: the resource refused the token as unsigned, forged or
	// for another fence (-BADTOKEN).
	ErrBadToken = errors.New("fence: bad token")
	// ErrLeaseLost: the lease is gone, either the server said so
	// (-NOLEASE: expired or revoked) or its valid-until passed without a
	// successful renewal. The locks of the lease must no longer be used.
	ErrLeaseLost = errors.New("fence: lease lost")
	// ErrNoLease: the server answered -NOLEASE (also matches ErrLeaseLost).
	ErrNoLease = errors.New("fence: no such lease")
	// ErrNoPerm: the user's permissions forbid the command, the name, or
	// the lease (-NOPERM).
	ErrNoPerm = errors.New("fence: permission denied")
	// ErrAuth: the login was refused (-WRONGPASS, an AUTH error) or the
	// server wants one (-NOAUTH). Never retried.
	ErrAuth = errors.New("fence: authentication failed")
	// ErrLimit: a server limit is full (-LIMIT).
	ErrLimit = errors.New("fence: server limit reached")
	// ErrLocked: the lock (every slot of a semaphore, an election's
	// leadership) is held by someone else (TryLock, TryAcquire, a
	// Campaign without a wait), or was not acquired within the wait. The
	// message names the kind.
	ErrLocked = errors.New("fence: lock is held")
	// ErrWrongType: the name is in use as another kind (-WRONGTYPE: a
	// lock, an election, a semaphore or one of its slots name#i), or a
	// semaphore was asked with another n than its own (the message says).
	ErrWrongType = errors.New("fence: name is another kind")
	// ErrTryAgain: the server kept answering -TRYAGAIN until the deadline.
	ErrTryAgain = errors.New("fence: server not ready (TRYAGAIN)")
	// ErrNotLeader: no leader was found before the deadline.
	ErrNotLeader = errors.New("fence: no leader")
	// ErrUnreachable: no server accepted a connection (refused, or the
	// TLS handshake failed) before the deadline.
	ErrUnreachable = errors.New("fence: no server reachable")
	// ErrProtocol: a reply of the wrong shape.
	ErrProtocol = errors.New("fence: protocol error")
	// ErrOutcomeUnknown: the connection was lost or the deadline passed
	// after the request may have been sent; it may or may not have been
	// applied. (A lease granted anyway expires after its TTL.)
	ErrOutcomeUnknown = errors.New("fence: outcome unknown")
	// ErrNotHeld: the Mutex, Lock, Permit or leadership is not held
	// (Unlock without Lock, a Release of a slot that had moved on, a
	// Proclaim or Resign by a leader that no longer leads).
	ErrNotHeld = errors.New("fence: lock not held")
	// ErrClosed: the Client, Session or Store is closed.
	ErrClosed = errors.New("fence: closed")
	// ErrFull: fence-store's map or disk is full (-FULL).
	ErrFull = errors.New("fence: store full")
)

// ServerError is an error reply: Code is its first word (ERR, NOLEASE,
// LIMIT, NOPERM, ...), Message the rest, as the server sent them.
type ServerError struct {
	Code    string // the error's first word: ERR, NOLEASE, NOPERM, LIMIT, WRONGFENCE, ...
	Message string // the rest of the server's text
}

// Error returns "CODE message".
func (e *ServerError) Error() string {
	if e.Message == "" {
		return "fence: server: " + e.Code
	}
	return "fence: server: " + e.Code + " " + e.Message
}

// Is matches the sentinel of the code (NOLEASE matches ErrNoLease and
// ErrLeaseLost, NOPERM ErrNoPerm, WRONGPASS and NOAUTH ErrAuth, ...).
func (e *ServerError) Is(target error) bool {
	switch e.Code {
	case "NOLEASE":
		return target == ErrNoLease || target == ErrLeaseLost
	case "NOPERM":
		return target == ErrNoPerm
	case "WRONGPASS", "NOAUTH":
		return target == ErrAuth
	case "LIMIT":
		return target == ErrLimit
	case "TRYAGAIN":
		return target == ErrTryAgain
	case "NOTLEADER":
		return target == ErrNotLeader
	case "WRONGFENCE":
		return target == ErrWrongFence
	case "BADTOKEN":
		return target == ErrBadToken
	case "STALE":
		return target == ErrStale
	case "FULL":
		return target == ErrFull
	case "WRONGTYPE":
		return target == ErrWrongType
	}
	return false
}

// StaleError is a write refused because the fence has admitted a higher
// token: fence-store's -STALE reply, or fence-proxy's 409. Nothing was
// written. It matches ErrStale.
type StaleError struct {
	Token   uint64 // the token that was refused
	Highest uint64 // the fence's mark: the newer holder's token
	Message string // the resource's text
}

// Error returns the resource's message.
func (e *StaleError) Error() string { return "fence: STALE " + e.Message }

// Is matches ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// parseError turns an error reply into *StaleError or *ServerError.
func parseError(b []byte) error {
	s := string(b)
	code, msg := s, ""
	if i := strings.IndexByte(s, ' '); i >= 0 {
		code, msg = s[:i], s[i+1:]
	}
	if code == "STALE" {
		f := strings.Fields(msg)
		if len(f) >= 2 {
			t, err1 := strconv.ParseUint(f[0], 10, 64)
			h, err2 := strconv.ParseUint(f[1], 10, 64)
			if err1 == nil && err2 == nil {
				return &StaleError{Token: t, Highest: h, Message: msg}
			}
		}
	}
	return &ServerError{Code: code, Message: msg}
}

// wrapErr gives a sentinel a detail while keeping errors.Is working.
type wrapErr struct {
	kind   error
	detail string
	cause  error
}

func (e *wrapErr) Error() string {
	s := e.kind.Error()
	if e.detail != "" {
		s += ": " + e.detail
	}
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *wrapErr) Is(target error) bool { return target == e.kind }
func (e *wrapErr) Unwrap() error        { return e.cause }

func newErr(kind error, detail string, cause error) error {
	return &wrapErr{kind: kind, detail: detail, cause: cause}
}
