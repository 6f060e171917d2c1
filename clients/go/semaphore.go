package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Semaphore is a semaphore of n permits whose permits are held by a
// Session's lease (SEM.ACQUIRE name n lease). A semaphore of n permits is
// n slots, and each slot is its own fence: the holder of slot 2 of "jobs"
// fences its resource as "jobs#2" (Permit.Name), so a holder paused past
// its lease is fenced out by the next holder of its slot, and by no one
// else. A lease holds at most one slot of a semaphore: acquiring again
// answers the slot it holds (use one Session per permit you want at
// once). Safe for concurrent use.
type Semaphore struct {
	s      *Session
	name   string
	n      int
	signed bool
	err    error // a bad option or argument, reported by Acquire
}

// NewSemaphore returns the semaphore name of n permits (1..1024; n is
// fixed by the first acquire while the semaphore exists: another n is
// refused with ErrWrongType) on session s. Option: Signed.
func NewSemaphore(s *Session, name string, n int, opts ...Option) *Semaphore {
	o := applyOptions(opts)
	m := &Semaphore{s: s, name: name, n: n, signed: o.signed}
	if o.shared {
		m.err = errors.New("fence: Shared is for NewMutex only")
	} else {
		m.err = checkSem(name, n)
	}
	return m
}

func checkSem(name string, n int) error {
	if n < 1 || n > 1024 {
		return fmt.Errorf("fence: a semaphore has 1..1024 permits, not %d", n)
	}
	if err := checkName("semaphore", name); err != nil {
		return err
	}
	if len(slotName(name, n-1)) > 256 {
		return fmt.Errorf("fence: semaphore name %q is too long for its slot names %s#0..%d (256 bytes)", name, name, n-1)
	}
	return nil
}

func slotName(name string, slot int) string { return name + "#" + strconv.Itoa(slot) }

// Name is the semaphore's name.
func (m *Semaphore) Name() string { return m.name }

// Permits is n.
func (m *Semaphore) Permits() int { return m.n }

// Session is the session whose lease holds the permits.
func (m *Semaphore) Session() *Session { return m.s }

// Permit is one held slot of a semaphore: Name() ("jobs#2") is the fence
// name to guard the slot's resource with, Token() its token. A Permit from
// Semaphore.Acquire is held by the semaphore's session; one from
// Client.AcquireSlot has a lease of its own kept alive in the background.
type Permit struct {
	c     *Client
	sem   string
	slot  int
	token Token
	s     *Session
	mine  bool // the lease is the permit's own (AcquireSlot): stop its keepalive on Release
	own   bool // ... granted by LEASE.GRANT (Release revokes it; else SEM.RELEASE does)
	once  sync.Once
}

// semReply reads [slot, token] or [slot, token, lease] (want 2 or 3).
func semReply(v Value, want int, signed bool) (int, Token, uint64, error) {
	bad := protoErr("SEM.ACQUIRE reply %s", v)
	if v.Kind != KindArray || len(v.Array) != want {
		return 0, Token{}, 0, bad
	}
	slot, ok := uintOf(v.Array[0])
	if !ok || slot >= 1024 {
		return 0, Token{}, 0, bad
	}
	tok, err := parseToken(v.Array[1], signed)
	if err != nil {
		return 0, Token{}, 0, err
	}
	var lease uint64
	if want == 3 {
		if lease, ok = uintOf(v.Array[2]); !ok || lease == 0 {
			return 0, Token{}, 0, bad
		}
	}
	return int(slot), tok, lease, nil
}

// acquireOn sends SEM.ACQUIRE name n lease [WAIT w] REQID id [SIGNED].
func (m *Semaphore) acquireOn(ctx context.Context, lease uint64, wait time.Duration) (*Permit, error) {
	head := []string{"SEM.ACQUIRE", m.name, strconv.Itoa(m.n), strconv.FormatUint(lease, 10)}
	v, err := waitCall(ctx, m.s.c, head, signedTail(m.signed), wait)
	if err != nil {
		return nil, err
	}
	if v.Kind == KindNil {
		return nil, newErr(ErrLocked, "semaphore "+m.name+": every slot is taken", nil)
	}
	slot, tok, _, err := semReply(v, 2, m.signed)
	if err != nil {
		return nil, err
	}
	return &Permit{c: m.s.c, sem: m.name, slot: slot, token: tok, s: m.s}, nil
}

// Acquire waits for a slot until ctx is done (FIFO on the server, while
// the session keeps the lease alive): ErrLocked with ctx's error when ctx
// ends first, ErrLeaseLost when the lease is lost.
func (m *Semaphore) Acquire(ctx context.Context) (*Permit, error) {
	if m.err != nil {
		return nil, m.err
	}
	var p *Permit
	err := untilDone(ctx, m.s, "semaphore "+m.name, func(wait time.Duration) error {
		var err error
		p, err = m.acquireOn(ctx, m.s.id, wait)
		if err != nil {
			return err
		}
		return m.granted(p)
	}, m.cleanup)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// TryAcquire takes a free slot now: ErrLocked when every slot is taken.
func (m *Semaphore) TryAcquire(ctx context.Context) (*Permit, error) {
	if m.err != nil {
		return nil, m.err
	}
	if err := m.s.Err(); err != nil {
		return nil, err
	}
	p, err := m.acquireOn(ctx, m.s.id, 0)
	if err != nil {
		return nil, err
	}
	if err := m.granted(p); err != nil {
		return nil, err
	}
	return p, nil
}

func (m *Semaphore) granted(p *Permit) error {
	if err := m.s.Err(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.s.c.timeout)
		_, _ = p.release(ctx)
		cancel()
		return newErr(ErrLeaseLost, "the lease was lost while waiting", err)
	}
	return nil
}

// cleanup frees the slot of the session's lease, if it got one (an
// Acquire cancelled with its request in flight).
func (m *Semaphore) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), m.s.c.timeout)
	defer cancel()
	info, err := m.s.c.SemInfo(ctx, m.name)
	if err != nil || info == nil {
		return
	}
	for _, sl := range info.Slots {
		if sl.Lease == m.s.id {
			p := &Permit{c: m.s.c, sem: m.name, slot: sl.Slot, token: Token{Value: sl.Token}, s: m.s}
			_, _ = p.release(ctx)
		}
	}
}

// AcquireSlot takes a slot of the semaphore name of n permits with a
// lease of its own, kept alive in the background, waiting up to o.Wait
// (SEM.ACQUIRE name n TTL ms; a wait over TTL/2 grants the lease first,
// as Acquire does). ErrLocked when no slot was free in time. o.Shared is
// refused.
func (c *Client) AcquireSlot(ctx context.Context, name string, n int, o AcquireOptions) (*Permit, error) {
	ms, err := o.ttl()
	if err != nil {
		return nil, err
	}
	if o.Shared {
		return nil, errors.New("fence: a semaphore's slot cannot be shared")
	}
	if err := checkSem(name, n); err != nil {
		return nil, err
	}
	if o.Wait > o.TTL/2 {
		s, err := NewSession(ctx, c, SessionOptions{TTL: o.TTL})
		if err != nil {
			return nil, err
		}
		m := &Semaphore{s: s, name: name, n: n, signed: o.Signed}
		p, err := m.acquireOn(ctx, s.id, o.Wait)
		if err == nil && s.Err() != nil {
			_, _ = p.release(ctx)
			err = newErr(ErrLeaseLost, "the lease was lost while waiting", s.Err())
		}
		if err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			_ = s.Close(cctx)
			cancel()
			return nil, err
		}
		p.mine, p.own = true, true
		return p, nil
	}
	head := []string{"SEM.ACQUIRE", name, strconv.Itoa(n), "TTL", ms}
	sent := time.Now()
	v, err := waitCall(ctx, c, head, signedTail(o.Signed), o.Wait)
	if err != nil {
		return nil, err
	}
	if v.Kind == KindNil {
		return nil, newErr(ErrLocked, "semaphore "+name+": every slot is taken", nil)
	}
	slot, tok, lease, err := semReply(v, 3, o.Signed)
	if err != nil {
		return nil, err
	}
	s := startSession(c, lease, o.TTL, sent, false)
	return &Permit{c: c, sem: name, slot: slot, token: tok, s: s, mine: true}, nil
}

// Semaphore is the semaphore's name.
func (p *Permit) Semaphore() string { return p.sem }

// Slot is the slot held (0..n-1).
func (p *Permit) Slot() int { return p.slot }

// Name is the slot's fence name, "name#slot": guard the slot's resource
// with it (never with the semaphore's name alone: the holders of other
// slots hold other tokens at the same time).
func (p *Permit) Name() string { return slotName(p.sem, p.slot) }

// Token is the slot's fencing token.
func (p *Permit) Token() Token { return p.token }

// Lease is the id of the lease that holds the slot.
func (p *Permit) Lease() uint64 { return p.s.id }

// Done is closed when the slot's lease is lost (or, for AcquireSlot's,
// the permit released).
func (p *Permit) Done() <-chan struct{} { return p.s.Done() }

// Err: nil while the lease lives, then why not (see Session.Err).
func (p *Permit) Err() error { return p.s.Err() }

// ValidUntil: see Session.ValidUntil (a liveness hint, never safety).
func (p *Permit) ValidUntil() time.Time { return p.s.ValidUntil() }

func (p *Permit) release(ctx context.Context) (bool, error) {
	v, err := p.c.do(ctx, p.c.calls, []string{"SEM.RELEASE", p.sem, strconv.Itoa(p.slot),
		strconv.FormatUint(p.token.Value, 10)}, 0)
	if err != nil {
		return false, err
	}
	if v.Kind != KindInt {
		return false, protoErr("SEM.RELEASE reply %s", v)
	}
	return v.Int == 1, nil
}

// Release frees the slot (SEM.RELEASE name slot token: safe to retry, and
// a stale holder cannot free its successor's slot; for AcquireSlot's
// permit it stops the keepalive and the lease is revoked). ErrNotHeld
// when the slot had moved on. Only the first call does anything.
func (p *Permit) Release(ctx context.Context) error {
	err := newErr(ErrClosed, "released already", nil)
	p.once.Do(func() {
		if p.mine {
			p.s.stop(newErr(ErrClosed, "permit released", nil))
		}
		var ok bool
		ok, err = p.release(ctx)
		if p.own {
			if _, rerr := p.c.do(ctx, p.c.calls, []string{"LEASE.REVOKE", strconv.FormatUint(p.s.id, 10)}, 0); err == nil {
				err = rerr
			}
		}
		if err == nil && !ok {
			err = newErr(ErrNotHeld, p.Name()+": the slot had moved on", nil)
		}
	})
	return err
}

// SemInfo is SEM.INFO's answer.
type SemInfo struct {
	Permits int       // n
	Slots   []SemSlot // the slots held or in lock-delay, in slot order
	Waiters int       // requests queued for a slot
}

// SemSlot is one held (or lock-delayed) slot.
type SemSlot struct {
	Slot      int           // 0..n-1
	Token     uint64        // its holder's token
	Lease     uint64        // its holder's lease; 0 while in lock-delay
	Remaining time.Duration // until the holder's lease ends (or the lock-delay does)
}

// SemInfo asks about the semaphore name (SEM.INFO): nil when there is no
// such semaphore.
func (c *Client) SemInfo(ctx context.Context, name string) (*SemInfo, error) {
	if err := checkName("semaphore", name); err != nil {
		return nil, err
	}
	v, err := c.do(ctx, c.calls, []string{"SEM.INFO", name}, 0)
	if err != nil {
		return nil, err
	}
	if v.Kind == KindNil {
		return nil, nil
	}
	bad := protoErr("SEM.INFO reply %s", v)
	if v.Kind != KindArray || len(v.Array) != 3 || v.Array[1].Kind != KindArray {
		return nil, bad
	}
	var n, w uint64
	if !uints(v.Array, &n) {
		return nil, bad
	}
	if w, _ = uintOf(v.Array[2]); v.Array[2].Kind != KindInt || v.Array[2].Int < 0 {
		return nil, bad
	}
	info := &SemInfo{Permits: int(n), Waiters: int(w)}
	for _, e := range v.Array[1].Array {
		var slot uint64
		var sl SemSlot
		if e.Kind != KindArray || len(e.Array) != 4 || !uints(e.Array, &slot, &sl.Token, &sl.Lease) {
			return nil, bad
		}
		var ok bool
		if sl.Remaining, ok = msOf(e.Array[3]); !ok {
			return nil, bad
		}
		sl.Slot = int(slot)
		info.Slots = append(info.Slots, sl)
	}
	return info, nil
}
