"""A checksum of bytes that needs no import: stands in for `zlib.crc32` as an integrity check.

What it replaces: `zlib.crc32` where it only checks that stored bytes came back whole (the
blame cache's entries and their names), not where a CRC-32's very values are part of a
format.

Why: `git obversa why` names and checks its blame cache entry in a fresh process before
its first git process starts, and zlib is a shared library that process would otherwise
load for this alone.

The check: the bytes read as one little-endian integer, modulo PRIME, a prime just below
2**30. A change confined to 29 consecutive bits (so any change of one byte) always shows,
as with a CRC-32; any other change goes unseen about once in 2**30.

Held equal to `zlib.crc32` in what it detects by tests/test_lean_checksum.py.
"""

PRIME = 1_073_741_789


def checksum(data: bytes) -> int:
    """DATA's checksum, a number below 2**30 (8 hex digits)."""
    return int.from_bytes(data, "little") % PRIME
