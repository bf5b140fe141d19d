"""Git's lock files: `<file>.lock`, created exclusively, written, renamed onto `<file>`.

A lock is removed only when its holder is provably gone, never for its age alone: a
stopped git (`git gc` suspended with Ctrl-Z) may hold one for hours. Ours are marked
while held: with `flock` (`hold`; the kernel drops it when the process dies) and with a
second name, `<ref>.obversa.lock` (so the lock has two links): a lock of two links whose
flock is free is ours and dead. Git marks nothing, so any other lock is dead only when
no git process can be working in that repository (`git_may_run_in`, from /proc). Both
wait ORPHAN_LOCK_SECONDS first (a lock just taken is not yet marked). A lock that
cannot be proven dead is waited for, STALE_LOCK_SECONDS at most, then reported.
`gc_running` reads `gc.pid`, the lock `git gc` holds.

What is written under a lock (and loose objects) is flushed to disk exactly when git
would flush the same write (`fsyncs`); `pause` spreads out writers that retry.
"""

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

STALE_LOCK_SECONDS = 5.0  # how long a writer waits for a lock it cannot prove dead
ORPHAN_LOCK_SECONDS = 1.0  # a lock this old whose holder is provably gone is removed
GC_PID_EXPIRY = 12 * 3600.0  # git ignores a gc.pid older than this (builtin/gc.c)
# git's words for a ref lock it found taken (a pattern for `re`).
LOCK_FAILURE = r"Unable to create '([^']+\.lock)': File exists"
FSYNC_GROUPS = {  # core.fsync words that name each component we write (git's aggregates)
    "loose-object": {"loose-object", "objects", "committed", "added", "all"},
    "reference": {"reference", "committed", "added", "all"},
    "pack": {"pack", "objects", "committed", "added", "all"},
}
FSYNC_DEFAULT = {"pack"}  # of those, what git flushes when core.fsync says nothing
TRUE_WORDS = {"true", "yes", "on", "1"}


class LockBroken(Exception):
    """Another writer removed or replaced our lock while we held it."""


def lock_path(path: str) -> str:
    """Where git takes the lock for the file at PATH."""
    return path + ".lock"


def ours_marker(lock: str) -> str:
    """The second name a lock of ours has while held: `<ref>.obversa.lock` (git passes
    over every name ending in `.lock`, and no ref can be named `<ref>.obversa.lock`)."""
    return lock[: -len(".lock")] + ".obversa.lock"


def take(lock: str) -> int | None:
    """The open lock file LOCK, created and marked ours (flock, and a second name, so
    that a dead writer's lock of ours is told from git's); None if another holds it.
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
            _name_ours(lock)
            return handle
    return None


def _name_ours(lock: str) -> None:
    marker = ours_marker(lock)
    try:
        os.link(lock, marker)
    except FileExistsError:  # a killed writer's, left after its commit: ours now
        try:
            os.unlink(marker)
            os.link(lock, marker)
        except OSError:
            pass
    except OSError:
        pass  # no hard links here: such a lock counts as git's


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
    _unname_ours(lock)


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
    _unname_ours(lock)


def _unname_ours(lock: str) -> None:
    try:
        os.unlink(ours_marker(lock))
    except OSError:
        pass


def clear_if_stale(lock: str) -> tuple[bool, int | None]:
    """(whether LOCK stands, held or possibly held by a live writer; the age in seconds
    of a dead writer's LOCK this call removed, else None). OSError when a dead writer's
    lock cannot be removed."""
    try:
        seen = os.stat(lock)
    except FileNotFoundError:
        return False, None
    age = time.time() - seen.st_mtime
    if age < ORPHAN_LOCK_SECONDS:
        return True, None
    if seen.st_nlink > 1:  # ours (see `take`): dead once its holder's flock is gone
        dead = _orphaned(lock)
    else:  # git's, or ours from before its second name: no git may be working there
        dead = _orphaned(lock) and not git_may_run_in(_git_dir_of(lock))
    if not dead:
        return True, None
    try:
        now = os.stat(lock)
        if (now.st_ino, now.st_mtime_ns) != (seen.st_ino, seen.st_mtime_ns):
            return False, None  # a new lock taken meanwhile: the caller tries again
        os.unlink(lock)
    except FileNotFoundError:
        return False, None
    _unname_ours(lock)
    return False, int(time.time() - seen.st_mtime)


def dead_locks_removed(directory: str) -> list[str]:
    """Remove every lock directly in DIRECTORY whose holder is provably gone; the
    locks removed. A missing directory has none."""
    try:
        names = [
            entry.name
            for entry in os.scandir(directory)
            if entry.name.endswith(".lock") and not entry.name.endswith(".obversa.lock")
        ]
    except OSError:
        return []
    removed = []
    for name in names:
        lock = os.path.join(directory, name)
        if clear_if_stale(lock)[1] is not None:
            removed.append(lock)
    return removed


def git_may_run_in(git_dir: str | None) -> bool:
    """Whether a live git process (a stopped one too) may be working in the repository
    of GIT_DIR: one whose working directory, command line or GIT_DIR lies inside it, its
    work tree or a linked work tree, or one this process may not inspect. The `git` that
    started this process (`git obversa`) does not count. True where /proc cannot be read
    or GIT_DIR is unknown: nothing can be proven there."""
    if git_dir is None:
        return True
    try:
        entries = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return True
    places = _repository_places(git_dir)
    ours = _ancestors()
    for pid in entries:
        if pid in ours or not live_git(pid):
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                words = file.read().split(b"\0")
            with open(f"/proc/{pid}/environ", "rb") as file:
                words += [value for value in file.read().split(b"\0") if value.startswith(b"GIT_")]
        except FileNotFoundError:
            continue  # it ended meanwhile
        except OSError:
            return True  # another user's git: it may work here
        text = "\0".join(word.decode("utf-8", "replace") for word in words)
        if any(_inside(cwd, place) or place in text for place in places):
            return True
    return False


def live_git(pid: int) -> bool:
    """Whether process PID is a git program (`git`, `git-upload-pack`, ...; not
    `git-obversa`) that has not ended."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return False
    name = stat[stat.find(b"(") + 1 : stat.rfind(b")")]
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    if state in (b"Z", b"X") or name == b"git-obversa":
        return False
    return name == b"git" or name.startswith(b"git-")


def _ancestors() -> set[int]:
    """This process and the processes that started it."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                stat = file.read()
            pid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def _git_dir_of(lock: str) -> str | None:
    """The git directory a lock file lies in: the nearest directory above it that holds
    `HEAD` and `objects`."""
    directory = os.path.dirname(os.path.abspath(lock))
    while directory != os.path.dirname(directory):
        if os.path.isdir(os.path.join(directory, "objects")) and os.path.exists(
            os.path.join(directory, "HEAD")
        ):
            return directory
        directory = os.path.dirname(directory)
    return None


def _repository_places(git_dir: str) -> list[str]:
    """GIT_DIR, its work tree (the directory holding a `.git` GIT_DIR) and the roots of
    its linked work trees, resolved."""
    git_dir = os.path.realpath(git_dir)
    places = [git_dir]
    if os.path.basename(git_dir) == ".git":
        places.append(os.path.dirname(git_dir))
    try:
        linked = os.listdir(os.path.join(git_dir, "worktrees"))
    except OSError:
        linked = []
    for name in linked:
        try:
            with open(os.path.join(git_dir, "worktrees", name, "gitdir"), encoding="utf-8") as f:
                places.append(os.path.dirname(os.path.realpath(f.read().strip())))
        except OSError:
            continue
    return places


def _inside(path: str, place: str) -> bool:
    return path == place or path.startswith(place.rstrip("/") + "/")


def hold(handle: int) -> None:
    """Mark a lock of ours as owned by this process (see the module's docstring)."""
    import fcntl  # here and in `unheld`: a command that only reads takes no lock

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
        return unheld(handle)
    finally:
        os.close(handle)  # releases the mark if we took it


def unheld(handle: int) -> bool:
    """Whether no live process marks the open file HANDLE as its own (see `hold`); if
    none does, this process marks it until HANDLE is closed."""
    import fcntl

    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held by its owner (or no flock here: nothing can be proven)
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


def fsyncs(config: "Mapping[str, str | None]", component: str) -> bool:
    """Whether git, with this repository's config (lower-case keys), flushes COMPONENT to
    disk when it writes one ("loose-object", "reference" or "pack").

    As git's `parse_fsync_components`: `none` clears the default, a word adds its
    components, `-word` removes them from the default, and what is named positively
    wins; git's default names packs, not loose objects or refs. `core.fsyncObjectFiles`
    (older) forces it for loose objects. `core.fsyncMethod=writeout-only` only starts
    the write-back without waiting for it, which Python cannot ask for: no flush then.
    `batch` (loose objects written without a flush each, one disk flush before the ref
    moves) is honoured as a flush of each object: as durable, never less.
    """
    if component == "loose-object" and "core.fsyncobjectfiles" in config:
        if (config["core.fsyncobjectfiles"] or "true").strip().lower() in TRUE_WORDS:
            return True
    if (config.get("core.fsyncmethod") or "").strip().lower() == "writeout-only":
        return False
    words = (config.get("core.fsync") or "").lower().replace(" ", "").split(",")
    named = FSYNC_GROUPS[component]
    default = component in FSYNC_DEFAULT and "none" not in words
    removed = any(word[1:] in named for word in words if word.startswith("-"))
    return (default and not removed) or any(word in named for word in words)


def pause(scale: float = 0.001) -> None:
    """A short random sleep, so that retrying writers do not move in lockstep."""
    import random

    time.sleep(random.uniform(0.1 * scale, scale))
