"""fenced: a Python client of the fenced lock service (locks with fencing
tokens) and of fence-store (a key/value store that rejects stale tokens).

    import fenced
    c = fenced.Client("127.0.0.1:7700")
    store = fenced.Store("127.0.0.1:7710")
    with c.lock("orders", ttl_ms=10000, wait_ms=5000) as lock:
        store.fset("orders", lock.token, "k", "v")

The same API for asyncio is fenced.aio (``async with c.lock(...)``).  Every
server error code has its own exception class (fenced.CODES; ``.code`` and
the server's ``.message``).  See docs/python.md.
"""
from .client import (Client, LeaseInfo, Lock, LockInfo, SemInfo, SemSlot, SignedToken,
                     parse_servers)
from . import elect, errors
from .elect import ElectionState
from .errors import (CODES, AuthFailed, AuthRequired, BadToken, ExecAborted, FencedError,
                     LeaseLost, LimitReached, NotAcquired, NotLeader, PermissionDenied,
                     ProtocolNotSupported, ServerError, StaleToken, StoreFull, TryAgain,
                     Unavailable, Unreachable, WrongFence, WrongPass, WrongType)
from .store import Store

__version__ = "0.1.0"

__all__ = ["Client", "ElectionState", "Lock", "LeaseInfo", "LockInfo", "SemInfo", "SemSlot", "SignedToken", "Store", "parse_servers", "errors", "CODES",
           "AuthFailed", "AuthRequired", "BadToken", "ExecAborted", "FencedError", "LeaseLost",
           "LimitReached", "NotAcquired", "NotLeader", "PermissionDenied", "ProtocolNotSupported",
           "ServerError", "StaleToken", "StoreFull", "TryAgain", "Unavailable", "Unreachable",
           "WrongFence", "WrongPass", "WrongType", "__version__"]
