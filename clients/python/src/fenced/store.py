"""fence-store client: writes that carry a fencing token.

fence-store admits a write with token T for fence F only if T is at least
the highest token it admitted for F; otherwise the write is rejected with
:class:`~fenced.errors.StaleToken` and nothing is written.  Use the lock's
name as the fence and the lock's token as the token.  A signed token
(:class:`~fenced.SignedToken`, from ``signed=True``) is sent as its signed
string, so a fence-store with ``--token-verify-keys`` admits it.

Read-modify-write: ``admit`` first, then read, then write (docs/
fence-store.md, "The admit-before-read pattern").
"""
import time
from typing import Any, Dict, Optional, Union

import redis

from .client import Client, Servers, Token, wire_token
from .errors import FencedError, Unreachable, from_redis, with_context

__all__ = ["Store"]

#: fence-store's default address.
DEFAULT_STORE = "127.0.0.1:7710"

Value = Union[str, bytes, int]


class Store:
    """A connection to one fence-store server.

    Requests are retried after a reset connection or a timeout (equal
    tokens are admitted, so a retried FSET, FDEL or FENCE.ADMIT is
    harmless), except ``fincr``, whose retry could count twice: it raises
    :class:`~fenced.errors.Unreachable` instead, outcome unknown.
    ``decode``: return str values from ``fget`` instead of bytes.
    TLS and login: the keywords of :class:`~fenced.Client` (``tls``,
    ``tls_ca_file``, ``tls_cert_file``, ``tls_key_file``,
    ``tls_check_hostname``, ``username``, ``password``), for a fence-store
    with ``--tls-port`` and ``--acl-file``.
    Not thread-safe: one Store per thread.
    """

    def __init__(self, servers: Servers = DEFAULT_STORE, *, timeout_ms: int = 5000,
                 decode: bool = False, **tls_and_login: Any) -> None:
        # transport (no NOTLEADER here); tls_and_login: Client's tls*,
        # username and password keywords
        self._c = Client(servers, timeout_ms=timeout_ms, **tls_and_login)
        self.decode = decode                               # fget returns str

    def close(self) -> None:
        """Close the connection (reopened if used again)."""
        self._c.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def admit(self, fence: str, token: Token) -> None:
        """FENCE.ADMIT: raise the fence's mark to token (nothing else
        written).  Raises StaleToken when a newer token was admitted."""
        self._c.call("FENCE.ADMIT", fence, wire_token(token))

    def fset(self, fence: str, token: Token, key: str, value: Value) -> None:
        """FSET: write key = value if token is not stale."""
        self._c.call("FSET", fence, wire_token(token), key, value)

    def fdel(self, fence: str, token: Token, key: str) -> bool:
        """FDEL: delete key if token is not stale; True if it existed."""
        return bool(self._c.call("FDEL", fence, wire_token(token), key) == 1)

    def fincr(self, fence: str, token: Token, key: str) -> int:
        """FINCR: add 1 to the integer at key (missing: 0); the new value."""
        # One attempt only: a retry after a lost reply could count twice.
        return int(self._once("FINCR", fence, wire_token(token), key))

    def _once(self, *args: Any) -> Any:
        """A request sent once (no retry after it may have reached the
        server)."""
        try:
            return self._c._once(args, time.monotonic() + self._c.timeout_ms / 1000.0)
        except redis.exceptions.ResponseError as e:
            raise from_redis(e) from None
        except redis.exceptions.AuthenticationError as e:
            raise with_context(from_redis(e), "%s: login refused: " % args[0]) from None
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as e:
            raise Unreachable("%s: no reply (%s); the outcome is unknown" % (args[0], e)) from None

    def fget(self, key: str) -> Optional[Union[bytes, str]]:
        """FGET: the value, or None."""
        v = self._c.call("FGET", key)
        if v is None:
            return None
        if not isinstance(v, bytes):
            raise FencedError("FGET: unexpected reply %r" % (v,))
        if self.decode:
            return v.decode("utf-8")
        return v

    def high(self, fence: str) -> int:
        """FENCE.HIGH: the highest token admitted for the fence (0: none)."""
        return int(self._c.call("FENCE.HIGH", fence))

    def info(self) -> Dict[str, str]:
        """INFO as a dict."""
        return self._c.info()
