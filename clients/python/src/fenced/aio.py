"""The fenced client for asyncio: ``fenced.aio`` is to :mod:`fenced` what
``redis.asyncio`` is to ``redis``.

    import fenced.aio

    async def main() -> None:
        c = fenced.aio.Client("127.0.0.1:7700")
        store = fenced.aio.Store("127.0.0.1:7710")
        async with c.lock("orders", ttl_ms=10000, wait_ms=5000) as lock:
            await store.fset("orders", lock.token, "k", "v")
        await c.close()
        await store.close()

The behaviour is the sync client's: ``NOTLEADER`` redirects, a random
``REQID`` on every state-changing request that its retries reuse (after a
timeout, a reset connection or ``TRYAGAIN``), refused connections failing
fast, the same errors (:mod:`fenced.errors`).  A :class:`Lock`'s lease is
renewed every TTL/3 by a task of its own over a connection of its own;
when the lease is lost, ``lock.lost`` (an :class:`asyncio.Event`) is set
and ``on_lost`` runs.

The renewal task runs only when the event loop does: a coroutine that
blocks the loop (a synchronous call, CPU-bound work) holds up renewals the
way a paused process does, and the server may give the lock away.  Safety
comes from the resource rejecting the old token (fence-store's STALE), not
from the renewals.

Built on redis-py's ``redis.asyncio`` connection class (RESP2).  A Client
serves one request at a time (concurrent calls on one Client wait for each
other); use one Client per task for concurrency.
"""
import asyncio
import random
import time
from typing import (Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union)

import redis
import redis.asyncio.connection as _rconn

from .client import (DEFAULT_SERVER, LeaseInfo, LockInfo, SemInfo, SemSlot, Servers,
                     SignedToken, Token, _as_int, _as_signed, _margin_ms, _reqid, _signed_pair,
                     _signed_string, _split_addr, parse_servers, wire_token)
from . import elect
from .client import Client as _SyncClient
from .errors import (AuthFailed, FencedError, LeaseLost, NotAcquired, NotLeader, TryAgain,
                     Unreachable, from_redis, keep_codes, with_context)
from .store import DEFAULT_STORE, Value

__all__ = ["Client", "Lock", "Store", "LeaseInfo", "LockInfo"]

#: on_lost(lock, error) and on_wait(info) may be plain functions or coroutines.
OnLost = Callable[["Lock", FencedError], Optional[Awaitable[None]]]
OnWait = Callable[[Optional[LockInfo]], Optional[Awaitable[None]]]


class Client:
    """An asyncio connection to a fenced cluster; the keywords are
    :class:`fenced.Client`'s (servers, timeout_ms, connect_timeout_ms,
    max_redirects, tls, tls_ca_file, tls_cert_file, tls_key_file,
    tls_check_hostname, username, password) and mean the same."""

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
        self._conn: Optional[Any] = None                  # open redis.asyncio connection
        self._busy_lock: Optional[asyncio.Lock] = None    # one request at a time (made
                                                          # in the loop that uses it)
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

    def _busy(self) -> asyncio.Lock:
        """The lock that lets one request at a time use the connection."""
        if self._busy_lock is None:
            self._busy_lock = asyncio.Lock()
        return self._busy_lock

    async def _connect(self) -> Any:
        """The open connection, connecting to the current server if needed."""
        if self._conn is None:
            addr = self.servers[self._cur]
            t = self.connect_timeout_ms / 1000.0
            o = self._tls
            login = dict(username=o["username"], password=o["password"])
            conn: Any
            if addr.startswith("unix:"):
                conn = _rconn.UnixDomainSocketConnection(path=addr[5:], socket_timeout=None,
                                                         **login)
            elif o["tls"]:
                host, port = _split_addr(addr)
                conn = _rconn.SSLConnection(host=host, port=port, socket_timeout=None,
                                            socket_connect_timeout=t, ssl_cert_reqs="required",
                                            ssl_ca_certs=o["tls_ca_file"],
                                            ssl_certfile=o["tls_cert_file"],
                                            ssl_keyfile=o["tls_key_file"],
                                            ssl_check_hostname=o["tls_check_hostname"], **login)
            else:
                host, port = _split_addr(addr)
                conn = _rconn.Connection(host=host, port=port, socket_timeout=None,
                                         socket_connect_timeout=t, **login)
            keep_codes(conn)
            try:
                await asyncio.wait_for(conn.connect(), t + 1.0)
            except asyncio.TimeoutError:
                await self._close_quietly(conn)
                raise redis.exceptions.TimeoutError("connecting to %s timed out" % addr) \
                    from None
            except BaseException:
                await self._close_quietly(conn)
                raise
            self._conn = conn
        return self._conn

    @staticmethod
    async def _close_quietly(conn: Any) -> None:
        """Close a connection, ignoring errors of a broken one."""
        try:
            await conn.disconnect()
        except Exception:  # noqa: BLE001 - closing a broken socket
            pass

    async def _drop(self) -> None:
        """Forget the connection (at once: it is never used again, even if
        closing it is cancelled) and close it."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._close_quietly(conn)

    async def close(self) -> None:
        """Close the connection.  The client reconnects if used again."""
        await self._drop()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _follow(self, leader: Optional[str]) -> None:
        """Switch to the leader a NOTLEADER reply named (or the next server)."""
        await self._drop()
        if leader:
            if leader not in self.servers:
                self.servers.append(leader)
            self._cur = self.servers.index(leader)
        else:
            self._cur = (self._cur + 1) % len(self.servers)

    async def _once(self, args: Sequence[Any], deadline: float) -> Any:
        """Send one request and read its reply before deadline (monotonic
        seconds).  Raises redis' ConnectionError/TimeoutError on I/O trouble
        and ResponseError for an error reply.  A request that does not
        complete (an I/O error, the deadline, a cancelled task) drops the
        connection: its reply can never be read as another request's."""
        conn = await self._connect()
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                raise redis.exceptions.TimeoutError("no reply within the timeout")
            return await asyncio.wait_for(self._exchange(conn, args), left)
        except redis.exceptions.ResponseError:
            raise
        except asyncio.TimeoutError:
            await self._drop()
            raise redis.exceptions.TimeoutError("no reply within the timeout") from None
        except BaseException:
            await self._drop()
            raise

    @staticmethod
    async def _exchange(conn: Any, args: Sequence[Any]) -> Any:
        """Send args on conn and read the reply."""
        await conn.send_command(*args)
        return await conn.read_response()

    async def call(self, *args: Any, wait_ms: int = 0, timeout_ms: Optional[int] = None) -> Any:
        """Send a request, retrying as :meth:`fenced.Client.call` does, and
        return its reply (bytes, int, list or None).  Error replies raise
        the matching :mod:`fenced.errors` class.  Put the REQID into args
        yourself for state-changing requests (the methods below do)."""
        async with self._busy():
            return await self._call(args, wait_ms, timeout_ms)

    async def _call(self, args: Sequence[Any], wait_ms: int, timeout_ms: Optional[int]) -> Any:
        budget = (self.timeout_ms if timeout_ms is None else timeout_ms) + wait_ms
        deadline = time.monotonic() + budget / 1000.0
        redirects = 0
        refusals = 0          # connection attempts refused in a row
        backoff = 0.02
        last: Optional[BaseException] = None
        answered: Optional[FencedError] = None  # the last TRYAGAIN/NOTLEADER reply
        while True:
            try:
                return await self._once(args, deadline)
            except redis.exceptions.ResponseError as e:
                err = from_redis(e)
                if isinstance(err, NotLeader):
                    redirects += 1
                    if redirects > self.max_redirects:
                        raise err from None
                    await self._follow(err.leader)
                    if err.leader:
                        continue
                    last = answered = err
                elif isinstance(err, TryAgain):
                    last = answered = err
                elif isinstance(err, AuthFailed):
                    await self._drop()
                    raise with_context(err, "%s: login refused by %s: " % (args[0], self.server)) \
                        from None
                else:
                    raise err from None
            except redis.exceptions.AuthenticationError as e:
                await self._drop()
                raise with_context(from_redis(e), "%s: login refused by %s: " % (
                    args[0], self.server)) from None
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                    OSError) as e:
                last = e
                why = _SyncClient._cert_failure(e)
                if why is not None:
                    raise Unreachable("%s: TLS to %s: %s" % (args[0], self.server, why)) \
                        from None
                if _SyncClient._refused(e):
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
            await asyncio.sleep(min(left, backoff * (0.5 + random.random())))
            backoff = min(backoff * 2, 0.5)
        if answered is not None and not isinstance(last, redis.exceptions.ConnectionError):
            if isinstance(answered, TryAgain):
                raise with_context(answered, "%s: " % args[0], " (for %d ms)" % budget) \
                    from None
            raise answered
        raise Unreachable("%s: no reply from %s within %d ms (%s)" % (
            args[0], self.server, budget, last)) from None

    # ---- leases ------------------------------------------------------------------

    async def lease_grant(self, ttl_ms: int, lock_delay_ms: Optional[int] = None) -> int:
        """LEASE.GRANT: a new lease of ttl_ms; returns its id."""
        args: List[Any] = ["LEASE.GRANT", ttl_ms]
        if lock_delay_ms is not None:
            args += ["LOCKDELAY", lock_delay_ms]
        args += ["REQID", _reqid()]
        return _as_int(await self.call(*args), "LEASE.GRANT")

    async def lease_keepalive(self, lease: int, timeout_ms: Optional[int] = None) -> int:
        """LEASE.KEEPALIVE: renew for the full TTL; returns the TTL.  Raises
        LeaseLost if the lease is gone."""
        return _as_int(await self.call("LEASE.KEEPALIVE", lease, timeout_ms=timeout_ms),
                       "LEASE.KEEPALIVE")

    async def lease_revoke(self, lease: int) -> None:
        """LEASE.REVOKE: end the lease and release its locks (idempotent)."""
        await self.call("LEASE.REVOKE", lease)

    async def lease_info(self, lease: int) -> Optional[LeaseInfo]:
        """LEASE.INFO, or None when the lease is gone."""
        try:
            r = await self.call("LEASE.INFO", lease)
        except LeaseLost:
            return None
        return LeaseInfo(*[_as_int(x, "LEASE.INFO") for x in r])

    # ---- locks -------------------------------------------------------------------

    async def _wait_request(self, cmd: str, name: str, arg: Any, wait_ms: int,
                            shared: bool = False, signed: bool = False) -> Any:
        """As fenced.Client._wait_request: cmd name arg [SHARED] [WAIT ms]
        REQID id [SIGNED] (arg a value or a tuple of them), asked again for
        the time left after an early nil."""
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
            r = await self.call(*args, wait_ms=left)
            if r is not None or wait_ms == 0:
                return r
            elapsed = int((time.monotonic() - start) * 1000)
            slack = max(wait_ms // 20, 50)
            if elapsed + slack >= wait_ms:
                return None
            left = wait_ms - elapsed
        return None

    async def lock_lease(self, name: str, lease: int, wait_ms: int = 0,
                         shared: bool = False) -> Optional[int]:
        """LOCK name lease [SHARED] [WAIT wait_ms]: the fencing token, or None
        if the lock stayed busy.  ``shared``: a shared (read) hold, whose
        token the other holders of its phase share (docs/recipes.md)."""
        r = await self._wait_request("LOCK", name, lease, wait_ms, shared)
        return None if r is None else _as_int(r, "LOCK")

    async def acquire(self, name: str, ttl_ms: int, wait_ms: int = 0,
                      shared: bool = False) -> Optional[Tuple[int, int]]:
        """ACQUIRE: a dedicated lease and the lock in one request; returns
        (token, lease) or None.  Nothing renews that lease: use :meth:`lock`
        for a held lock that stays alive."""
        r = await self._wait_request("ACQUIRE", name, ttl_ms, wait_ms, shared)
        if r is None:
            return None
        return _as_int(r[0], "ACQUIRE"), _as_int(r[1], "ACQUIRE")

    async def lock_lease_signed(self, name: str, lease: int, wait_ms: int = 0,
                                shared: bool = False) -> Optional[SignedToken]:
        """As :meth:`fenced.Client.lock_lease_signed`: LOCK ... SIGNED, the
        signed token or None."""
        r = await self._wait_request("LOCK", name, lease, wait_ms, shared, signed=True)
        return None if r is None else _as_signed(r, "LOCK")

    async def acquire_signed(self, name: str, ttl_ms: int, wait_ms: int = 0,
                             shared: bool = False) -> Optional[Tuple[SignedToken, int]]:
        """As :meth:`fenced.Client.acquire_signed`: (signed token, lease) or
        None."""
        r = await self._wait_request("ACQUIRE", name, ttl_ms, wait_ms, shared, signed=True)
        return None if r is None else _signed_pair(r, "ACQUIRE")

    async def _multi_request(self, cmd: str, arg: int, names: Sequence[str], wait_ms: int) -> Any:
        """cmd arg name... [WAIT ms] REQID id (one REQID for the retries)."""
        if not names:
            raise ValueError("a multi-lock needs at least one name")
        args: List[Any] = [cmd, arg] + list(names)
        if wait_ms > 0:
            args += ["WAIT", wait_ms]
        args += ["REQID", _reqid()]
        return await self.call(*args, wait_ms=wait_ms)

    async def lock_multi(self, names: Sequence[str], lease: int,
                         wait_ms: int = 0) -> Optional[int]:
        """LOCK.MULTI: every name or none, one fencing token; None if some
        name stayed busy.  ``unlock(any_name, token)`` releases all."""
        r = await self._multi_request("LOCK.MULTI", lease, names, wait_ms)
        return None if r is None else _as_int(r, "LOCK.MULTI")

    async def acquire_multi(self, names: Sequence[str], ttl_ms: int,
                            wait_ms: int = 0) -> Optional[Tuple[int, int]]:
        """ACQUIRE.MULTI: a dedicated lease and every name, all or none;
        (token, lease) or None."""
        r = await self._multi_request("ACQUIRE.MULTI", ttl_ms, names, wait_ms)
        if r is None:
            return None
        return _as_int(r[0], "ACQUIRE.MULTI"), _as_int(r[1], "ACQUIRE.MULTI")

    async def unlock(self, name: str, token: int, lease: Optional[int] = None) -> bool:
        """UNLOCK name token [LEASE lease]: True if that token held the lock
        and released it (a shared hold names its lease)."""
        args: List[Any] = ["UNLOCK", name, token]
        if lease is not None:
            args += ["LEASE", lease]
        return _as_int(await self.call(*args), "UNLOCK") == 1

    async def lock_info(self, name: str) -> Optional[LockInfo]:
        """LOCK.INFO: the holder, or None when the lock is free (a shared
        lock: ``shared`` and its ``holders`` too)."""
        r = await self.call("LOCK.INFO", name)
        if r is None:
            return None
        head = [_as_int(x, "LOCK.INFO") for x in r[:4]]
        if len(r) >= 6:
            holders = tuple((_as_int(h[0], "LOCK.INFO"), _as_int(h[1], "LOCK.INFO"))
                            for h in r[5])
            return LockInfo(head[0], head[1], head[2], head[3], shared=True, holders=holders)
        return LockInfo(head[0], head[1], head[2], head[3])

    # ---- semaphores of slots (docs/recipes.md) -------------------------------------

    async def sem_acquire(self, name: str, n: int, lease: int,
                          wait_ms: int = 0) -> Optional[Tuple[int, int]]:
        """SEM.ACQUIRE name n lease [WAIT wait_ms]: (slot, token), or None
        when every slot stayed taken.  Fence the resource as ``name#slot``
        with the token.  Acquiring again with the same lease returns the
        slot it holds."""
        r = await self._wait_request("SEM.ACQUIRE", name, (n, lease), wait_ms)
        if r is None:
            return None
        return _as_int(r[0], "SEM.ACQUIRE"), _as_int(r[1], "SEM.ACQUIRE")

    async def sem_release(self, name: str, slot: int, token: int) -> bool:
        """SEM.RELEASE: True if that token held the slot and freed it."""
        return _as_int(await self.call("SEM.RELEASE", name, slot, token), "SEM.RELEASE") == 1

    async def sem_info(self, name: str) -> Optional[SemInfo]:
        """SEM.INFO, or None when no such semaphore exists."""
        r = await self.call("SEM.INFO", name)
        if r is None:
            return None
        slots = [SemSlot(*[_as_int(x, "SEM.INFO") for x in s]) for s in r[1]]
        return SemInfo(_as_int(r[0], "SEM.INFO"), slots, _as_int(r[2], "SEM.INFO"))

    # ---- leader election (fenced.elect) -------------------------------------------

    async def campaign(self, name: str, lease: int, value: "elect.Value",
                 wait_ms: int = 0) -> Optional[Tuple[int, int]]:
        """ELECTION.CAMPAIGN: queue ``lease`` as a candidate for ``name``
        with ``value``; returns (token, lease) once elected, None when not
        elected within wait_ms (0: try once).  Keep the lease alive while
        campaigning and leading."""
        r = await self.call(*elect.campaign_args(name, lease, value, wait_ms), wait_ms=wait_ms)
        token = elect.campaign_reply(r)
        return None if token is None else (token, lease)

    async def proclaim(self, name: str, token: int, value: "elect.Value") -> int:
        """ELECTION.PROCLAIM: the leader's new value; returns the new
        revision, or 0 when ``token`` no longer leads."""
        return _as_int(await self.call(*elect.proclaim_args(name, token, value)), "ELECTION.PROCLAIM")

    async def resign(self, name: str, token: int) -> bool:
        """ELECTION.RESIGN: True if ``token`` led and stepped down."""
        return _as_int(await self.call("ELECTION.RESIGN", name, token), "ELECTION.RESIGN") == 1

    async def leader(self, name: str) -> "Optional[elect.ElectionState]":
        """ELECTION.LEADER (linearizable): the leader's state, or None."""
        return elect.state_reply(await self.call("ELECTION.LEADER", name), "ELECTION.LEADER")

    async def observe(self, name: str, after: Optional[int] = None,
                wait_ms: int = 0) -> "Optional[elect.ElectionState]":
        """ELECTION.OBSERVE: without ``after``, the state now (a state with
        nobody leading has value None); with it, the state once its
        revision is above ``after``, waiting up to wait_ms, or None when
        nothing changed by then.  Any node answers (followers too)."""
        return elect.state_reply(await self.call(*elect.observe_args(name, after, wait_ms),
                                           wait_ms=wait_ms), "ELECTION.OBSERVE")

    async def info(self) -> Dict[str, str]:
        """INFO as a dict (``role``, ``last_token``, ``leases``, ...)."""
        text = await self.call("INFO")
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        out: Dict[str, str] = {}
        for line in str(text).splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    async def ping(self) -> bool:
        """PING: True when the server answers."""
        return await self.call("PING") in (b"PONG", "PONG")

    def lock(self, name: str, ttl_ms: int = 10000, wait_ms: int = 0, *,
             on_lost: Optional[OnLost] = None, on_wait: Optional[OnWait] = None,
             raise_on_lost: bool = True, signed: bool = False) -> "Lock":
        """A lock on ``name`` held under a lease of ``ttl_ms`` that a task
        renews every third of its TTL until released; as
        :meth:`fenced.Client.lock`, with ``async with`` (or ``await
        lock.acquire()`` / ``await lock.release()``).  ``on_lost`` and
        ``on_wait`` may be coroutine functions; ``signed`` as there."""
        return Lock(self, name, ttl_ms, wait_ms, on_lost=on_lost, on_wait=on_wait,
                    raise_on_lost=raise_on_lost, signed=signed)


async def _maybe_await(r: Optional[Awaitable[None]]) -> None:
    """Await a callback's result when it is awaitable."""
    if r is not None and hasattr(r, "__await__"):
        await r


class Lock:
    """A held lock: its fencing token, its lease and a renewal task.

    As :class:`fenced.Lock`: ``token`` and ``lease`` are ints once acquired
    (NotAcquired before), ``valid_until`` (``time.monotonic()``; liveness
    only), ``held``, ``remaining_s()``, ``lost`` (here an
    :class:`asyncio.Event`), ``lost_error``, and with ``signed=True`` a
    :class:`fenced.SignedToken` and ``signed_token``.
    """

    def __init__(self, client: Client, name: str, ttl_ms: int, wait_ms: int = 0, *,
                 on_lost: Optional[OnLost] = None, on_wait: Optional[OnWait] = None,
                 raise_on_lost: bool = True, signed: bool = False) -> None:
        if not name:
            raise ValueError("the lock name must not be empty")
        if ttl_ms < 10 or wait_ms < 0:
            raise ValueError("ttl_ms must be >= 10 and wait_ms >= 0")
        self.client = client                  # main connection (grant, lock, release)
        self.name = name                      # lock name
        self.ttl_ms = ttl_ms                  # lease TTL
        self.wait_ms = wait_ms                # how long to queue
        self.signed = signed                  # the grant is signed (SIGNED)
        self.on_lost = on_lost                # callback when the lease is lost
        self.on_wait = on_wait                # callback before a wait
        self.raise_on_lost = raise_on_lost    # async with raises LeaseLost at its end
        self._token: Optional[int] = None     # fencing token once acquired
        self._lease: Optional[int] = None     # lease id once granted
        self.valid_until: float = 0.0         # monotonic deadline (liveness only)
        self.lost = asyncio.Event()           # set when the lease is lost
        self.lost_error: Optional[FencedError] = None  # why it was lost
        self._stop = asyncio.Event()          # tells the renewal task to end
        self._task: Optional["asyncio.Task[None]"] = None  # the renewal task
        self._released = False                # release() ran

    def __repr__(self) -> str:
        return "<fenced.aio.Lock %r token=%r lease=%r%s>" % (
            self.name, self._token, self._lease, " lost" if self.lost.is_set() else "")

    @property
    def token(self) -> int:
        """The fencing token; NotAcquired before the lock was acquired."""
        if self._token is None:
            raise NotAcquired("lock %r is not acquired: it has no token yet" % self.name)
        return self._token

    @property
    def signed_token(self) -> str:
        """The signed token's string (as :attr:`fenced.Lock.signed_token`)."""
        return _signed_string(self.token, self.name)

    @property
    def lease(self) -> int:
        """The lease id; NotAcquired before the lease was granted."""
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

    async def acquire(self) -> "Lock":
        """Grant the lease, start renewing it, and lock (waiting up to
        wait_ms).  Raises NotAcquired, Unreachable, LimitReached, ..."""
        if self._token is not None:
            raise FencedError("lock %r is already acquired" % self.name)
        sent = time.monotonic()
        lease = await self.client.lease_grant(self.ttl_ms)
        self._lease = lease
        self.valid_until = sent + (self.ttl_ms - _margin_ms(self.ttl_ms)) / 1000.0
        self._start_renewals()
        try:
            token = None
            lock = self.client.lock_lease_signed if self.signed else self.client.lock_lease
            if self.on_wait is not None and self.wait_ms > 0:
                token = await lock(self.name, lease, 0)
                if token is None:
                    await _maybe_await(self.on_wait(await self.client.lock_info(self.name)))
            if token is None:
                token = await lock(self.name, lease, self.wait_ms)
            if token is None:
                raise NotAcquired("lock %r not acquired within %d ms" % (self.name, self.wait_ms))
            if self.lost.is_set():
                raise self.lost_error or LeaseLost("lease lost while waiting")
        except BaseException:
            await self._stop_renewals()
            await self._revoke_quietly()
            raise
        self._token = token
        return self

    async def release(self) -> None:
        """Stop renewing, UNLOCK by token and revoke the lease.  Safe to call
        twice.  Errors are raised only when the lease was not lost."""
        if self._released:
            return
        self._released = True
        await self._stop_renewals()
        if self._lease is None:
            return
        try:
            if self._token is not None:
                await self.client.unlock(self.name, self._token)
            await self.client.lease_revoke(self._lease)
        except FencedError:
            if not self.lost.is_set():
                raise

    async def _revoke_quietly(self) -> None:
        """Revoke the lease after a failed acquire (errors ignored: it
        expires on its own)."""
        if self._lease is not None:
            try:
                await self.client.lease_revoke(self._lease)
            except FencedError:
                pass

    async def __aenter__(self) -> "Lock":
        return await self.acquire()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            await self.release()
        except FencedError:
            if exc_type is None:
                raise
        if exc_type is None and self.raise_on_lost and self.lost.is_set():
            raise self.lost_error or LeaseLost("the lease of lock %r was lost" % self.name)

    # ---- renewals --------------------------------------------------------------------

    def _start_renewals(self) -> None:
        """Start the renewal task (its own client and connection)."""
        self._stop.clear()
        self._task = asyncio.ensure_future(self._renew_loop(self.client._clone()))

    async def _stop_renewals(self) -> None:
        """Stop the renewal task and wait for it (unless called from it)."""
        self._stop.set()
        t, self._task = self._task, None
        if t is not None and t is not asyncio.current_task():
            try:
                await t
            except Exception:  # noqa: BLE001 - the task reports its own failures
                pass

    async def _renew_loop(self, ka: Client) -> None:
        """Renew every TTL/3; retry failed renewals until valid_until; on
        NOLEASE or a missed deadline, mark the lock lost."""
        interval = self.ttl_ms / 3000.0
        delay = interval
        lease = self.lease
        try:
            while True:
                try:
                    await asyncio.wait_for(self._stop.wait(), delay)
                    return
                except asyncio.TimeoutError:
                    pass
                sent = time.monotonic()
                left_ms = int((self.valid_until - sent) * 1000)
                if left_ms <= 0:
                    await self._mark_lost(LeaseLost(
                        "lease %d of lock %r: no renewal succeeded before valid_until"
                        % (lease, self.name)))
                    return
                try:
                    got = await ka.lease_keepalive(lease, timeout_ms=max(10, min(left_ms,
                                                                               self.ttl_ms // 3)))
                except LeaseLost as e:
                    await self._mark_lost(e)
                    return
                except FencedError:
                    delay = min(interval, max(0.01, self.ttl_ms / 20000.0))
                    continue
                if self._stop.is_set():
                    return
                # The reply: how long the lease is guaranteed from our send
                # (docs/leases.md).
                granted = min(self.ttl_ms, got) if isinstance(got, int) and got > 0 else self.ttl_ms
                self.valid_until = sent + max(0, granted - _margin_ms(self.ttl_ms)) / 1000.0
                delay = interval
        finally:
            await ka.close()

    async def _mark_lost(self, err: FencedError) -> None:
        """Record the loss, set the event, run the callback."""
        self.lost_error = err
        self.lost.set()
        if self.on_lost is not None:
            try:
                await _maybe_await(self.on_lost(self, err))
            except Exception:  # noqa: BLE001 - a failing callback must not end the task silently
                import traceback
                traceback.print_exc()


class Store:
    """An asyncio connection to one fence-store server; as
    :class:`fenced.Store` (the same keywords, retries and errors; ``fincr``
    is sent once)."""

    def __init__(self, servers: Servers = DEFAULT_STORE, *, timeout_ms: int = 5000,
                 decode: bool = False, **tls_and_login: Any) -> None:
        self._c = Client(servers, timeout_ms=timeout_ms, **tls_and_login)
        self.decode = decode                               # fget returns str

    async def close(self) -> None:
        """Close the connection (reopened if used again)."""
        await self._c.close()

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def admit(self, fence: str, token: Token) -> None:
        """FENCE.ADMIT: raise the fence's mark to token.  Raises StaleToken
        when a newer token was admitted."""
        await self._c.call("FENCE.ADMIT", fence, wire_token(token))

    async def fset(self, fence: str, token: Token, key: str, value: Value) -> None:
        """FSET: write key = value if token is not stale."""
        await self._c.call("FSET", fence, wire_token(token), key, value)

    async def fdel(self, fence: str, token: Token, key: str) -> bool:
        """FDEL: delete key if token is not stale; True if it existed."""
        return bool(await self._c.call("FDEL", fence, wire_token(token), key) == 1)

    async def fincr(self, fence: str, token: Token, key: str) -> int:
        """FINCR: add 1 to the integer at key (missing: 0); the new value.
        Sent once: after a lost reply it raises Unreachable, outcome
        unknown."""
        args = ("FINCR", fence, wire_token(token), key)
        async with self._c._busy():
            try:
                r = await self._c._once(args, time.monotonic() + self._c.timeout_ms / 1000.0)
            except redis.exceptions.ResponseError as e:
                raise from_redis(e) from None
            except redis.exceptions.AuthenticationError as e:
                raise with_context(from_redis(e), "FINCR: login refused: ") from None
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                    OSError) as e:
                raise Unreachable("FINCR: no reply (%s); the outcome is unknown" % e) from None
        return _as_int(r, "FINCR")

    async def fget(self, key: str) -> Optional[Union[bytes, str]]:
        """FGET: the value, or None."""
        v = await self._c.call("FGET", key)
        if v is None:
            return None
        if not isinstance(v, bytes):
            raise FencedError("FGET: unexpected reply %r" % (v,))
        if self.decode:
            return v.decode("utf-8")
        return v

    async def high(self, fence: str) -> int:
        """FENCE.HIGH: the highest token admitted for the fence (0: none)."""
        return _as_int(await self._c.call("FENCE.HIGH", fence), "FENCE.HIGH")

    async def info(self) -> Dict[str, str]:
        """INFO as a dict."""
        return await self._c.info()
