"""The walk of a directory corpus: every regular `.md` file and its `stat` numbers, shared
with a helper process.

A warm search of a directory proves that no file changed by a `stat` per file, which on
a large corpus takes longer than the query itself. Python threads do not share that work
(each `stat` gives up the interpreter lock and waits to take it back), so a long-lived
process forks one helper, once, the first time it walks a corpus of at least SHARE_FROM
files again, and thereafter gives it the directories the last walk met: the helper lists
and stats them from the last one back, while the searching process runs the query it was
given (`walk`'s BESIDE) and then walks from the first one on, taking the helper's answer
for each directory it reaches that the helper has done.

The helper answers only what a directory holds; one it could not read is done by the
searching process (so an error is the same as without a helper). It never outlives its
parent (it stops when the request pipe closes), holds none of the parent's other files,
and ignores Ctrl-C. A walk that finds it still busy with the last request goes on
without it; one that finds it gone gives it up (no other is started).
"""

from __future__ import annotations

import marshal
import os
import select
import stat
import struct
import sys
from array import array
from collections.abc import Callable
from itertools import chain, compress
from operator import and_, attrgetter, methodcaller, not_, or_
from typing import Any

INODE_BITS = (1 << 63) - 1  # an inode number as a signed 64-bit integer
# A file's numbers: its mode (its kind is what a directory of files is sorted out by),
# then what identifies its content (size, mtime in ns, inode).
IDENTITY = attrgetter("st_mode", "st_size", "st_mtime_ns", "st_ino")
FIELDS = 4
BY_NAME = attrgetter("name")
MARKDOWN = methodcaller("endswith", ".md")
# Every mode of a regular file lies between these (the kind bits, then the permissions).
REGULAR_MODES = (stat.S_IFREG, stat.S_IFREG | 0o7777)
SHARE_FROM = 1024  # files the last walk met: with fewer, no helper
# A message on either pipe: its kind, the request's number, then a run number and a length.
HEADER = struct.Struct("=BIiI")
REQUEST, CANCEL, NUMBERS, FAILED, DONE = range(5)
PIPE_BYTES = 1 << 20  # the most /proc/sys/fs/pipe-max-size allows by default
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def numbers_of(directory: int, names: list[str]) -> array:
    """(mode, size, mtime in ns, inode) of each of NAMES in the open DIRECTORY, not
    following links, as one array."""
    # `os.stat` by name, in a comprehension, rather than `DirEntry.stat` through `map`:
    # the walk's loop runs once per file of the corpus.
    stat = os.stat
    stats = [stat(name, dir_fd=directory, follow_symlinks=False) for name in names]
    try:
        return array("q", chain.from_iterable(map(IDENTITY, stats)))
    except OverflowError:  # an inode number of 2**63 or more
        numbers = array("q")
        for info in stats:
            numbers.extend((info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino & INODE_BITS))
        return numbers


def scan(
    directory: int, visible: Callable[[str], bool], markdown: Callable[[list[str]], bool]
) -> tuple[list[str], list[bool] | None, array]:
    """What the open DIRECTORY holds, by name: its VISIBLE directories and regular `.md`
    files (links are neither), as (names, which of them are directories (None: none
    is), the files' `stat` numbers). MARKDOWN(names): whether every name is VISIBLE and
    ends in `.md`, judged at once."""
    names = os.listdir(directory)
    names.sort()
    if names and markdown(names):
        # The usual directory: files only. Every name is statted, not following links,
        # and its kind read from the mode that stat gave.
        numbers = numbers_of(directory, names)
        modes = numbers[0::FIELDS]
        if REGULAR_MODES[0] <= min(modes) and max(modes) <= REGULAR_MODES[1]:
            return names, None, numbers
    # Any other directory: listed again, with each entry's kind.
    with os.scandir(directory) as listing:
        entries = sorted(listing, key=BY_NAME)
    names = list(map(BY_NAME, entries))
    shown = list(map(visible, names))
    entries, names = list(compress(entries, shown)), list(compress(names, shown))
    # An entry's own kind, from the listing; the methods' defaults follow links (and
    # `stat` an entry listed as a link only), so links are ruled out first.
    plain = list(map(not_, map(os.DirEntry.is_symlink, entries)))
    folders = list(map(and_, map(os.DirEntry.is_dir, entries), plain))
    markdown = map(and_, map(MARKDOWN, names), map(os.DirEntry.is_file, entries))
    files = list(map(and_, markdown, plain))
    kept = list(map(or_, folders, files))
    numbers = numbers_of(directory, list(compress(names, files)))
    return list(compress(names, kept)), list(compress(folders, kept)), numbers


def open_below(root: int, relative: str) -> int:
    """The directory RELATIVE (visible names joined by "/") below the open ROOT, opened one
    name at a time, never through a link."""
    current = os.dup(root)
    try:
        for segment in relative.split("/") if relative else ():
            inner = os.open(segment, DIRECTORY, dir_fd=current)
            os.close(current)
            current = inner
    except BaseException:
        os.close(current)
        raise
    return current


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


def _serve(
    requests: int,
    replies: int,
    visible: Callable[[str], bool],
    markdown: Callable[[list[str]], bool],
) -> None:
    """The helper: answer requests until the parent closes the request pipe."""
    while True:
        kind, number, _, size = HEADER.unpack(_read_exactly(requests, HEADER.size))
        payload = _read_exactly(requests, size)
        if kind != REQUEST:
            continue  # a cancel that came after the request was done
        root, directories = marshal.loads(payload)
        try:
            top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            top = None  # every directory fails: the searching process does them
        for at in range(len(directories) - 1, -1, -1):
            if select.select([requests], [], [], 0)[0]:
                break  # cancelled: the parent has every directory it needs
            try:
                if top is None:
                    raise FileNotFoundError(root)
                directory = open_below(top, directories[at])
                try:
                    names, folders, numbers = scan(directory, visible, markdown)
                finally:
                    os.close(directory)
            except Exception:
                _write_all(replies, HEADER.pack(FAILED, number, at, 0))
            else:
                kinds = None if folders is None else bytes(folders)
                data = marshal.dumps(("/".join(names), kinds, numbers.tobytes()))
                _write_all(replies, HEADER.pack(NUMBERS, number, at, len(data)) + data)
        if top is not None:
            os.close(top)
        _write_all(replies, HEADER.pack(DONE, number, 0, 0))


def _start_helper(
    visible: Callable[[str], bool], markdown: Callable[[list[str]], bool]
) -> tuple[int, int, int] | None:
    """Fork the helper: (its pid, the request pipe, the reply pipe), or None."""
    requests_read, requests_write = _pipe()
    replies_read, replies_write = _pipe()
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
            _serve(requests_read, replies_write, visible, markdown)
        finally:
            os._exit(0)
    os.close(requests_read)
    os.close(replies_write)
    os.set_blocking(replies_read, False)
    return pid, requests_write, replies_read


def _pipe() -> tuple[int, int]:
    """A pipe that holds a whole walk's answers (~4 KB a directory of 100 files), so the
    helper is not held up while the query runs; Linux pipes hold 64 KB unless asked."""
    read, write = os.pipe()
    try:
        import fcntl

        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass
    return read, write


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

    def messages(self) -> list[tuple[int, int, int, bytes]]:
        """The whole messages that arrived."""
        while True:
            try:
                more = os.read(self.replies, 1 << 16)
            except BlockingIOError:
                break
            if not more:
                raise EOFError
            self.pending += more
        found, at, pending = [], 0, self.pending
        while len(pending) - at >= HEADER.size:
            kind, number, run, size = HEADER.unpack_from(pending, at)
            end = at + HEADER.size + size
            if len(pending) < end:
                break
            found.append((kind, number, run, bytes(pending[at + HEADER.size : end])))
            at = end
        del pending[:at]
        return found

    def ask(self, root: str, directories: list[str]) -> bool:
        """Ask for DIRECTORIES below ROOT; False (not asked) while the helper is still
        busy with the last request (it was cancelled, or the machine is busy): the walk
        goes on without it rather than wait."""
        for kind, number, _, _ in self.messages():
            if kind == DONE and number == self.number:
                self.idle = True
        if not self.idle:
            return False
        self.number = (self.number + 1) & 0xFFFFFFFF
        payload = marshal.dumps((root, directories))
        _write_all(self.requests, HEADER.pack(REQUEST, self.number, 0, len(payload)) + payload)
        self.idle = False
        return True

    def cancel(self) -> None:
        _write_all(self.requests, HEADER.pack(CANCEL, self.number, 0, 0))


_helper: _Helper | None = None
_no_helper = False  # it could not be started, or was given up


def _the_helper(
    visible: Callable[[str], bool], markdown: Callable[[list[str]], bool]
) -> _Helper | None:
    global _helper, _no_helper
    if _helper is not None and _helper.owner != os.getpid():
        _helper = None  # this is a fork of the process that started it: not ours
    threading = sys.modules.get("threading")
    if _helper is None and threading is not None and threading.active_count() > 1:
        return None  # a fork beside other threads could inherit a lock one of them holds
    if _helper is None and not _no_helper and hasattr(os, "fork"):
        started = _start_helper(visible, markdown)
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


def walk(
    root: str,
    descriptor: int,
    visible: Callable[[str], bool],
    markdown: Callable[[list[str]], bool],
    known: list[str] | None,
    beside: Callable[[], Any] | None,
) -> tuple[list[tuple[str, list[str]]], array, Any, list[str]]:
    """Every regular `.md` file below the open directory DESCRIPTOR (ROOT is its path)
    whose path is of VISIBLE names, each directory's in name order and a directory's
    files where its name falls: (runs of them, each a directory's relative path with a
    trailing "/" (or "") and file names; their `stat` numbers, FIELDS per file, in
    order; what BESIDE (if given) returned, called first; the directories walked, in
    order). MARKDOWN: `visible` and `.md` for a whole directory's names at once. KNOWN:
    the directories of the last walk, shared with the helper."""
    helper = _the_helper(visible, markdown) if known is not None and len(known) > 1 else None
    if helper is not None:
        try:
            if not helper.ask(root, known):
                helper = None  # busy: this walk is done alone
        except (OSError, EOFError):
            _give_up()
            helper = None
    answer = beside() if beside is not None else None
    runs: list[tuple[str, list[str]]] = []
    numbers = array("q")
    walked: list[str] = []
    answered: dict[str, Any] = {}

    def visit(relative: str, parent: int | None, name: str) -> None:
        nonlocal helper
        walked.append(relative)
        found = answered.pop(relative, None)
        if found is None and helper is not None:
            try:
                _collect(helper, known, answered)
            except (OSError, EOFError):
                _give_up()
                helper = None
            found = answered.pop(relative, None)
        directory = descriptor if parent is None else None
        try:
            if found is None:
                if directory is None:
                    directory = os.open(name, DIRECTORY, dir_fd=parent)
                names, folders, held = scan(directory, visible, markdown)
            else:
                names, folders, held = found
            prefix = f"{relative}/" if relative else ""
            if folders is None or not any(folders):
                if names:
                    runs.append((prefix, names))
                    numbers.extend(held)
                return
            run: list[str] = []
            done = 0  # files of this directory already in NUMBERS
            for inner, folder in zip(names, folders, strict=True):
                if not folder:
                    run.append(inner)
                    continue
                if run:
                    runs.append((prefix, run))
                    numbers.extend(held[FIELDS * done : FIELDS * (done + len(run))])
                    done += len(run)
                    run = []
                if directory is None:
                    directory = open_below(descriptor, relative)
                visit(prefix + inner, directory, inner)
            if run:
                runs.append((prefix, run))
                numbers.extend(held[FIELDS * done :])
        finally:
            if directory is not None and directory != descriptor:
                os.close(directory)

    try:
        visit("", None, "")
    finally:
        # `visit` refers to itself: without this, it and all it holds (every name
        # listed) would wait for the cyclic garbage collector, which would then trace
        # them, in some later query's time.
        visit = None  # type: ignore[assignment]
    if helper is not None:
        try:
            helper.cancel()
        except OSError:
            _give_up()
    return runs, numbers, answer, walked


# A directory's names as the helper sends them (joined by "/") -> the list they split into,
# for the directories of the last walks: the same names again give the same list, which
# compares with the last walk's as one object. Lists are never changed once made.
_names_split: dict[str, list[str]] = {}
NAMES_SPLIT = 1024  # directories' names kept at most; cleared when full


def _names_of(joined: str) -> list[str]:
    names = _names_split.get(joined)
    if names is None:
        if len(_names_split) >= NAMES_SPLIT:
            _names_split.clear()
        names = _names_split[joined] = joined.split("/") if joined else []
    return names


def _collect(helper: _Helper, known: list[str], answered: dict[str, Any]) -> None:
    """Take what the helper has answered: by directory, what `scan` gives."""
    for kind, number, at, data in helper.messages():
        if number != helper.number:
            continue
        if kind == DONE:
            helper.idle = True
        elif kind == NUMBERS:
            try:
                joined, kinds, held = marshal.loads(data)
                names = _names_of(joined)
                folders = None if kinds is None else list(map(bool, kinds))
                held = array("q", held)
            except (ValueError, EOFError, TypeError):
                continue  # done by the searching process
            files = len(names) - (0 if folders is None else sum(folders))
            if (folders is None or len(folders) == len(names)) and len(held) == FIELDS * files:
                answered[known[at]] = (names, folders, held)
