package fence_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	fence "fenced/client"
)

// certs writes a test CA, a server certificate (IP SAN 127.0.0.1) and a
// client certificate it signed, and a second CA, into dir as PEM files.
func makeCerts(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	write := func(name string, der []byte, key *ecdsa.PrivateKey) {
		cp, kp := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		os.WriteFile(cp, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(kp, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
		out[name+".crt"], out[name+".key"] = cp, kp
	}
	serial := int64(1)
	mk := func(name, cn string, isCA bool, parent *x509.Certificate, pkey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		serial++
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		}
		if isCA {
			tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
			tmpl.KeyUsage |= x509.KeyUsageCertSign
		} else {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
			if usage == x509.ExtKeyUsageServerAuth {
				tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
				tmpl.DNSNames = []string{"localhost"}
			}
		}
		if parent == nil {
			parent, pkey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, pkey)
		if err != nil {
			t.Fatal(err)
		}
		write(name, der, key)
		c, _ := x509.ParseCertificate(der)
		return c, key
	}
	ca, caKey := mk("ca", "fence-go-test-ca", true, nil, nil, 0)
	mk("server", "localhost", false, ca, caKey, x509.ExtKeyUsageServerAuth)
	mk("client", "alice", false, ca, caKey, x509.ExtKeyUsageClientAuth)
	mk("other-ca", "other-ca", true, nil, nil, 0)
	return out
}

func TestTLS(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	certs := makeCerts(t, t.TempDir())
	tport := freePort()
	f := startFenced(t, "--tls-port", fmt.Sprint(tport), "--tls-cert", certs["server.crt"],
		"--tls-key", certs["server.key"], "--tls-ca", certs["ca.crt"])
	taddr := fmt.Sprintf("127.0.0.1:%d", tport)
	_ = f

	// mTLS with the client certificate: works.
	cfg, err := fence.LoadTLS(certs["ca.crt"], certs["client.crt"], certs["client.key"])
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, fence.Options{Servers: []string{taddr}, TLS: cfg})
	l, err := c.Acquire(ctx, "t-tls", fence.AcquireOptions{TTL: 2 * time.Second})
	if err != nil {
		t.Fatalf("Acquire over mTLS: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// No client certificate: the server refuses it.
	nocert, _ := fence.LoadTLS(certs["ca.crt"], "", "")
	c2 := newClient(t, fence.Options{Servers: []string{taddr}, TLS: nocert, Timeout: 1500 * time.Millisecond})
	if err := c2.Ping(ctx); err == nil {
		t.Fatal("PING without a client certificate succeeded on an mTLS port")
	}

	// A server certificate from another CA: the handshake fails at once
	// (ErrUnreachable with the TLS reason), not after the deadline.
	other, _ := fence.LoadTLS(certs["other-ca.crt"], certs["client.crt"], certs["client.key"])
	c3 := newClient(t, fence.Options{Servers: []string{taddr}, TLS: other})
	t0 := time.Now()
	err = c3.Ping(ctx)
	if !errors.Is(err, fence.ErrUnreachable) {
		t.Fatalf("wrong CA: %v, want ErrUnreachable", err)
	}
	if time.Since(t0) > 3*time.Second {
		t.Fatalf("wrong CA took %v", time.Since(t0))
	}
	var ue x509.UnknownAuthorityError
	if !errors.As(err, &ue) {
		t.Logf("note: error does not unwrap to x509.UnknownAuthorityError: %v", err)
	}

	// A plaintext port spoken to with TLS fails too.
	c4 := newClient(t, fence.Options{Servers: []string{f.addr}, TLS: cfg, Timeout: time.Second})
	if err := c4.Ping(ctx); err == nil {
		t.Fatal("TLS to the plain port succeeded")
	}

	// Bad files are refused at LoadTLS.
	if _, err := fence.LoadTLS(filepath.Join(t.TempDir(), "missing"), "", ""); err == nil {
		t.Fatal("LoadTLS of a missing CA file succeeded")
	}
	if _, err := fence.LoadTLS(certs["ca.crt"], certs["client.crt"], ""); err == nil {
		t.Fatal("LoadTLS of a certificate without its key succeeded")
	}
}

func TestStoreTLSAndAuth(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	dir := t.TempDir()
	certs := makeCerts(t, dir)
	acl := filepath.Join(dir, "users.acl")
	os.WriteFile(acl, []byte("user writer on >wpass ~orders* +@all\n"), 0o600)
	tport := freePort()
	st := startStore(t, "--tls-port", fmt.Sprint(tport), "--tls-cert", certs["server.crt"],
		"--tls-key", certs["server.key"], "--acl-file", acl)
	cfg, _ := fence.LoadTLS(certs["ca.crt"], "", "")
	s, err := fence.OpenStore(fence.StoreOptions{Addr: fmt.Sprintf("127.0.0.1:%d", tport), TLS: cfg,
		User: "writer", Password: "wpass"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Set(ctx, "orders", fence.Token{Value: 5}, "k", []byte("v")); err != nil {
		t.Fatalf("FSET over TLS with a login: %v", err)
	}
	if err := s.Set(ctx, "billing", fence.Token{Value: 5}, "k2", []byte("v")); !errors.Is(err, fence.ErrNoPerm) {
		t.Fatalf("FSET outside the user's fences: %v, want ErrNoPerm", err)
	}
	bad, _ := fence.OpenStore(fence.StoreOptions{Addr: st.addr, User: "writer", Password: "nope"})
	defer bad.Close()
	if err := bad.Admit(ctx, "orders", fence.Token{Value: 6}); !errors.Is(err, fence.ErrAuth) {
		t.Fatalf("wrong password: %v, want ErrAuth", err)
	}
}

func TestAuth(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	dir := t.TempDir()
	acl := filepath.Join(dir, "users.acl")
	os.WriteFile(acl, []byte("user admin on >adminpw ~* +@all\n"+
		"user alice on >s3cret ~orders:* +@all -@admin\n"+
		"user bob on >b0b ~orders:* +@all -@admin\n"), 0o600)
	f := startFenced(t, "--acl-file", acl)

	alice := newClient(t, fence.Options{Servers: []string{f.addr}, User: "alice", Password: "s3cret"})
	l, err := alice.Acquire(ctx, "orders:1", fence.AcquireOptions{TTL: 2 * time.Second})
	if err != nil {
		t.Fatalf("alice's own lock: %v", err)
	}
	_, err = alice.Acquire(ctx, "billing", fence.AcquireOptions{})
	var se *fence.ServerError
	if !errors.Is(err, fence.ErrNoPerm) || !errors.As(err, &se) || se.Message == "" {
		t.Fatalf("a name outside alice's patterns: %v, want ErrNoPerm with the server's message", err)
	}
	// Another user cannot keep alive or unlock alice's lease and lock.
	bob := newClient(t, fence.Options{Servers: []string{f.addr}, User: "bob", Password: "b0b"})
	if _, err := bob.Do(ctx, "LEASE.KEEPALIVE", fmt.Sprint(l.Lease())); !errors.Is(err, fence.ErrNoPerm) {
		t.Fatalf("bob keeping alice's lease alive: %v, want ErrNoPerm", err)
	}
	if _, err := bob.Do(ctx, "UNLOCK", "orders:1", l.Token().String()); !errors.Is(err, fence.ErrNoPerm) {
		t.Fatalf("bob unlocking alice's lock: %v, want ErrNoPerm", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A wrong password is ErrAuth at once, never retried until the deadline.
	bad := newClient(t, fence.Options{Servers: []string{f.addr}, User: "alice", Password: "pw-Zq81x"})
	t0 := time.Now()
	err = bad.Ping(ctx)
	if !errors.Is(err, fence.ErrAuth) {
		t.Fatalf("wrong password: %v, want ErrAuth", err)
	}
	if time.Since(t0) > 3*time.Second {
		t.Fatalf("wrong password took %v", time.Since(t0))
	}
	if msg := err.Error(); contains(msg, "pw-Zq81x") {
		t.Fatalf("the password appears in the error: %q", msg)
	}
	// No login at all: the server's NOAUTH, as ErrAuth.
	none := newClient(t, fence.Options{Servers: []string{f.addr}})
	if _, err := none.Acquire(ctx, "orders:2", fence.AcquireOptions{}); !errors.Is(err, fence.ErrAuth) {
		t.Fatalf("no login: %v, want ErrAuth", err)
	}
	if _, err := fence.New(fence.Options{User: "alice"}); err == nil {
		t.Fatal("a user without a password was accepted")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
