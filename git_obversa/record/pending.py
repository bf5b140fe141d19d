"""The files of a worktree's turn store, at the level of bytes: what the commit-time path
needs without parsing a turn (no json, no pathlib: a commit pays for their import).

`TurnStore` (turns.py) is the store; this module holds its layout, its lock, the one
"claim everything" move, and `stamp`, which names the pending turns' bytes so a message
composed from them ahead of the commit can be checked for being still the one to use.
"""

from __future__ import annotations

import binascii
import fcntl
import os

STORE_PATH = "obversa/record"
TURNS_FILE = "turns.jsonl"
CLAIMED_FILE = "claimed.jsonl"
LOCK_FILE = "lock"
# Written by `record.composition.compose_ahead` for the prepare-commit-msg shim, which writes a
# plain message in sh and trusts this file by its presence: every change of the store
# removes it first (`invalidate`), under the lock. Write the store only through TurnStore.
COMPOSED_PLAIN = "composed.plain"


class StoreLock:
    """flock() on the store's lock file for a `with` block: every read-modify-write of
    the store holds it. Creates the store directory."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        self._fd = -1

    def __enter__(self) -> StoreLock:
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, LOCK_FILE)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o666)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = -1


def stamp(directory: str | os.PathLike[str]) -> str:
    """A name for the pending turns as stored: the length and CRC-32 of claimed.jsonl's
    bytes followed by turns.jsonl's. Any append, clear or rewrite changes it; claiming
    every turn (`claim_all`) does not, since it keeps that byte sequence. Call it under
    the lock."""
    checksum = length = 0
    for name in (CLAIMED_FILE, TURNS_FILE):
        try:
            with open(os.path.join(directory, name), "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            continue
        checksum = binascii.crc32(data, checksum)
        length += len(data)
    return f"{length}:{checksum:08x}"


def file_state(directory: str | os.PathLike[str]) -> tuple:
    """The pending turns' files as they are now, (inode, size, modification time) each or
    None: while it is the same, so is their `stamp` (the store only appends to a file, or
    replaces or removes it). Call it under the lock."""
    state = []
    for name in (CLAIMED_FILE, TURNS_FILE):
        try:
            status = os.stat(os.path.join(directory, name))
        except FileNotFoundError:
            state.append(None)
            continue
        state.append((status.st_ino, status.st_size, status.st_mtime_ns))
    return tuple(state)


def remove(path: str) -> None:
    """Remove the file PATH if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def invalidate(directory: str | os.PathLike[str]) -> None:
    """Remove what the shim would trust about the pending turns: call it under the lock,
    before changing them."""
    remove(os.path.join(directory, COMPOSED_PLAIN))


def claim_all(directory: str | os.PathLike[str]) -> None:
    """Move every pending turn to claimed.jsonl, the lines as they are (a turn in both
    files counts once when read). Call it under the lock."""
    turns = os.path.join(directory, TURNS_FILE)
    claimed = os.path.join(directory, CLAIMED_FILE)
    _move_lines(turns, claimed)


def keep_claimed(directory: str | os.PathLike[str], record_id: str) -> None:
    """The claimed turns of a commit that carries them, kept as `kept-<RECORD_ID>.jsonl`
    for `record.kept.settle` (the post-commit shim does the same with `mv`)."""
    claimed = os.path.join(directory, CLAIMED_FILE)
    kept = os.path.join(directory, f"kept-{record_id}.jsonl")
    _move_lines(claimed, kept)


def _move_lines(source: str, target: str) -> None:
    """Move SOURCE's lines to the end of TARGET (a rename when TARGET is absent); no
    SOURCE, nothing to do."""
    if not os.path.exists(source):
        return
    if os.path.exists(target):
        with open(source, "rb") as lines, open(target, "ab") as end:
            end.write(lines.read())
        os.unlink(source)
    else:
        os.replace(source, target)
