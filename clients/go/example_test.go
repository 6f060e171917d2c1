package fence_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	fence "fenced/client"
)

// A Session keeps a lease alive; a Mutex on it is a lock whose token is
// passed to the resource with every write. Read-modify-write: admit the
// token first, then read, then write.
func ExampleMutex() {
	ctx := context.Background()
	c, err := fence.New(fence.Options{}) // servers from $FENCE_SERVER
	if err != nil {
		panic(err)
	}
	defer c.Close()
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)

	m := fence.NewMutex(s, "example-orders")
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.Lock(lctx); err != nil {
		panic(err)
	}
	store, _ := fence.OpenStore(fence.StoreOptions{Addr: os.Getenv("FENCE_STORE")})
	defer store.Close()
	if err := store.Admit(ctx, m.Name(), m.Token()); err != nil {
		panic(err) // ErrStale: a newer holder exists; stop
	}
	old, _, _ := store.Get(ctx, "example-balance")
	err = store.Set(ctx, m.Name(), m.Token(), "example-balance", append(old, '+'))
	fmt.Println("write:", err)

	// A write with an older token (a paused holder waking up) is refused.
	err = store.Set(ctx, m.Name(), fence.Token{Value: m.Token().Value - 1}, "example-balance", []byte("late"))
	var stale *fence.StaleError
	fmt.Println("stale write refused:", errors.Is(err, fence.ErrStale),
		errors.As(err, &stale) && stale.Highest == m.Token().Value)

	if err := m.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output:
	// write: <nil>
	// stale write refused: true true
}

// Acquire takes a lock with a lease of its own, as libfence's
// fence_lock_acquire; Done tells when the lease is lost.
func ExampleClient_Acquire() {
	ctx := context.Background()
	c, _ := fence.New(fence.Options{})
	defer c.Close()
	l, err := c.Acquire(ctx, "example-report", fence.AcquireOptions{TTL: 5 * time.Second, Wait: time.Second})
	if errors.Is(err, fence.ErrLocked) {
		fmt.Println("busy")
		return
	} else if err != nil {
		panic(err)
	}
	select {
	case <-l.Done():
		fmt.Println("lease lost:", l.Err())
	default:
		fmt.Println("held:", !l.Token().IsZero(), time.Until(l.ValidUntil()) > 0)
	}
	fmt.Println("released:", l.Release(ctx))
	// Output:
	// held: true true
	// released: <nil>
}

// Transport adds Fencing-Lock and Fencing-Token to every request, for a
// fence-proxy in front of an HTTP service.
func ExampleTransport() {
	ctx := context.Background()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("proxy got Fencing-Lock:", r.Header.Get("Fencing-Lock"))
	}))
	defer proxy.Close()

	c, _ := fence.New(fence.Options{})
	defer c.Close()
	l, err := c.Acquire(ctx, "example-upload", fence.AcquireOptions{})
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)
	hc := &http.Client{Transport: &fence.Transport{Holder: l}}
	resp, err := hc.Post(proxy.URL+"/reports/today.csv", "text/csv", nil)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	// Output:
	// proxy got Fencing-Lock: example-upload
}

// Errors match sentinels with errors.Is and carry the server's message.
func ExampleServerError() {
	ctx := context.Background()
	c, _ := fence.New(fence.Options{})
	defer c.Close()
	_, err := c.Do(ctx, "LEASE.KEEPALIVE", "999999")
	var se *fence.ServerError
	fmt.Println(errors.Is(err, fence.ErrLeaseLost), errors.As(err, &se) && se.Code == "NOLEASE")
	// Output:
	// true true
}
