"""Typed errors of the fenced client.

Every error the package raises is a :class:`FencedError`.  Server error
replies are mapped by their first word (fenced's and fence-store's stable
codes); connection trouble that outlasts the client's timeout becomes
:class:`Unreachable`.
"""
from typing import Optional


class FencedError(Exception):
    """Base class of every error raised by the fenced client."""


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

    def __init__(self, message: str, leader: Optional[str] = None) -> None:
        super().__init__(message)
        self.leader = leader


class LeaseLost(FencedError):
    """The lease is unknown, expired or revoked (fenced's NOLEASE), or it
    could not be renewed before its ``valid_until`` deadline.  The locks it
    held are gone: stop using their tokens."""


class AuthFailed(FencedError):
    """The server refused the login (WRONGPASS: a wrong user or password, a
    disabled user) or asks for one (NOAUTH: give ``username``/``password``).
    Not retried: a login does not start working by waiting."""


class LimitReached(FencedError):
    """A configured server limit is full (fenced's or fence-store's LIMIT):
    retry later or raise the limit."""


class NotAcquired(FencedError):
    """The lock was busy and did not become free within ``wait_ms``."""


class StaleToken(FencedError):
    """fence-store rejected a write: ``token`` is older than ``highest``,
    the highest token admitted for the fence.  Nothing was written; a newer
    lock holder exists."""

    def __init__(self, message: str, token: Optional[int] = None,
                 highest: Optional[int] = None) -> None:
        super().__init__(message)
        self.token = token
        self.highest = highest


class ServerError(FencedError):
    """Any other error reply (ERR: syntax, range, unknown command ...).
    ``code`` is its first word."""

    def __init__(self, message: str, code: str = "ERR") -> None:
        super().__init__(message)
        self.code = code


def from_reply(text: str) -> FencedError:
    """Map the text of an error reply ("CODE sentence") to its error class."""
    code, _, rest = text.partition(" ")
    if code == "NOTLEADER":
        leader = rest.split()[0] if rest.split() else None
        return NotLeader(text, leader)
    if code == "TRYAGAIN":
        return TryAgain(text)
    if code == "NOLEASE":
        return LeaseLost(text)
    if code == "LIMIT":
        return LimitReached(text)
    if code in ("WRONGPASS", "NOAUTH"):
        return AuthFailed(text)
    if code == "STALE":
        parts = rest.split()
        try:
            return StaleToken(text, int(parts[0]), int(parts[1]))
        except (IndexError, ValueError):
            return StaleToken(text)
    if code.isupper() and code.isalpha():
        return ServerError(text, code)
    # redis-py strips the "ERR " prefix from ERR replies.
    return ServerError(text, "ERR")
