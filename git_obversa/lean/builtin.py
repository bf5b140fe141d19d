"""Stands in for `collections.abc`, `operator`, `threading` and `hashlib`: the built-in
modules behind them.

Why: `collections.abc` runs the whole `collections` package first, `operator` defines a
Python twin of every function before replacing it with the C one, `threading` loads a
module of classes, and hashlib loads OpenSSL; a one-shot memory command needs none of
that. The names below are the very objects those modules export
(`collections.abc.Mapping is _collections_abc.Mapping`, `operator.itemgetter is
_operator.itemgetter`), and `allocate_lock` is what `threading.Lock` is.
`builtin_sha1` and `builtin_sha256` give CPython's own digests (`_sha1`, and `_sha256` up to
Python 3.11, `_sha2` from 3.12): a process that hashes a few kilobytes and exits is done
sooner with them; hashlib's are faster per byte, so long-lived processes keep hashlib.

Held equal by tests/test_lean.py (each name is the standard module's own object; the
digests give hashlib's digests of the same bytes).
"""

from _collections_abc import Mapping
from _operator import is_not, itemgetter, ne
from _thread import allocate_lock

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "Mapping",
    "allocate_lock",
    "builtin_sha1",
    "builtin_sha256",
    "is_not",
    "itemgetter",
    "ne",
]


def builtin_sha1() -> "Callable[..., Any]":
    """CPython's own SHA-1; hashlib's where it has none."""
    try:
        from _sha1 import sha1
    except ImportError:
        from hashlib import sha1
    return sha1


def builtin_sha256() -> "Callable[..., Any]":
    """CPython's own SHA-256; hashlib's where it has none."""
    try:
        from _sha256 import sha256
    except ImportError:
        try:
            from _sha2 import sha256
        except ImportError:
            from hashlib import sha256
    return sha256
