"""Leader election (docs/recipes.md, docs/protocol.md ELECTION.*): the
request shapes and reply parsing shared by the sync client
(:class:`fenced.Client`) and the asyncio one (:class:`fenced.aio.Client`).

An election's leader holds a fencing token (from the same counter as
locks: every new leader's is higher); its value is a hint for clients (who
to talk to); the revision grows with every change of leader or value and
never goes backwards, so ``observe(name, after=state.revision)`` never
misses a change.
"""
import secrets
from typing import Any, List, NamedTuple, Optional, Union

from .errors import FencedError

Value = Union[bytes, str]

#: Longest value an election takes (FENCE_ELECT_VALUE_MAX).
VALUE_MAX = 4096


class ElectionState(NamedTuple):
    """An election's state: the leader's value (None when nobody leads),
    token and lease (0 when nobody leads), and the revision."""
    value: Optional[bytes]
    token: int
    lease: int
    revision: int

    @property
    def has_leader(self) -> bool:
        """Whether somebody leads."""
        return self.value is not None


def _value(value: Value) -> bytes:
    b = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if len(b) > VALUE_MAX:
        raise ValueError("an election value is at most %d bytes, not %d" % (VALUE_MAX, len(b)))
    return b


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise FencedError("%s: unexpected reply %r" % (what, v))
    return v


def campaign_args(name: str, lease: int, value: Value, wait_ms: int) -> List[Any]:
    """ELECTION.CAMPAIGN name lease value [WAIT ms] REQID id."""
    args: List[Any] = ["ELECTION.CAMPAIGN", name, lease, _value(value)]
    if wait_ms > 0:
        args += ["WAIT", wait_ms]
    return args + ["REQID", secrets.randbits(64)]


def campaign_reply(r: Any) -> Optional[int]:
    """The token of a CAMPAIGN reply ([token, lease]), or None (nil)."""
    if r is None:
        return None
    if not isinstance(r, list) or len(r) != 2:
        raise FencedError("ELECTION.CAMPAIGN: unexpected reply %r" % (r,))
    return _int(r[0], "ELECTION.CAMPAIGN")


def proclaim_args(name: str, token: int, value: Value) -> List[Any]:
    """ELECTION.PROCLAIM name token value."""
    return ["ELECTION.PROCLAIM", name, token, _value(value)]


def observe_args(name: str, after: Optional[int], wait_ms: int) -> List[Any]:
    """ELECTION.OBSERVE name [AFTER revision [WAIT ms]]."""
    args: List[Any] = ["ELECTION.OBSERVE", name]
    if after is not None:
        args += ["AFTER", after]
        if wait_ms > 0:
            args += ["WAIT", wait_ms]
    return args


def state_reply(r: Any, what: str) -> Optional[ElectionState]:
    """An ElectionState of a [value|nil, token, lease, revision] reply, or
    None (nil)."""
    if r is None:
        return None
    if not isinstance(r, list) or len(r) != 4:
        raise FencedError("%s: unexpected reply %r" % (what, r))
    v = r[0]
    if v is not None and not isinstance(v, bytes):
        v = str(v).encode("utf-8")
    return ElectionState(v, _int(r[1], what), _int(r[2], what), _int(r[3], what))
