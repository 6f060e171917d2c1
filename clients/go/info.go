package fence

import (
	"context"
	"time"
)

// LockInfo is LOCK.INFO's answer about a held lock (also a semaphore's
// slot name#i, an election, a multi-lock's name).
type LockInfo struct {
	Token     uint64        // the holder's token (a shared phase's: every holder's)
	Lease     uint64        // the holder's lease (shared: the first holder's)
	Remaining time.Duration // until the holder's lease ends (shared: the last one's); floored at 0
	Waiters   int           // requests queued on the lock
	Shared    bool          // held shared (LOCK ... SHARED)
	Holders   []LockHolder  // a shared lock's holders, in the order they were admitted
}

// LockHolder is one holder of a shared lock.
type LockHolder struct {
	Lease     uint64        // the holder's lease
	Remaining time.Duration // until its lease ends
}

// HeldBy reports whether lease holds the lock (exclusive, or among the
// shared holders).
func (i *LockInfo) HeldBy(lease uint64) bool {
	if !i.Shared {
		return i.Lease == lease
	}
	for _, h := range i.Holders {
		if h.Lease == lease {
			return true
		}
	}
	return false
}

func uintOf(v Value) (uint64, bool) {
	if v.Kind != KindInt || v.Int < 0 {
		return 0, false
	}
	return uint64(v.Int), true
}

func msOf(v Value) (time.Duration, bool) {
	n, ok := uintOf(v)
	return time.Duration(n) * time.Millisecond, ok
}

// uints reads the first len(out) elements of a as non-negative integers.
func uints(a []Value, out ...*uint64) bool {
	if len(a) < len(out) {
		return false
	}
	for i, p := range out {
		n, ok := uintOf(a[i])
		if !ok {
			return false
		}
		*p = n
	}
	return true
}

// LockInfo asks who holds the lock name (LOCK.INFO): nil when it is free.
func (c *Client) LockInfo(ctx context.Context, name string) (*LockInfo, error) {
	if err := checkName("lock", name); err != nil {
		return nil, err
	}
	v, err := c.do(ctx, c.calls, []string{"LOCK.INFO", name}, 0)
	if err != nil {
		return nil, err
	}
	if v.Kind == KindNil {
		return nil, nil
	}
	bad := protoErr("LOCK.INFO reply %s", v)
	if v.Kind != KindArray || (len(v.Array) != 4 && len(v.Array) != 6) {
		return nil, bad
	}
	var i LockInfo
	var w uint64
	var ok bool
	if !uints(v.Array, &i.Token, &i.Lease) {
		return nil, bad
	}
	if i.Remaining, ok = msOf(v.Array[2]); !ok {
		return nil, bad
	}
	if w, ok = uintOf(v.Array[3]); !ok {
		return nil, bad
	}
	i.Waiters = int(w)
	if len(v.Array) == 6 {
		if v.Array[4].Kind != KindBulk || string(v.Array[4].Str) != "shared" || v.Array[5].Kind != KindArray {
			return nil, bad
		}
		i.Shared = true
		for _, h := range v.Array[5].Array {
			var lh LockHolder
			if h.Kind != KindArray || len(h.Array) != 2 || !uints(h.Array, &lh.Lease) {
				return nil, bad
			}
			if lh.Remaining, ok = msOf(h.Array[1]); !ok {
				return nil, bad
			}
			i.Holders = append(i.Holders, lh)
		}
	}
	return &i, nil
}
