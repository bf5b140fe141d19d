"""Git's lock files: `<file>.lock`, created exclusively, written, renamed onto `<file>`.

A lock held by a live writer (git or git-obversa) exists for microseconds: it is created,
written and renamed into place in one go. One whose file has not changed for
STALE_LOCK_SECONDS was left by a killed process. Ours are also marked with `flock` while
held (`hold`): the kernel drops the mark when the process dies, so an empty lock of ours
whose mark is gone is known stale after ORPHAN_LOCK_SECONDS (a file system without flock
keeps to the age rule). `gc_running` reads `gc.pid`, the lock `git gc` holds.
"""

import fcntl
import os
import time

STALE_LOCK_SECONDS = 5.0  # no live writer holds a ref or object lock this long
ORPHAN_LOCK_SECONDS = 1.0  # an empty lock of ours this old whose owner died is stale
GC_PID_EXPIRY = 12 * 3600.0  # git ignores a gc.pid older than this (builtin/gc.c)
# git's words for a ref lock it found taken (a pattern for `re`).
LOCK_FAILURE = r"Unable to create '([^']+\.lock)': File exists"


class LockBroken(Exception):
    """Another writer removed or replaced our lock while we held it."""


def lock_path(path: str) -> str:
    """Where git takes the lock for the file at PATH."""
    return path + ".lock"


def take(lock: str) -> int | None:
    """The open lock file LOCK, created and marked ours; None if another holds it.
    OSError when it cannot be created (but for a directory that a concurrent
    `git pack-refs` removed, which is made again)."""
    for _ in range(100):
        try:
            handle = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            return None
        except FileNotFoundError:  # its directory is new, or pack-refs just removed it
            try:
                os.makedirs(os.path.dirname(lock), exist_ok=True)
            except FileNotFoundError:
                pass
        else:
            hold(handle)
            return handle
    return None


def commit(lock: str, target: str, handle: int, data: bytes, fsync: bool) -> None:
    """Write DATA into the lock HANDLE (at LOCK) and rename it onto TARGET, as git does;
    the handle is closed whatever happens. OSError, or LockBroken when LOCK is no longer
    the file we wrote."""
    try:
        write_all(handle, data)
        if fsync:
            os.fsync(handle)
        mine = os.fstat(handle)
    finally:
        os.close(handle)
    now = os.stat(lock)
    if (now.st_ino, now.st_dev) != (mine.st_ino, mine.st_dev):
        raise LockBroken(lock)
    os.rename(lock, target)


def release(lock: str, handle: int | None) -> None:
    """Close the lock HANDLE and remove LOCK if it is still ours."""
    if handle is None:
        return
    mine = os.fstat(handle)
    os.close(handle)
    try:
        now = os.stat(lock)
        if (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev):
            os.unlink(lock)
    except OSError:
        pass


def clear_if_stale(lock: str) -> tuple[bool, int | None]:
    """(whether LOCK stands, held by a live writer; the age in seconds of a stale LOCK
    this call removed, else None). OSError when a stale lock cannot be removed."""
    try:
        seen = os.stat(lock)
    except FileNotFoundError:
        return False, None
    age = time.time() - seen.st_mtime
    if age < STALE_LOCK_SECONDS and not (
        age >= ORPHAN_LOCK_SECONDS and seen.st_size == 0 and _orphaned(lock)
    ):
        return True, None
    try:
        now = os.stat(lock)
        if (now.st_ino, now.st_mtime_ns) != (seen.st_ino, seen.st_mtime_ns):
            return False, None  # a new lock taken meanwhile: the caller tries again
        os.unlink(lock)
    except FileNotFoundError:
        return False, None
    return False, int(time.time() - seen.st_mtime)


def hold(handle: int) -> None:
    """Mark a lock of ours as owned by this process (see the module's docstring)."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass


def _orphaned(lock: str) -> bool:
    """Whether no live process marks LOCK as its own (see `hold`). Asked only of an
    empty lock past ORPHAN_LOCK_SECONDS: git writes the new value into its lock as soon
    as it takes it, so only a lock of ours stays empty while held."""
    try:
        handle = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held by its owner (or no flock here: the age rule decides)
    finally:
        os.close(handle)  # releases the mark if we took it
    return True


def gc_running(common_dir: str) -> bool:
    """Whether a `git gc` runs, judged as git judges it: gc.pid names a live process of
    this host or any process of another, and is younger than GC_PID_EXPIRY."""
    try:
        with open(os.path.join(common_dir, "gc.pid"), encoding="utf-8", errors="replace") as f:
            pid_text, _, host = f.read().strip().partition(" ")
            age = time.time() - os.fstat(f.fileno()).st_mtime
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    if age > GC_PID_EXPIRY:
        return False
    if host and host != os.uname().nodename:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        pass
    return True


def write_all(handle: int, data: bytes) -> None:
    """os.write until everything is written (a write near a limit can be short)."""
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]
