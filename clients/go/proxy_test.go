package fence_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	fence "fenced/client"
)

// TestProxy: Transport's headers pass a real fence-proxy, and a holder
// whose token is older than one the proxy has seen gets 409, which
// ProxyError turns into a *StaleError with the newer token.
func TestProxy(t *testing.T) {
	if _, err := os.Stat(proxyBin); err != nil {
		t.Skipf("%s is not built", proxyBin)
	}
	ctx := ctxT(t, 30*time.Second)
	var mu sync.Mutex
	var bodies []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer up.Close()
	dir := t.TempDir()
	listen := fmt.Sprintf("127.0.0.1:%d", freePort())
	p, err := startReady(dir, "fence-proxy", proxyBin, listen, func() bool {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, "--listen", listen, "--upstream", up.URL, "--data-dir", filepath.Join(dir, "guard"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()

	c := newClient(t, fence.Options{})
	old, err := c.Acquire(ctx, "t-proxy", fence.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	put := func(l *fence.Lock, body string) (*http.Response, []byte) {
		hc := &http.Client{Transport: &fence.Transport{Holder: l}}
		req, _ := http.NewRequestWithContext(ctx, "PUT", "http://"+listen+"/reports/today.csv", bytes.NewBufferString(body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	if resp, b := put(old, "first"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT with the token: %d %s", resp.StatusCode, b)
	}
	oldTok := old.Token()
	old.Release(ctx)
	l, err := c.Acquire(ctx, "t-proxy", fence.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if resp, b := put(l, "second"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT of the new holder: %d %s", resp.StatusCode, b)
	}
	resp, b := put(old, "late") // the old holder's token, after the new one's write
	var se *fence.StaleError
	if err := fence.ProxyError(resp, b); resp.StatusCode != http.StatusConflict || !errors.As(err, &se) ||
		se.Highest != l.Token().Value || se.Token != oldTok.Value {
		t.Fatalf("stale PUT: %d %q -> %#v", resp.StatusCode, b, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || bodies[1] != "second" {
		t.Fatalf("upstream got %q", bodies)
	}
}
