"""The `stat` of every file of a directory corpus, shared with a helper process.

A warm search of a directory proves that no file changed by a `stat` per file: 5,000 files
take ~15 ms of system calls alone on a small VM, more than the query. Python threads do
not share that work (each `stat` gives up the interpreter lock and waits to take it back),
so a long-lived process forks one helper, once, the first time a corpus of at least
SHARE_FROM files is listed, and thereafter gives it each listing's directories: the helper
works from the last one back, the searching process runs the query it was given (see
`identities`) and then works from the first one on, and they stop where they meet.

The helper answers only `stat` numbers; a directory it could not read is done again by
the searching process (so an error is the same as without a helper). It never outlives
its parent (it stops when the request pipe closes), holds none of the parent's other
files, and is given up (killed and not replaced) if it stops answering.
"""

from __future__ import annotations

import marshal
import os
import select
import struct
import sys
from array import array
from collections.abc import Callable
from itertools import chain
from operator import attrgetter
from typing import Any

INODE_BITS = (1 << 63) - 1  # an inode number as a signed 64-bit integer
IDENTITY = attrgetter("st_size", "st_mtime_ns", "st_ino")
# An entry listed as no link is statted without following one (`DirEntry.stat`'s default
# follows only entries listed as links).
STAT = os.DirEntry.stat
SHARE_FROM = 1024  # files: fewer are listed by the searching process alone
# A message on either pipe: its kind, the request's number, then a run number and a length.
HEADER = struct.Struct("=BIiI")
REQUEST, CANCEL, NUMBERS, FAILED, DONE = range(5)
UNREAD = object()  # a run the helper could not read: done again by the searching process
ANSWER_WITHIN = 2.0  # seconds the helper may take to finish a cancelled request
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class Run:
    """Files listed one after the other from one directory (a relative path of visible
    names below the root; "" for the root), as entries of an open descriptor of it;
    NUMBERS when they were already statted."""

    __slots__ = ("directory", "entries", "numbers")

    def __init__(self, directory: str, entries: list[os.DirEntry]) -> None:
        self.directory, self.entries = directory, entries
        self.numbers: array | None = None


def numbers_of(entries: list[os.DirEntry]) -> array:
    """(size, mtime in ns, inode) of each of ENTRIES, not following links, as one array."""
    stats = list(map(STAT, entries))
    try:
        return array("q", chain.from_iterable(map(IDENTITY, stats)))
    except OverflowError:  # an inode number of 2**63 or more
        numbers = array("q")
        for info in stats:
            numbers.extend((info.st_size, info.st_mtime_ns, info.st_ino & INODE_BITS))
        return numbers


def _numbers_at(root: str, directory: str, names: list[str]) -> bytes:
    """What `numbers_of` gives for NAMES in DIRECTORY (a relative path of visible names)
    below ROOT, the directories opened one name at a time, never through a link."""
    current = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for segment in directory.split("/") if directory else ():
            inner = os.open(segment, DIRECTORY, dir_fd=current)
            os.close(current)
            current = inner
        stats = [os.stat(name, dir_fd=current, follow_symlinks=False) for name in names]
    finally:
        os.close(current)
    numbers = array("q")
    for info in stats:
        numbers.extend((info.st_size, info.st_mtime_ns, info.st_ino & INODE_BITS))
    return numbers.tobytes()


def _read_exactly(descriptor: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        more = os.read(descriptor, size - len(data))
        if not more:
            raise EOFError
        data += more
    return data


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _serve(requests: int, replies: int) -> None:
    """The helper: answer requests until the parent closes the request pipe."""
    while True:
        kind, number, _, size = HEADER.unpack(_read_exactly(requests, HEADER.size))
        payload = _read_exactly(requests, size)
        if kind != REQUEST:
            continue  # a cancel that came after the request was done
        root, runs = marshal.loads(payload)
        for run in range(len(runs) - 1, -1, -1):
            if select.select([requests], [], [], 0)[0]:
                break  # cancelled: the parent has every run it needs
            directory, names = runs[run]
            try:
                data = _numbers_at(root, directory, names)
            except Exception:
                _write_all(replies, HEADER.pack(FAILED, number, run, 0))
            else:
                _write_all(replies, HEADER.pack(NUMBERS, number, run, len(data)) + data)
        _write_all(replies, HEADER.pack(DONE, number, 0, 0))


def _start_helper() -> tuple[int, int, int] | None:
    """Fork the helper: (its pid, the request pipe, the reply pipe), or None."""
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for descriptor in (requests_read, requests_write, replies_read, replies_write):
            os.close(descriptor)
        return None
    if pid == 0:  # the helper; it never returns into the caller's code
        try:
            import gc
            import signal

            gc.disable()  # no finalizer of the parent's objects runs here
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent
            null = os.open(os.devnull, os.O_RDWR)
            for standard in (0, 1, 2):
                os.dup2(null, standard)
            keep = sorted((requests_read, replies_write))
            os.closerange(3, keep[0])
            os.closerange(keep[0] + 1, keep[1])
            os.closerange(keep[1] + 1, os.sysconf("SC_OPEN_MAX"))
            _serve(requests_read, replies_write)
        finally:
            os._exit(0)
    os.close(requests_read)
    os.close(replies_write)
    os.set_blocking(replies_read, False)
    return pid, requests_write, replies_read


class _Helper:
    def __init__(self, pid: int, requests: int, replies: int) -> None:
        self.pid, self.requests, self.replies = pid, requests, replies
        self.owner = os.getpid()
        self.number = 0
        self.pending = bytearray()
        self.idle = True  # the last request was answered to its end

    def close(self) -> None:
        for descriptor in (self.requests, self.replies):
            try:
                os.close(descriptor)
            except OSError:
                pass
        try:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, os.WNOHANG)  # not blocking on one stuck in the kernel
        except OSError:
            pass

    def messages(self, wait: float = 0) -> list[tuple[int, int, int, bytes]]:
        """The whole messages that arrived, waiting up to WAIT seconds for the first."""
        if wait and not select.select([self.replies], [], [], wait)[0]:
            raise TimeoutError
        while True:
            try:
                more = os.read(self.replies, 1 << 16)
            except BlockingIOError:
                break
            if not more:
                raise EOFError
            self.pending += more
        found = []
        while len(self.pending) >= HEADER.size:
            kind, number, run, size = HEADER.unpack_from(self.pending)
            if len(self.pending) < HEADER.size + size:
                break
            found.append((kind, number, run, bytes(self.pending[HEADER.size : HEADER.size + size])))
            del self.pending[: HEADER.size + size]
        return found

    def settle(self) -> None:
        """Wait for the helper to finish the previous request (it was cancelled)."""
        while not self.idle:
            for kind, number, _, _ in self.messages(wait=ANSWER_WITHIN):
                if kind == DONE and number == self.number:
                    self.idle = True

    def ask(self, root: str, runs: list[tuple[str, list[str]]]) -> None:
        self.settle()
        self.number = (self.number + 1) & 0xFFFFFFFF
        payload = marshal.dumps((root, runs))
        _write_all(self.requests, HEADER.pack(REQUEST, self.number, 0, len(payload)) + payload)
        self.idle = False

    def cancel(self) -> None:
        _write_all(self.requests, HEADER.pack(CANCEL, self.number, 0, 0))


_helper: _Helper | None = None
_no_helper = False  # it could not be started, or was given up


def _the_helper() -> _Helper | None:
    global _helper, _no_helper
    if _helper is not None and _helper.owner != os.getpid():
        _helper = None  # this is a fork of the process that started it: not ours
    threading = sys.modules.get("threading")
    if _helper is None and threading is not None and threading.active_count() > 1:
        return None  # a fork beside other threads could inherit a lock one of them holds
    if _helper is None and not _no_helper and hasattr(os, "fork"):
        started = _start_helper()
        if started is None:
            _no_helper = True
        else:
            _helper = _Helper(*started)
    return _helper


def _give_up() -> None:
    global _helper, _no_helper
    if _helper is not None:
        _helper.close()
    _helper, _no_helper = None, True


def identities(root: str, runs: list[Run], beside: Callable[[], Any] | None) -> tuple[array, Any]:
    """The (size, mtime in ns, inode) numbers of the files of RUNS, in order, and what
    BESIDE (if given) returns, called meanwhile."""
    files = sum(len(run.entries) for run in runs)
    helper = _the_helper() if files >= SHARE_FROM and len(runs) > 1 else None
    if helper is not None:
        try:
            asked = [
                (
                    run.directory,
                    [entry.name for entry in run.entries] if run.numbers is None else [],
                )
                for run in runs
            ]
            helper.ask(root, asked)
        except (OSError, EOFError, TimeoutError):
            _give_up()
            helper = None
    answer = beside() if beside is not None else None
    done: list[Any] = [run.numbers for run in runs]
    front = 0
    while front < len(runs) and done[front] is None:
        done[front] = numbers_of(runs[front].entries)
        front += 1
        if helper is not None:
            try:
                _collect(helper, runs, done)
            except (OSError, EOFError):
                _give_up()
                helper = None
    if helper is not None:
        try:
            helper.cancel()
        except OSError:
            _give_up()
    numbers = array("q")
    for run, found in zip(runs, done, strict=True):
        if found is UNREAD or found is None:
            found = numbers_of(run.entries)  # raises as a listing without a helper would
        numbers.extend(found)
    return numbers, answer


def _collect(helper: _Helper, runs: list[Run], done: list[Any]) -> None:
    for kind, number, run, data in helper.messages():
        if number != helper.number:
            continue
        if kind == DONE:
            helper.idle = True
        elif done[run] is None:
            found = array("q", data)
            if kind != NUMBERS or len(found) != 3 * len(runs[run].entries):
                found = UNREAD
            done[run] = found
