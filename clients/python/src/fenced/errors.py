"""Typed errors of the fenced client.

Every error the package raises is a :class:`FencedError`.  A server's error
reply ("CODE sentence") becomes the class its code names (table
:data:`CODES`); ``code`` is that word and ``message`` the server's sentence,
and ``str(error)`` is the whole reply.  redis-py turns a few replies into
classes of its own before the client sees them (``NoPermissionError`` for
NOPERM, ``AuthenticationError`` for NOAUTH and a refused AUTH,
``ExecAbortError`` ...): :func:`from_redis` maps those back to their codes.
Connection trouble that outlasts the client's timeout becomes
:class:`Unreachable` (``code`` None: no server said so).
"""
import copy
from typing import Dict, Optional, Type, TypeVar

import redis

__all__ = ["FencedError", "Unreachable", "TryAgain", "NotLeader", "LeaseLost", "AuthFailed",
           "WrongPass", "AuthRequired", "PermissionDenied", "LimitReached", "NotAcquired",
           "StaleToken", "WrongFence", "BadToken", "StoreFull", "Unavailable", "ExecAborted",
           "ProtocolNotSupported", "ServerError", "CODES", "from_reply", "from_redis",
           "keep_codes", "with_context"]


class FencedError(Exception):
    """Base class of every error raised by the fenced client.

    ``code``: the error reply's code ("NOPERM", "STALE", ...) when a server
    sent one, else None.  ``message``: the server's sentence after the code
    (or the whole text of a client-side error)."""

    def __init__(self, message: str = "", code: Optional[str] = None) -> None:
        super().__init__(message)
        self.code: Optional[str] = code
        if code is not None and message.startswith(code + " "):
            self.message = message[len(code) + 1:]
        else:
            self.message = message


class Unreachable(FencedError):
    """No server answered within the timeout (refused, reset, timed out).

    For a request that changes state the outcome is unknown; retrying with
    the same request id (the client does so itself) is safe.
    """


class TryAgain(Unreachable):
    """The server answered TRYAGAIN until the timeout ran out (no leader or
    no quorum, a new leader still replaying its log, shutting down)."""


class NotLeader(FencedError):
    """The server is a follower and the redirects did not reach a leader.

    ``leader`` is the leader's client address ("host:port") when the server
    named one.
    """

    def __init__(self, message: str, leader: Optional[str] = None,
                 code: Optional[str] = "NOTLEADER") -> None:
        super().__init__(message, code)
        self.leader = leader


class LeaseLost(FencedError):
    """The lease is unknown, expired or revoked (fenced's NOLEASE), or it
    could not be renewed before its ``valid_until`` deadline (``code``
    None).  The locks it held are gone: stop using their tokens."""


class AuthFailed(FencedError):
    """The server refused the login or asks for one (the subclasses
    :class:`WrongPass` and :class:`AuthRequired`).  Not retried: a login
    does not start working by waiting."""


class WrongPass(AuthFailed):
    """WRONGPASS: a wrong user name or password, or a disabled user."""


class AuthRequired(AuthFailed):
    """NOAUTH: the server has an ACL file and this connection did not log
    in (give ``username``/``password``)."""


class PermissionDenied(FencedError):
    """NOPERM: the logged-in user may not run this command, use this lock
    or key name, or touch another user's lease (docs/security.md)."""


class WrongType(FencedError):
    """WRONGTYPE: the name is in use as another kind (a lock, a semaphore or
    one of its slots), or SEM.ACQUIRE named another N than the semaphore's
    (the message says which)."""


class LimitReached(FencedError):
    """A configured server limit is full (fenced's or fence-store's LIMIT:
    leases, locks, waiters, clients, value size): retry later or raise the
    limit."""


class NotAcquired(FencedError):
    """The lock was busy and did not become free within ``wait_ms``, or a
    lock's token was read before it was acquired."""


class StaleToken(FencedError):
    """STALE: fence-store rejected a write: ``token`` is older than
    ``highest``, the highest token admitted for the fence.  Nothing was
    written; a newer lock holder exists."""

    def __init__(self, message: str, token: Optional[int] = None,
                 highest: Optional[int] = None, code: Optional[str] = "STALE") -> None:
        super().__init__(message, code)
        self.token = token
        self.highest = highest


class WrongFence(FencedError):
    """WRONGFENCE: the key belongs to another fence (the fence of its first
    write); nothing was written.  A key is written through one fence only,
    so a stale holder cannot reach it through a lock it can still get."""


class BadToken(FencedError):
    """BADTOKEN: the resource refused the token itself (not signed by
    fenced, forged, signed for another fence, or out of range); nothing
    was written."""


class StoreFull(FencedError):
    """FULL: fence-store's map or its disk is full; nothing was written."""


class Unavailable(FencedError):
    """UNAVAILABLE: HEALTH says the server cannot serve (no leader, no
    quorum, a failing disk ...); the message says why."""


class ExecAborted(FencedError):
    """EXECABORT: EXEC discarded a transaction because a command queued in
    it was refused."""


class ProtocolNotSupported(FencedError):
    """NOPROTO: HELLO asked for a protocol version the server does not
    speak."""


class ServerError(FencedError):
    """Any other error reply (ERR: syntax, range, unknown command, a value
    that is not an integer ...; or a code this client does not know).
    ``code`` is its first word."""

    def __init__(self, message: str, code: Optional[str] = "ERR") -> None:
        super().__init__(message, code)


#: Every error code fenced and fence-store send, and its class
#: (ERR and unknown codes: :class:`ServerError`).
CODES: Dict[str, Type[FencedError]] = {
    "NOTLEADER": NotLeader,
    "TRYAGAIN": TryAgain,
    "NOLEASE": LeaseLost,
    "LIMIT": LimitReached,
    "WRONGPASS": WrongPass,
    "NOAUTH": AuthRequired,
    "NOPERM": PermissionDenied,
    "WRONGTYPE": WrongType,
    "STALE": StaleToken,
    "WRONGFENCE": WrongFence,
    "BADTOKEN": BadToken,
    "FULL": StoreFull,
    "UNAVAILABLE": Unavailable,
    "EXECABORT": ExecAborted,
    "NOPROTO": ProtocolNotSupported,
    "ERR": ServerError,
}


def from_reply(text: str) -> FencedError:
    """Map the text of an error reply ("CODE sentence") to its error class;
    the error's ``str`` is the whole text."""
    code, _, rest = text.partition(" ")
    if not (code.isupper() and code.replace("_", "").isalpha()):
        # An ERR reply whose "ERR " redis-py took off (the client's
        # connections keep it: see keep_codes).
        return ServerError("ERR " + text, "ERR")
    cls = CODES.get(code, ServerError)
    if cls is NotLeader:
        words = rest.split()
        return NotLeader(text, words[0] if words else None)
    if cls is StaleToken:
        parts = rest.split()
        try:
            return StaleToken(text, int(parts[0]), int(parts[1]))
        except (IndexError, ValueError):
            return StaleToken(text)
    if cls is ServerError:
        return ServerError(text, code)
    return cls(text, code)


#: redis-py's own classes for some replies, with the code they stand for
#: (subclasses before their bases).  redis-py strips the code from the text.
_REDIS_CLASSES = (
    (redis.exceptions.NoPermissionError, "NOPERM"),
    (redis.exceptions.ExecAbortError, "EXECABORT"),
    (redis.exceptions.BusyLoadingError, "LOADING"),
    (redis.exceptions.ReadOnlyError, "READONLY"),
    (redis.exceptions.NoScriptError, "NOSCRIPT"),
)


E = TypeVar("E", bound=FencedError)


def with_context(err: E, prefix: str, suffix: str = "") -> E:
    """A copy of err (same class, code, message and other attributes) whose
    text is prefix + its text + suffix, e.g. the command and the server."""
    out = copy.copy(err)
    out.args = (prefix + str(err) + suffix,)
    return out


def keep_codes(conn: object) -> None:
    """Make a redis-py connection (sync or asyncio) leave every error
    reply's code in its text: redis-py's parser takes the code off the
    replies it knows (ERR, NOPERM, NOAUTH ...) and makes some of them its
    own classes.  Call it before connecting.  A redis-py whose parser has no
    such table is left alone (from_redis then maps its classes)."""
    parser = getattr(conn, "_parser", None)
    if parser is None or not isinstance(getattr(parser, "EXCEPTION_CLASSES", None), dict):
        return
    base = type(parser)
    keeping = _KEEPING.get(base)
    if keeping is None:
        # Same layout as base (no new slots), so the instance can switch.
        keeping = type(base.__name__ + "KeepingCodes", (base,),
                       {"__slots__": (), "EXCEPTION_CLASSES": {}})
        _KEEPING[base] = keeping
    try:
        parser.__class__ = keeping
    except TypeError:
        pass


#: redis-py parser class -> its subclass that keeps the codes.
_KEEPING: Dict[type, type] = {}


def from_redis(e: BaseException) -> FencedError:
    """The FencedError of a redis-py error reply: a ResponseError (its
    text, code included unless redis-py took it off) or one of the classes
    redis-py makes of some replies (NoPermissionError: NOPERM;
    AuthenticationError: NOAUTH, or WRONGPASS for a refused login)."""
    text = str(e)
    for cls, code in _REDIS_CLASSES:
        if isinstance(e, cls):
            if text.startswith(code + " "):
                return from_reply(text)
            return from_reply(code + " " + text)
    if isinstance(e, redis.exceptions.AuthenticationError):
        first = text.partition(" ")[0]
        if first in ("NOAUTH", "WRONGPASS"):
            return from_reply(text)
        if "required" in text.lower():
            return AuthRequired("NOAUTH " + text, "NOAUTH")
        return WrongPass("WRONGPASS " + text, "WRONGPASS")
    return from_reply(text)
