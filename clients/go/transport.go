package fence

import (
	"net/http"
	"strconv"
	"strings"
)

// TokenHolder is what Transport takes the fence name and token from:
// *Mutex, *Lock, *Election, *Multi (its first name) and *Permit (its slot's
// name#slot) are TokenHolders.
type TokenHolder interface {
	Name() string
	Token() Token
}

// Transport is an http.RoundTripper that adds Fencing-Lock (the lock's
// name) and Fencing-Token (its token, a signed one unchanged) to every
// request, for fence-proxy (docs/proxy.md). A request made while nothing
// is held fails with ErrNotHeld before anything is sent.
type Transport struct {
	// Base does the request (nil: http.DefaultTransport).
	Base http.RoundTripper
	// Holder gives the name and the current token.
	Holder TokenHolder
}

// RoundTrip sends a copy of req with the two headers set.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok := t.Holder.Token()
	if tok.IsZero() {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, newErr(ErrNotHeld, "no token for "+t.Holder.Name(), nil)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Fencing-Lock", t.Holder.Name())
	r.Header.Set("Fencing-Token", tok.String())
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// ProxyError turns fence-proxy's refusals into this package's errors: 409
// is a *StaleError (Highest from Fencing-Highest), 403 with a BADTOKEN body
// matches ErrBadToken; nil for other statuses. body is the response body
// (or its first bytes).
func ProxyError(resp *http.Response, body []byte) error {
	text := strings.TrimSpace(string(body))
	switch resp.StatusCode {
	case http.StatusConflict:
		e := &StaleError{Message: text}
		e.Highest, _ = strconv.ParseUint(resp.Header.Get("Fencing-Highest"), 10, 64)
		if f := strings.Fields(text); len(f) >= 2 && f[0] == "STALE" {
			e.Token, _ = strconv.ParseUint(f[1], 10, 64)
		}
		return e
	case http.StatusForbidden, http.StatusBadRequest:
		if strings.HasPrefix(text, "BADTOKEN") {
			return &ServerError{Code: "BADTOKEN", Message: strings.TrimPrefix(text, "BADTOKEN ")}
		}
	}
	return nil
}
