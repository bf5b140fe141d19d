"""Stands in for `hashlib.sha1` and `hashlib.sha256`: CPython's own implementations.

Why: hashlib loads OpenSSL, which takes milliseconds; a process that hashes a few
kilobytes and exits (a one-shot command) is done sooner with CPython's built-in digests
(`_sha1`, and `_sha256` up to Python 3.11, `_sha2` from 3.12). hashlib's are faster per
byte, so long-lived processes keep them. Where CPython's are missing, hashlib's are given.

Held equal to hashlib by tests/test_lean.py (the same digests of the same bytes).
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def builtin_digests() -> "tuple[Callable[..., Any], Callable[..., Any]]":
    """(sha1, sha256) of CPython itself; hashlib's where it has none."""
    try:
        from _sha1 import sha1

        try:
            from _sha256 import sha256
        except ImportError:
            from _sha2 import sha256
    except ImportError:
        from hashlib import sha1, sha256
    return sha1, sha256
