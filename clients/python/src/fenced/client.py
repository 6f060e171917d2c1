"""The fenced client: leases, locks with fencing tokens, and a lock object
that keeps its lease alive.

Built on redis-py's connection class (RESP2), so it runs wherever redis-py
4.3 or newer does.  A :class:`Client` talks to one server at a time and
follows ``NOTLEADER`` redirects; every state-changing request carries a
random ``REQID`` and is retried with that same id after a timeout, a reset
connection or ``TRYAGAIN``, so the server applies it once.

A Client is not thread-safe: use one per thread.  A :class:`Lock` renews its
lease from a thread of its own, over a connection of its own (a ``LOCK ...
WAIT`` on a shared connection would hold up the renewals behind it).
"""
import random
import secrets
import ssl
import threading
import time
from typing import (Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import redis
from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection

from . import elect
from .errors import (AuthFailed, FencedError, LeaseLost, NotAcquired, NotLeader, TryAgain, Unreachable,
                     from_redis, keep_codes, with_context)

__all__ = ["Client", "Lock", "LeaseInfo", "LockInfo", "SignedToken", "parse_servers"]

#: The default server, as for fencectl.
DEFAULT_SERVER = "127.0.0.1:7700"

Servers = Union[str, Sequence[str]]


class LeaseInfo(NamedTuple):
    """LEASE.INFO: the lease's TTL, time left on the leader's clock, locks held."""
    ttl_ms: int
    remaining_ms: int
    locks_held: int


class SemSlot(NamedTuple):
    """One taken slot of SEM.INFO (lease 0: in lock-delay).  The resource
    fences it as ``name#slot``."""
    slot: int
    token: int
    lease: int
    remaining_ms: int


class SemInfo(NamedTuple):
    """SEM.INFO: the semaphore's N, its taken slots in slot order, waiters."""
    permits: int
    slots: List[SemSlot]
    waiters: int


class LockInfo(NamedTuple):
    """LOCK.INFO of a held lock: holder's token and lease, time left, waiters;
    for a lock held shared, ``shared`` and every holder as (lease,
    remaining_ms), the first one in ``lease``."""
    token: int
    lease: int
    remaining_ms: int
    waiters: int
    shared: bool = False
    holders: Tuple[Tuple[int, int], ...] = ()


def parse_servers(servers: Servers) -> List[str]:
    """Split a server list ("h:p,h:p", or a sequence of "h:p") into
    addresses.  "unix:/path" names a Unix socket; IPv6 hosts go in
    brackets ("[::1]:7700")."""
    if isinstance(servers, str):
        items = servers.split(",")
    else:
        items = list(servers)
    out = [s.strip() for s in items if s and s.strip()]
    if not out:
        raise ValueError("no server given")
    for s in out:
        _split_addr(s)
    return out


def _split_addr(addr: str) -> Tuple[str, int]:
    """(host, port) of "host:port" / "[v6]:port"; ("unix", path) is told
    apart by the caller.  Raises ValueError for a malformed address."""
    if addr.startswith("unix:"):
        if len(addr) == 5:
            raise ValueError("empty unix socket path in %r" % addr)
        return addr, 0
    if addr.startswith("["):
        host, sep, rest = addr[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError("bad server address %r" % addr)
        port_s = rest[1:]
    else:
        host, sep, port_s = addr.rpartition(":")
        if not sep:
            raise ValueError("bad server address %r (want host:port)" % addr)
    if not host or not port_s.isdigit() or not 0 < int(port_s) < 65536:
        raise ValueError("bad server address %r" % addr)
    return host, int(port_s)


def _margin_ms(ttl_ms: int) -> int:
    """The client's safety margin for valid_until: TTL/10 + 5 ms (as
    libfence)."""
    return ttl_ms // 10 + 5


def _reqid() -> int:
    """A random 64-bit request id."""
    return secrets.randbits(64)


def _signed_string(token: int, name: str) -> str:
    """The string of a lock's token taken with signed=True."""
    if not isinstance(token, SignedToken):
        raise FencedError("lock %r was not taken with signed=True: its token is not signed"
                          % name)
    return token.signed


def _as_int(v: Any, what: str) -> int:
    """A reply that must be an integer."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise FencedError("%s: unexpected reply %r" % (what, v))


#: The longest signed token a reply may carry (as libfence and the Go client).
SIGNED_TOKEN_MAX = 1024


class SignedToken(int):
    """A fencing token that fenced signed (``LOCK``/``ACQUIRE ... SIGNED``):
    the int is the token (compare it, pass it to ``unlock`` or to
    ``Store.fset`` as any token), ``signed`` is the string to hand a
    resource that checks fenced's signature instead of asking fenced
    (``TOKEN.KEYID.SIGNATURE``; docs/security.md "Signed tokens").  The
    signature covers the lock name and the token, so it is only good for
    the lock it was granted on."""

    signed: str

    def __new__(cls, value: int, signed: str) -> "SignedToken":
        t = super().__new__(cls, value)
        t.signed = signed
        return t

    def __getnewargs__(self) -> Tuple[int, str]:  # type: ignore[override]
        return int(self), self.signed


#: A token for a resource: an int, a SignedToken, or a signed token's string.
Token = Union[int, str]


def wire_token(token: Token) -> Union[int, str]:
    """What a resource is sent for token: a SignedToken's string (a
    fence-store with verify keys admits only those; one without counts a
    signed token by its number), else the token as given."""
    if isinstance(token, SignedToken):
        return token.signed
    return token


def _signed_pair(r: Any, what: str) -> Tuple[SignedToken, int]:
    """An ACQUIRE ... SIGNED reply: [signed token, lease]."""
    if not isinstance(r, list) or len(r) != 2:
        raise FencedError("%s: unexpected reply %r" % (what, r))
    return _as_signed(r[0], what), _as_int(r[1], what)


def _as_signed(v: Any, what: str) -> SignedToken:
    """A reply that must be a signed token: a bulk string of at most
    SIGNED_TOKEN_MAX ASCII bytes whose first dot-separated part is the
    token, 1 .. 2^63-1."""
    s = v
    if isinstance(v, bytes):
        try:
            s = v.decode("ascii")
        except UnicodeDecodeError:
            s = None
    if isinstance(s, str) and 0 < len(s) <= SIGNED_TOKEN_MAX:
        head, dot, _ = s.partition(".")
        if dot and 0 < len(head) <= 19 and all("0" <= ch <= "9" for ch in head):
            n = int(head)
            if 0 < n < 1 << 63:
                return SignedToken(n, s)
    raise FencedError("%s: unexpected reply %r (want a signed token)" % (what, v))


class Client:
    """A connection to a fenced cluster.

    ``servers``: "host:port" or a list of them (any members of the
    cluster; the client finds the leader through ``NOTLEADER`` replies).
    ``timeout_ms``: how long one request may take, reconnects and retries
    included, on top of any wait.  A server that refuses the connection is
    not retried for the whole timeout: when every server refused twice in a
    row, :class:`Unreachable` is raised at once.

    ``tls``: connect with TLS (fenced ``--tls-port``); the server's
    certificate is always verified, against ``tls_ca_file`` (PEM; None: the
    system's CAs), and its name against the address's host unless
    ``tls_check_hostname`` is False.  ``tls_cert_file``/``tls_key_file``: a
    client certificate for mutual TLS.  A certificate that fails
    verification raises :class:`Unreachable` at once (no retries).
    ``username``/``password``: sent as ``AUTH`` on every new connection
    (``AUTH password`` without a username); a refused login raises
    :class:`~fenced.errors.AuthFailed` at once.
    """

    def __init__(self, servers: Servers = DEFAULT_SERVER, *, timeout_ms: int = 5000,
                 connect_timeout_ms: int = 1000, max_redirects: int = 8,
                 tls: bool = False, tls_ca_file: Optional[str] = None,
                 tls_cert_file: Optional[str] = None, tls_key_file: Optional[str] = None,
                 tls_check_hostname: bool = True, username: Optional[str] = None,
                 password: Optional[str] = None) -> None:
        if timeout_ms <= 0 or connect_timeout_ms <= 0:
            raise ValueError("timeouts must be positive")
        if not tls and (tls_ca_file or tls_cert_file or tls_key_file):
            raise ValueError("TLS files given without tls=True")
        if (tls_cert_file is None) != (tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together")
        if username is not None and password is None:
            raise ValueError("a username needs a password")
        self.servers: List[str] = parse_servers(servers)  # known servers (redirects add)
        self.timeout_ms = timeout_ms                      # per request, on top of waits
        self.connect_timeout_ms = connect_timeout_ms      # per connection attempt
        self.max_redirects = max_redirects                # NOTLEADER hops per request
        self._cur = 0                                     # index of the server in use
        self._conn: Optional[Connection] = None           # open connection, or None
        self._tls: Dict[str, Any] = dict(                 # TLS and login settings
            tls=tls, tls_ca_file=tls_ca_file, tls_cert_file=tls_cert_file,
            tls_key_file=tls_key_file, tls_check_hostname=tls_check_hostname,
            username=username, password=password)

    # ---- plumbing -------------------------------------------------------------

    def _clone(self) -> "Client":
        """A new client with the same settings (and the leader found so far)."""
        c = Client(self.servers, timeout_ms=self.timeout_ms,
                   connect_timeout_ms=self.connect_timeout_ms, max_redirects=self.max_redirects,
                   **self._tls)
        c._cur = self._cur
        return c

    @property
    def server(self) -> str:
        """The server the client talks to now."""
        return self.servers[self._cur]

    def _connect(self) -> Connection:
        """The open connection, connecting to the current server if needed."""
        if self._conn is None:
            addr = self.servers[self._cur]
            t = self.connect_timeout_ms / 1000.0
            o = self._tls
            login = dict(username=o["username"], password=o["password"])
            if addr.startswith("unix:"):
                conn = UnixDomainSocketConnection(path=addr[5:], socket_timeout=t, **login)
            elif o["tls"]:
                host, port = _split_addr(addr)
                conn = SSLConnection(host=host, port=port, socket_timeout=t,
                                     socket_connect_timeout=t, ssl_cert_reqs="required",
                                     ssl_ca_certs=o["tls_ca_file"],
                                     ssl_certfile=o["tls_cert_file"],
                                     ssl_keyfile=o["tls_key_file"],
                                     ssl_check_hostname=o["tls_check_hostname"], **login)
            else:
                host, port = _split_addr(addr)
                conn = Connection(host=host, port=port, socket_timeout=t,
                                  socket_connect_timeout=t, **login)
            keep_codes(conn)
            try:
                conn.connect()
            except BaseException:
                conn.disconnect()
                raise
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        """Close the connection (the next request reconnects)."""
        if self._conn is not None:
            try:
                self._conn.disconnect()
            except Exception:  # noqa: BLE001 - closing a broken socket
                pass
            self._conn = None

    def close(self) -> None:
        """Close the connection.  The client reconnects if used again."""
        self._drop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _follow(self, leader: Optional[str]) -> None:
        """Switch to the leader a NOTLEADER reply named (or the next server)."""
        self._drop()
        if leader:
            if leader not in self.servers:
                self.servers.append(leader)
            self._cur = self.servers.index(leader)
        else:
            self._cur = (self._cur + 1) % len(self.servers)

    def _once(self, args: Sequence[Any], deadline: float) -> Any:
        """Send one request and read its reply before deadline (monotonic
        seconds).  Raises redis' ConnectionError/TimeoutError on I/O trouble
        (the connection is then dropped) and ResponseError for an error
        reply."""
        conn = self._connect()
        try:
            conn.send_command(*args)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise redis.exceptions.TimeoutError("no reply within the timeout")
                if conn.can_read(timeout=min(left, 1.0)):
                    break
            reply = conn.read_response()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
            self._drop()
            raise
        if isinstance(reply, redis.exceptions.ResponseError):
            raise reply
        return reply

    def call(self, *args: Any, wait_ms: int = 0, timeout_ms: Optional[int] = None) -> Any:
        """Send a request, retrying as described in the class docstring, and
        return its reply (bytes, int, list or None).  Error replies raise the
        matching :mod:`fenced.errors` class.  Put the REQID into args
        yourself for state-changing requests (the methods below do)."""
        budget = (self.timeout_ms if timeout_ms is None else timeout_ms) + wait_ms
        deadline = time.monotonic() + budget / 1000.0
        redirects = 0
        refusals = 0          # connection attempts refused in a row
        backoff = 0.02
        last: Optional[Exception] = None
        answered: Optional[FencedError] = None  # the last TRYAGAIN/NOTLEADER reply
        while True:
            try:
                return self._once(args, deadline)
            except redis.exceptions.ResponseError as e:
                err = from_redis(e)
                if isinstance(err, NotLeader):
                    redirects += 1
                    if redirects > self.max_redirects:
                        raise err from None
                    self._follow(err.leader)
                    if err.leader:
                        continue
                    last = answered = err
                elif isinstance(err, TryAgain):
                    last = answered = err
                elif isinstance(err, AuthFailed):
                    self._drop()
                    raise with_context(err, "%s: login refused by %s: " % (args[0], self.server)) \
                        from None
                else:
                    raise err from None
            except redis.exceptions.AuthenticationError as e:
                self._drop()
                raise with_context(from_redis(e), "%s: login refused by %s: " % (
                    args[0], self.server)) from None
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                    OSError) as e:
                last = e
                why = self._cert_failure(e)
                if why is not None:
                    raise Unreachable("%s: TLS to %s: %s" % (args[0], self.server, why)) \
                        from None
                if self._refused(e):
                    refusals += 1
                    self._cur = (self._cur + 1) % len(self.servers)
                    if refusals >= 2 * len(self.servers):
                        raise Unreachable("%s: connection refused by %s" % (
                            args[0], ", ".join(self.servers))) from None
                else:
                    refusals = 0
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, backoff * (0.5 + random.random())))
            backoff = min(backoff * 2, 0.5)
        if answered is not None and not isinstance(last, redis.exceptions.ConnectionError):
            # The servers kept answering TRYAGAIN (no leader, no quorum) or
            # NOTLEADER without a leader until the time was up.
            if isinstance(answered, TryAgain):
                raise with_context(answered, "%s: " % args[0], " (for %d ms)" % budget) from None
            raise answered
        raise Unreachable("%s: no reply from %s within %d ms (%s)" % (
            args[0], self.server, budget, last)) from None

    @staticmethod
    def _chain(e: Optional[BaseException]) -> Iterator[BaseException]:
        """e and the exceptions it was raised from or during, each once."""
        seen = set()
        while e is not None and id(e) not in seen:
            seen.add(id(e))
            yield e
            e = e.__cause__ or e.__context__

    @staticmethod
    def _cert_failure(e: BaseException) -> Optional[str]:
        """The reason when e is a failed certificate check (retrying cannot
        help), else None."""
        for x in Client._chain(e):
            if isinstance(x, ssl.SSLCertVerificationError):
                return "server certificate: %s" % (x.verify_message or x)
            if "certificate verify failed" in str(x):
                return str(x)
        return None

    @staticmethod
    def _refused(e: BaseException) -> bool:
        """Whether the connection was refused (nothing listens there)."""
        return any(isinstance(x, ConnectionRefusedError) or "refused" in str(x).lower() or
                   "Error 111 " in str(x) for x in Client._chain(e))

    # ---- leases ------------------------------------------------------------------

    def lease_grant(self, ttl_ms: int, lock_delay_ms: Optional[int] = None) -> int:
        """LEASE.GRANT: a new lease of ttl_ms; returns its id."""
        args: List[Any] = ["LEASE.GRANT", ttl_ms]
        if lock_delay_ms is not None:
            args += ["LOCKDELAY", lock_delay_ms]
        args += ["REQID", _reqid()]
        return _as_int(self.call(*args), "LEASE.GRANT")

    def lease_keepalive(self, lease: int, timeout_ms: Optional[int] = None) -> int:
        """LEASE.KEEPALIVE: renew for the full TTL; returns the TTL.  Raises
        LeaseLost if the lease is gone."""
        return _as_int(self.call("LEASE.KEEPALIVE", lease, timeout_ms=timeout_ms),
                       "LEASE.KEEPALIVE")

    def lease_revoke(self, lease: int) -> None:
        """LEASE.REVOKE: end the lease and release its locks (idempotent)."""
        self.call("LEASE.REVOKE", lease)

    def lease_info(self, lease: int) -> Optional[LeaseInfo]:
        """LEASE.INFO, or None when the lease is gone."""
        try:
            r = self.call("LEASE.INFO", lease)
        except LeaseLost:
            return None
        return LeaseInfo(*[_as_int(x, "LEASE.INFO") for x in r])

    # ---- locks -------------------------------------------------------------------

    def _wait_request(self, cmd: str, name: str, arg: Any, wait_ms: int,
                      shared: bool = False, signed: bool = False) -> Any:
        """cmd name arg [SHARED] [WAIT ms] REQID id [SIGNED] (SIGNED must be
        the last word); a nil that comes clearly before the wait is over (a
        retried request) is asked again for the time left.  Returns the
        reply, None when the wait ran out."""
        start = time.monotonic()
        left = wait_ms
        for _ in range(4):
            args: List[Any] = [cmd, name] + (list(arg) if isinstance(arg, tuple) else [arg])
            if shared:
                args.append("SHARED")
            if left > 0:
                args += ["WAIT", left]
            args += ["REQID", _reqid()]
            if signed:
                args.append("SIGNED")
            r = self.call(*args, wait_ms=left)
            if r is not None or wait_ms == 0:
                return r
            elapsed = int((time.monotonic() - start) * 1000)
            slack = max(wait_ms // 20, 50)
            if elapsed + slack >= wait_ms:
                return None
            left = wait_ms - elapsed
        return None

    def lock_lease(self, name: str, lease: int, wait_ms: int = 0,
                   shared: bool = False) -> Optional[int]:
        """LOCK name lease [SHARED] [WAIT wait_ms]: the fencing token, or None
        if the lock stayed busy.  Locking again with the holding lease
        returns the same token.  ``shared``: a shared (read) hold, whose
        token the other holders of its phase share (docs/recipes.md)."""
        r = self._wait_request("LOCK", name, lease, wait_ms, shared)
        return None if r is None else _as_int(r, "LOCK")

    def acquire(self, name: str, ttl_ms: int, wait_ms: int = 0,
                shared: bool = False) -> Optional[Tuple[int, int]]:
        """ACQUIRE: a dedicated lease and the lock in one request; returns
        (token, lease) or None.  Nothing renews that lease: use
        :meth:`lock` for a held lock that stays alive."""
        r = self._wait_request("ACQUIRE", name, ttl_ms, wait_ms, shared)
        if r is None:
            return None
        return _as_int(r[0], "ACQUIRE"), _as_int(r[1], "ACQUIRE")

    def lock_lease_signed(self, name: str, lease: int, wait_ms: int = 0,
                          shared: bool = False) -> Optional[SignedToken]:
        """As :meth:`lock_lease` with ``SIGNED``: the token signed by the
        server's key (:class:`SignedToken`), or None if the lock stayed
        busy.  A server without ``--token-signing-key`` answers ERR
        (:class:`fenced.ServerError`) and grants nothing.  A reentrant LOCK
        gets the same string (Ed25519 is deterministic)."""
        r = self._wait_request("LOCK", name, lease, wait_ms, shared, signed=True)
        return None if r is None else _as_signed(r, "LOCK")

    def acquire_signed(self, name: str, ttl_ms: int, wait_ms: int = 0,
                       shared: bool = False) -> Optional[Tuple[SignedToken, int]]:
        """As :meth:`acquire` with ``SIGNED``: (signed token, lease) or
        None."""
        r = self._wait_request("ACQUIRE", name, ttl_ms, wait_ms, shared, signed=True)
        return None if r is None else _signed_pair(r, "ACQUIRE")

    def _multi_request(self, cmd: str, arg: int, names: Sequence[str], wait_ms: int) -> Any:
        """cmd arg name... [WAIT ms] REQID id (one REQID, so a retry after a
        lost reply is applied once)."""
        if not names:
            raise ValueError("a multi-lock needs at least one name")
        args: List[Any] = [cmd, arg] + list(names)
        if wait_ms > 0:
            args += ["WAIT", wait_ms]
        args += ["REQID", _reqid()]
        return self.call(*args, wait_ms=wait_ms)

    def lock_multi(self, names: Sequence[str], lease: int, wait_ms: int = 0) -> Optional[int]:
        """LOCK.MULTI lease name... [WAIT wait_ms]: every name or none, with
        one fencing token valid at each of them; None if some name stayed
        busy (then nothing was taken).  ``unlock(any_name, token)`` releases
        all of them."""
        r = self._multi_request("LOCK.MULTI", lease, names, wait_ms)
        return None if r is None else _as_int(r, "LOCK.MULTI")

    def acquire_multi(self, names: Sequence[str], ttl_ms: int,
                      wait_ms: int = 0) -> Optional[Tuple[int, int]]:
        """ACQUIRE.MULTI: a dedicated lease and every name, all or none;
        (token, lease) or None.  ``unlock(any_name, token)`` releases all
        and revokes the lease."""
        r = self._multi_request("ACQUIRE.MULTI", ttl_ms, names, wait_ms)
        if r is None:
            return None
        return _as_int(r[0], "ACQUIRE.MULTI"), _as_int(r[1], "ACQUIRE.MULTI")

    def unlock(self, name: str, token: int, lease: Optional[int] = None) -> bool:
        """UNLOCK name token [LEASE lease]: True if that token held the lock
        and released it.  A shared hold names its lease (the holders of a
        phase share the token)."""
        args: List[Any] = ["UNLOCK", name, token]
        if lease is not None:
            args += ["LEASE", lease]
        return _as_int(self.call(*args), "UNLOCK") == 1

    def lock_info(self, name: str) -> Optional[LockInfo]:
        """LOCK.INFO: the holder, or None when the lock is free."""
        r = self.call("LOCK.INFO", name)
        if r is None:
            return None
        head = [_as_int(x, "LOCK.INFO") for x in r[:4]]
        if len(r) >= 6:
            holders = tuple((_as_int(h[0], "LOCK.INFO"), _as_int(h[1], "LOCK.INFO"))
                            for h in r[5])
            return LockInfo(head[0], head[1], head[2], head[3], shared=True, holders=holders)
        return LockInfo(head[0], head[1], head[2], head[3])

    # ---- semaphores of slots (docs/recipes.md) -------------------------------------

    def sem_acquire(self, name: str, n: int, lease: int,
                    wait_ms: int = 0) -> Optional[Tuple[int, int]]:
        """SEM.ACQUIRE name n lease [WAIT wait_ms]: (slot, token), or None
        when every slot stayed taken.  Fence the resource as ``name#slot``
        with the token.  Acquiring again with the same lease returns the
        slot it holds."""
        r = self._wait_request("SEM.ACQUIRE", name, (n, lease), wait_ms)
        if r is None:
            return None
        return _as_int(r[0], "SEM.ACQUIRE"), _as_int(r[1], "SEM.ACQUIRE")

    def sem_release(self, name: str, slot: int, token: int) -> bool:
        """SEM.RELEASE: True if that token held the slot and freed it."""
        return _as_int(self.call("SEM.RELEASE", name, slot, token), "SEM.RELEASE") == 1

    def sem_info(self, name: str) -> Optional[SemInfo]:
        """SEM.INFO, or None when no such semaphore exists."""
        r = self.call("SEM.INFO", name)
        if r is None:
            return None
        slots = [SemSlot(*[_as_int(x, "SEM.INFO") for x in s]) for s in r[1]]
        return SemInfo(_as_int(r[0], "SEM.INFO"), slots, _as_int(r[2], "SEM.INFO"))

    # ---- leader election (fenced.elect) -------------------------------------------

    def campaign(self, name: str, lease: int, value: "elect.Value",
                 wait_ms: int = 0) -> Optional[Tuple[int, int]]:
        """ELECTION.CAMPAIGN: queue ``lease`` as a candidate for ``name``
        with ``value``; returns (token, lease) once elected, None when not
        elected within wait_ms (0: try once).  Keep the lease alive while
        campaigning and leading."""
        r = self.call(*elect.campaign_args(name, lease, value, wait_ms), wait_ms=wait_ms)
        token = elect.campaign_reply(r)
        return None if token is None else (token, lease)

    def proclaim(self, name: str, token: int, value: "elect.Value") -> int:
        """ELECTION.PROCLAIM: the leader's new value; returns the new
        revision, or 0 when ``token`` no longer leads."""
        return _as_int(self.call(*elect.proclaim_args(name, token, value)), "ELECTION.PROCLAIM")

    def resign(self, name: str, token: int) -> bool:
        """ELECTION.RESIGN: True if ``token`` led and stepped down."""
        return _as_int(self.call("ELECTION.RESIGN", name, token), "ELECTION.RESIGN") == 1

    def leader(self, name: str) -> "Optional[elect.ElectionState]":
        """ELECTION.LEADER (linearizable): the leader's state, or None."""
        return elect.state_reply(self.call("ELECTION.LEADER", name), "ELECTION.LEADER")

    def observe(self, name: str, after: Optional[int] = None,
                wait_ms: int = 0) -> "Optional[elect.ElectionState]":
        """ELECTION.OBSERVE: without ``after``, the state now (a state with
        nobody leading has value None); with it, the state once its
        revision is above ``after``, waiting up to wait_ms, or None when
        nothing changed by then.  Any node answers (followers too)."""
        return elect.state_reply(self.call(*elect.observe_args(name, after, wait_ms),
                                           wait_ms=wait_ms), "ELECTION.OBSERVE")

    def info(self) -> Dict[str, str]:
        """INFO as a dict (``role``, ``last_token``, ``leases``, ...)."""
        text = self.call("INFO")
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        out: Dict[str, str] = {}
        for line in str(text).splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def ping(self) -> bool:
        """PING: True when the server answers."""
        return self.call("PING") in (b"PONG", "PONG")

    def lock(self, name: str, ttl_ms: int = 10000, wait_ms: int = 0, *,
             on_lost: Optional[Callable[["Lock", FencedError], None]] = None,
             on_wait: Optional[Callable[[Optional[LockInfo]], None]] = None,
             raise_on_lost: bool = True, shared: bool = False,
             signed: bool = False) -> "Lock":
        """A lock on ``name`` held under a lease of ``ttl_ms`` that is renewed
        every third of its TTL until released.  Use it as a context manager
        (``with c.lock("orders") as lock: ... lock.token``) or call
        :meth:`Lock.acquire` / :meth:`Lock.release`.

        ``wait_ms``: how long to queue (FIFO) for a busy lock; 0 tries once.
        Acquiring raises :class:`NotAcquired` when the lock stayed busy.
        ``on_lost(lock, error)`` runs on the renewal thread when the lease
        is lost; ``lock.lost`` (a threading.Event) is set as well.
        ``on_wait(info)`` is called once, before waiting, when the lock is
        busy (info: its holder).  With ``raise_on_lost`` the with-block
        raises :class:`LeaseLost` at its end if the lease was lost during it.
        ``shared``: a shared (read) lock; readers of one phase share a token.
        ``signed``: the grant is signed (``lock.signed_token``; the server
        needs ``--token-signing-key``).
        """
        return Lock(self, name, ttl_ms, wait_ms, on_lost=on_lost, on_wait=on_wait,
                    raise_on_lost=raise_on_lost, shared=shared, signed=signed)


class Lock:
    """A held lock: its fencing token, its lease and a renewal thread.

    Attributes (valid after acquiring): ``token`` (int: pass it to the
    resource with every write; reading it before the lock was acquired
    raises :class:`NotAcquired`, so its type is ``int``, never None),
    ``lease`` (int, likewise), ``acquired``, ``valid_until`` (a
    ``time.monotonic()`` deadline: the send time of the last successful
    grant or renewal + TTL - TTL/10 - 5 ms; past it the server may have
    given the lock away.  It is for liveness only: safety comes from the
    resource rejecting stale tokens), ``lost`` (threading.Event) and
    ``lost_error``; taken with ``signed=True``, ``token`` is a
    :class:`SignedToken` and ``signed_token`` its string.
    """

    def __init__(self, client: Client, name: str, ttl_ms: int, wait_ms: int = 0, *,
                 on_lost: Optional[Callable[["Lock", FencedError], None]] = None,
                 on_wait: Optional[Callable[[Optional[LockInfo]], None]] = None,
                 raise_on_lost: bool = True, shared: bool = False,
                 signed: bool = False) -> None:
        if not name:
            raise ValueError("the lock name must not be empty")
        if ttl_ms < 10 or wait_ms < 0:
            raise ValueError("ttl_ms must be >= 10 and wait_ms >= 0")
        self.client = client                  # main connection (grant, lock, release)
        self.name = name                      # lock name
        self.ttl_ms = ttl_ms                  # lease TTL
        self.wait_ms = wait_ms                # how long to queue
        self.shared = shared                  # a shared (read) hold
        self.signed = signed                  # the grant is signed (SIGNED)
        self.on_lost = on_lost                # callback when the lease is lost
        self.on_wait = on_wait                # callback before a wait
        self.raise_on_lost = raise_on_lost    # with-block raises LeaseLost at its end
        self._token: Optional[int] = None     # fencing token once acquired
        self._lease: Optional[int] = None     # lease id once granted
        self.valid_until: float = 0.0         # monotonic deadline (liveness only)
        self.lost = threading.Event()         # set when the lease is lost
        self.lost_error: Optional[FencedError] = None  # why it was lost
        self._stop = threading.Event()        # tells the renewal thread to end
        self._thread: Optional[threading.Thread] = None  # the renewal thread
        self._released = False                # release() ran

    def __repr__(self) -> str:
        return "<fenced.Lock %r token=%r lease=%r%s>" % (
            self.name, self._token, self._lease, " lost" if self.lost.is_set() else "")

    @property
    def token(self) -> int:
        """The fencing token (pass it to the resource with every write).
        Raises NotAcquired before the lock was acquired; stays readable
        after release or loss (the resource refuses it once a newer holder
        wrote)."""
        if self._token is None:
            raise NotAcquired("lock %r is not acquired: it has no token yet" % self.name)
        return self._token

    @property
    def signed_token(self) -> str:
        """The signed token's string, for a resource that verifies fenced's
        signature.  Raises NotAcquired before the lock was acquired, and
        FencedError for a lock taken without ``signed=True``."""
        return _signed_string(self.token, self.name)

    @property
    def lease(self) -> int:
        """The lease id.  Raises NotAcquired before the lease was granted."""
        if self._lease is None:
            raise NotAcquired("lock %r has no lease yet" % self.name)
        return self._lease

    @property
    def acquired(self) -> bool:
        """The lock was acquired (it may since have been released or lost)."""
        return self._token is not None

    @property
    def held(self) -> bool:
        """Acquired, not released, not lost, and before valid_until."""
        return (self._token is not None and not self._released and not self.lost.is_set()
                and time.monotonic() < self.valid_until)

    def remaining_s(self) -> float:
        """Seconds until valid_until (negative once past)."""
        return self.valid_until - time.monotonic()

    # ---- acquire / release ---------------------------------------------------------

    def acquire(self) -> "Lock":
        """Grant the lease, start renewing it, and lock (waiting up to
        wait_ms).  Raises NotAcquired, Unreachable, LimitReached, ..."""
        if self._token is not None:
            raise FencedError("lock %r is already acquired" % self.name)
        sent = time.monotonic()
        lease = self.client.lease_grant(self.ttl_ms)
        self._lease = lease
        self.valid_until = sent + (self.ttl_ms - _margin_ms(self.ttl_ms)) / 1000.0
        self._start_renewals()
        try:
            token = None
            lock = self.client.lock_lease_signed if self.signed else self.client.lock_lease
            if self.on_wait is not None and self.wait_ms > 0:
                token = lock(self.name, lease, 0, self.shared)
                if token is None:
                    self.on_wait(self.client.lock_info(self.name))
            if token is None:
                token = lock(self.name, lease, self.wait_ms, self.shared)
            if token is None:
                raise NotAcquired("lock %r not acquired within %d ms" % (self.name, self.wait_ms))
            if self.lost.is_set():
                raise self.lost_error or LeaseLost("lease lost while waiting")
        except BaseException:
            self._stop_renewals()
            self._revoke_quietly()
            raise
        self._token = token
        return self

    def release(self) -> None:
        """Stop renewing, UNLOCK by token and revoke the lease.  Safe to call
        twice.  Errors are raised only when the lease was not lost (a lost
        lease has nothing left to release)."""
        if self._released:
            return
        self._released = True
        self._stop_renewals()
        if self._lease is None:
            return
        try:
            if self._token is not None:
                self.client.unlock(self.name, self._token,
                                   self._lease if self.shared else None)
            self.client.lease_revoke(self._lease)
        except FencedError:
            if not self.lost.is_set():
                raise

    def _revoke_quietly(self) -> None:
        """Revoke the lease after a failed acquire (errors ignored: it
        expires on its own)."""
        if self._lease is not None:
            try:
                self.client.lease_revoke(self._lease)
            except FencedError:
                pass

    def __enter__(self) -> "Lock":
        return self.acquire()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.release()
        except FencedError:
            if exc_type is None:
                raise
        if exc_type is None and self.raise_on_lost and self.lost.is_set():
            raise self.lost_error or LeaseLost("the lease of lock %r was lost" % self.name)

    # ---- renewals --------------------------------------------------------------------

    def _start_renewals(self) -> None:
        """Start the renewal thread (its own client and connection)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, args=(self.client._clone(),),
                                        name="fenced-keepalive-%s" % self.name, daemon=True)
        self._thread.start()

    def _stop_renewals(self) -> None:
        """Stop the renewal thread and wait for it (unless called from it)."""
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join()
        self._thread = None

    def _renew_loop(self, ka: Client) -> None:
        """Renew every TTL/3; retry failed renewals until valid_until; on
        NOLEASE or a missed deadline, mark the lock lost."""
        interval = self.ttl_ms / 3000.0
        delay = interval
        lease = self.lease
        try:
            while not self._stop.wait(delay):
                sent = time.monotonic()
                left_ms = int((self.valid_until - sent) * 1000)
                if left_ms <= 0:
                    self._mark_lost(LeaseLost(
                        "lease %d of lock %r: no renewal succeeded before valid_until"
                        % (lease, self.name)))
                    return
                try:
                    got = ka.lease_keepalive(lease, timeout_ms=max(10, min(left_ms,
                                                                              self.ttl_ms // 3)))
                except LeaseLost as e:
                    self._mark_lost(e)
                    return
                except FencedError:
                    delay = min(interval, max(0.01, self.ttl_ms / 20000.0))
                    continue
                # The reply is how long the lease is guaranteed from our send:
                # a cluster's leader answering without a log entry replies
                # the TTL minus its election timeout (docs/leases.md).
                granted = min(self.ttl_ms, got) if isinstance(got, int) and got > 0 else self.ttl_ms
                self.valid_until = sent + max(0, granted - _margin_ms(self.ttl_ms)) / 1000.0
                delay = interval
        finally:
            ka.close()

    def _mark_lost(self, err: FencedError) -> None:
        """Record the loss, set the event, run the callback."""
        self.lost_error = err
        self.lost.set()
        if self.on_lost is not None:
            try:
                self.on_lost(self, err)
            except Exception:  # noqa: BLE001 - a failing callback must not kill the thread silently
                import traceback
                traceback.print_exc()

