"""Git's reflogs (files backend): `logs/<ref>`, one line per move of the ref.

A line is "<old id> <new id> <identity> <time> <zone>\\t<message>\\n"; git appends to a
ref's reflog only when the file exists.
"""

import os

from git_obversa.repo.locks import write_all

# How much of a reflog's end `values` reads: the recent moves it looks for.
TAIL_BYTES = 65536


def path(common_dir: str, ref: str) -> str:
    """Where the reflog of REF is kept."""
    return os.path.join(common_dir, "logs", *ref.split("/"))


def ensure(common_dir: str, ref: str) -> None:
    """Create REF's reflog, empty, if it has none (so that git appends to it); quietly
    nothing where that cannot be done (reftable, a read-only `logs/`)."""
    where = path(common_dir, ref)
    try:
        os.makedirs(os.path.dirname(where), exist_ok=True)
        open(where, "ab").close()
    except OSError:
        pass


def append(common_dir: str, ref: str, line: bytes, fsync: bool) -> None:
    """Append LINE to REF's reflog, created if missing; OSError when it cannot be."""
    where = path(common_dir, ref)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    try:
        handle = os.open(where, flags, 0o666)
    except FileNotFoundError:  # the first reflog of its directory
        os.makedirs(os.path.dirname(where), exist_ok=True)
        handle = os.open(where, flags, 0o666)
    try:
        write_all(handle, line)
        if fsync:
            os.fsync(handle)
    finally:
        os.close(handle)


def values(common_dir: str, ref: str, hex_length: int) -> list[str]:
    """The ids REF's reflog says it held (old and new values), newest first, each once."""
    try:
        with open(path(common_dir, ref), "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - TAIL_BYTES))
            tail = handle.read()
    except OSError:
        return []
    found: list[str] = []
    for line in reversed(tail.split(b"\n")):
        fields = line.split(b" ", 2)
        for value in reversed(fields[:2]):
            text = value.decode("ascii", "replace")
            if len(text) == hex_length and not text.strip("0123456789abcdef") and text.strip("0"):
                if text not in found:
                    found.append(text)
    return found
