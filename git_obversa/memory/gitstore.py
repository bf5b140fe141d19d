"""A small object and ref layer for memory storage: Git's files in-process, plumbing as fallback.

`open_store(path)` asks git once where the repository's common directory is, which
object format it uses and what its config says (two git processes, side by side), then
reads and writes objects and refs in-process, in Git's own file formats
(`repo/objects.py`, `repo/refs.py`: loose objects, packs, loose refs, packed-refs; the
standard library only, so a one-shot command starts without loading an object library).
A repository this store cannot read exactly as git does (an extension it does not know,
reftable refs, alternates) gets `PlumbingStore`, which spawns isolated `git` processes
instead. Both have the same
methods; callers never see which one they hold, except through `kind`.

What this layer guarantees beyond the file formats:
- object ids in the repository's hash, and ref creation with `add_if_new`,
- tolerance for concurrent writers and maintenance: a locked ref, directories that
  `git pack-refs`/`gc` remove, an object moving into a pack while it is read,
- `git gc --prune=now` deleting objects written just before the ref that names them:
  after the update the objects written for it are checked and written again if gone
  (once a running gc has finished),
- loose objects written as git writes them (a temporary file linked into place), so a
  writer killed mid-write leaves no lock behind; a ref lock left by a killed process is
  recognised as stale and cleared, with one line on stderr,
- the durability the repository's config asks of git (`core.fsync`, `core.fsyncMethod`,
  `core.fsyncObjectFiles`), no more and no less (see `_fsyncs`),
- history: every scope-ref move through this layer also appends a commit to the scope's
  history ref (`record_history`, `update_refs(..., action=...)`), see docs/memory.md.
"""

import errno
import fcntl
import os
import sys
import time
import zlib

from git_obversa.lean.digests import builtin_digests
from git_obversa.memory.port import MemoryFailure
from git_obversa.repo import git, objects, refs

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

OUTPUT_CAP = 1048576  # bytes of stdout+stderr any git process may print (SPEC §3.4)
GIT_TIMEOUT = 600.0
GC_WAIT_SECONDS = 120.0  # longest wait for a running `git gc` before checking objects
GC_PID_EXPIRY = 12 * 3600.0  # git ignores a gc.pid older than this (builtin/gc.c)
O_TMPFILE = getattr(os, "O_TMPFILE", 0)  # Linux: a file with no name until it is linked
# What linking an unnamed file through /proc fails with where it cannot be done.
UNLINKABLE = (errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM)

SCOPE_REF_PREFIX = "refs/obversa/memory/v1/"  # -> the scope's tree (format 1)
HISTORY_REF_PREFIX = "refs/obversa/history/v1/"  # -> a commit per state of the scope
NAME_REF_PREFIX = "refs/obversa/names/v1/"  # -> a blob holding the scope's name
HISTORY_IDENTITY = b"git-obversa <git-obversa@localhost>"
ABSENT_TRAILER = "Obversa-State: absent"  # a history state in which the scope was dropped
RECENT_STATES = 8  # how far back a writer looks for a state a concurrent writer recorded
MAX_HISTORY_ATTEMPTS = 64


def notify(message: str) -> None:
    """Say something the user should know that is not an error (a stale lock cleared).
    Programs embedding the library may replace this function."""
    sys.stderr.write(f"git-obversa: {message}\n")


class StoreError(MemoryFailure):
    """Storage failed: code UNSAFE_STORAGE or STORAGE_ERROR, a message, no path or details."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


class MissingObject(StoreError):
    """An object is not in the repository (possibly only for a moment, during gc)."""

    def __init__(self, oid: str, message: str = "Memory blob cannot be read.") -> None:
        super().__init__("UNSAFE_STORAGE", message)
        self.oid = oid


# The (sha1, sha256) objects are hashed with: hashlib's (OpenSSL, several times faster
# per byte, but milliseconds to load) unless the process chose CPython's own.
_digests: "tuple[Callable[..., Any], Callable[..., Any]] | None" = None


def use_builtin_digests() -> None:
    """Hash objects with CPython's own SHA-1 and SHA-256 from now on: a process that
    writes once and exits (a one-shot command) hashes a few kilobytes, far less time
    than loading OpenSSL takes (docs/benchmarks.md, "The one-shot command")."""
    global _digests
    _digests = builtin_digests()


def object_id(kind: str, data: bytes, object_format: str) -> str:
    """The id git gives an object of KIND with DATA in a repository of OBJECT_FORMAT."""
    global _digests
    if _digests is None:
        import hashlib  # here: only writes hash

        _digests = hashlib.sha1, hashlib.sha256
    sha1, sha256 = _digests
    digest = sha256() if object_format == "sha256" else sha1()
    digest.update(b"%s %d\0" % (kind.encode("ascii"), len(data)))
    digest.update(data)
    return digest.hexdigest()


def run_git(
    args: "Sequence[str]", cwd: str, *, input: bytes | None = None, cap: int = OUTPUT_CAP
) -> "subprocess.CompletedProcess":
    """Run isolated git (no GIT_* from the caller, no hooks, no lazy fetch) with an output cap."""
    import subprocess

    try:
        completed = git.run(
            args, cwd, input=input if input is not None else b"", check=False,
            isolated=True, timeout=GIT_TIMEOUT,
        )  # fmt: skip
    except git.GitError as error:
        raise StoreError("STORAGE_ERROR", "Git could not start.") from error
    except subprocess.TimeoutExpired as error:
        raise StoreError("STORAGE_ERROR", "Git did not finish in time.") from error
    if len(completed.stdout) + len(completed.stderr) > cap:
        raise StoreError("UNSAFE_STORAGE", "Git output exceeded the memory storage limit.")
    return completed


CONFIG_KEYS = (
    r"^(core\.(repositoryformatversion|fsync|fsyncmethod|fsyncobjectfiles)|extensions\..*)$"
)
# Extensions the in-process store understands; any other sends a repository to git.
KNOWN_EXTENSIONS = {"extensions.objectformat", "extensions.worktreeconfig"}


# The two questions `locate` asks git, side by side.
LOCATE_COMMANDS = [
    ["rev-parse", "--path-format=absolute", "--git-common-dir", "--show-object-format=storage"],
    ["config", "-z", "--get-regexp", CONFIG_KEYS],
]
# `locate`'s questions asked ahead (`start_locating`), or None.
_asked: "_Asked | None" = None


def start_locating(repository_path: str, key: str | None = None) -> "Callable[[], str] | None":
    """Ask git `locate`'s questions about REPOSITORY_PATH ahead; the next `locate` in this
    process takes the answers. A one-shot command asks before it imports the CLI and the
    engine, so that git answers meanwhile (a git process costs a few milliseconds of a
    command that starts in ~50). The first question is asked at once, the second when
    this is called again for the same path (the CLI does, once it is imported) or when
    the answers are needed: two git processes started back to back cost 1-2 ms more than
    started apart (the second waits until the first is under way).

    With KEY (a config key of letters and dots, as `obversa.scope`), its value is asked
    in the same `git config` process when that reads what `git config --get KEY` reads
    in REPOSITORY_PATH run with this process's environment (`git.config_isolated_as_here`):
    one git process fewer. The function returned then waits for it and gives what that
    command prints, but its final newline ("" when KEY is unset). Else None: the caller
    asks itself."""
    global _asked
    where = os.path.abspath(repository_path)
    if _asked is not None and _asked.where == where and not _asked.answered:
        _asked.ask_next()
        return _asked.value if key is not None and _asked.key == key else None
    if _asked is not None:  # another path's, or answers an earlier command left unused
        try:
            _asked.answers()  # reaped, not used
        except git.GitError:
            pass
        _asked = None
    merged = key is not None and git.config_isolated_as_here()
    commands = LOCATE_COMMANDS
    if merged:
        assert key is not None
        pattern = CONFIG_KEYS[:-2] + "|" + key.replace(".", r"\.") + ")$"
        commands = [LOCATE_COMMANDS[0], ["config", "-z", "--get-regexp", pattern]]
    try:
        asked = _Asked(where, repository_path, commands, key if merged else None)
    except git.GitError:
        return None  # `locate` asks again, and says what is wrong
    _asked = asked
    return asked.value if merged else None


class _Asked:
    """`locate`'s questions asked ahead, one git process at a time (`start_locating`)."""

    def __init__(self, where: str, cwd: str, commands: list[list[str]], key: str | None):
        self.where, self.key = where, key
        self._cwd, self._commands = cwd, commands
        self._running: list[Callable[[], list[tuple[int, bytes]]]] = []
        self._failed: git.GitError | None = None  # a question that could not be asked
        self._answers: list[tuple[int, bytes]] | git.GitError | None = None
        self.ask_next()
        if self._failed is not None:
            raise self._failed

    @property
    def answered(self) -> bool:
        """Whether the answers have been waited for (they may be stale now)."""
        return self._answers is not None

    def ask_next(self) -> None:
        """Start the next question, if one is left."""
        asked = len(self._running)
        if asked == len(self._commands) or self._failed is not None:
            return
        try:
            command = self._commands[asked : asked + 1]
            self._running.append(git.started(command, self._cwd, isolated=True, cap=OUTPUT_CAP))
        except git.GitError as error:
            self._failed = error

    def answers(self) -> list[tuple[int, bytes]]:
        """What `git.outputs` gives for the questions (waited for once; every process is
        reaped, whatever fails): GitError if one could not start or printed too much."""
        while len(self._running) < len(self._commands) and self._failed is None:
            self.ask_next()
        if self._answers is None:
            answers: list[tuple[int, bytes]] = []
            failure = self._failed
            for running in self._running:
                try:
                    answers += running()
                except git.GitError as error:
                    failure = failure or error
            self._answers = failure or answers
        if isinstance(self._answers, git.GitError):
            raise self._answers
        return self._answers

    def value(self) -> str:
        """KEY's value, as `git config --get KEY` prints it but its final newline."""
        assert self.key is not None
        try:
            _, (_, listed) = self.answers()
        except git.GitError:  # asked alone, as ever (`locate` says what went wrong)
            [(_, printed)] = git.outputs([["config", "--get", self.key]], self._cwd)
            return printed.decode("utf-8", "replace").removesuffix("\n")
        found = b""
        for item in listed.split(b"\0"):
            name, _, text = item.partition(b"\n")
            if name == self.key.encode():  # the last value wins, as `--get` prints it
                found = text
        return found.decode("utf-8", "replace")


def locate(repository_path: str) -> tuple[str, str, dict[str, str | None]]:
    """(absolute common git dir, object format, the config keys the store obeys) of the
    repository containing REPOSITORY_PATH. The two git processes run side by side; the
    config is what git itself sees there (system, global, repository, includes)."""
    global _asked
    asked, _asked = _asked, None
    extra = None
    try:
        if asked is not None and asked.where == os.path.abspath(repository_path):
            answers, extra = asked.answers(), asked.key
        else:
            if asked is not None:
                try:
                    asked.answers()  # another repository's: reaped, not used
                except git.GitError:
                    pass
            answers = git.outputs(LOCATE_COMMANDS, repository_path, isolated=True, cap=OUTPUT_CAP)
        (status, located), (_, configured) = answers
    except git.OutputTooLarge as error:
        message = "Git output exceeded the memory storage limit."
        raise StoreError("UNSAFE_STORAGE", message) from error
    except git.GitError as error:
        raise StoreError("STORAGE_ERROR", "Git could not start.") from error
    if status != 0:
        raise StoreError(
            "STORAGE_ERROR", f"repositoryPath must identify a Git repository: {repository_path}"
        )
    lines = located.decode("utf-8", "replace").splitlines()
    if len(lines) != 2:
        raise StoreError("STORAGE_ERROR", "Git did not report its object format")
    common_dir, object_format = lines
    if object_format not in ("sha1", "sha256"):
        raise StoreError("STORAGE_ERROR", f"unsupported Git object format: {object_format}")
    config: dict[str, str | None] = {}
    for item in configured.split(b"\0"):
        if item:  # "key\nvalue", or "key" alone for a key without "= value"
            key, newline, value = item.decode("utf-8", "replace").partition("\n")
            if key != extra:  # the caller's key, asked along (`start_locating`)
                config[key] = value if newline else None
    return common_dir, object_format, config


def open_store(repository_path: str) -> "FileStore | PlumbingStore":
    """The store of the repository at REPOSITORY_PATH (a worktree, a subdirectory, a bare dir).

    A linked worktree shares its repository's store: the common dir is opened, never the
    per-worktree git dir.
    """
    common_dir, object_format, config = locate(repository_path)
    if FileStore.suits(common_dir, config):
        return FileStore(common_dir, object_format, config)
    return PlumbingStore(common_dir, object_format)


def _is_ref_name(name: str) -> bool:
    """Whether a file name under refs/ can be (the last part of) a ref: not a lock, not
    hidden, none of the characters git refuses in ref names."""
    return not (
        name.startswith(".")
        or name.endswith((".lock", "."))
        or any(c in name for c in " ~^:?*[\\\x7f")
        or any(c < " " for c in name)
    )


def _gc_running(common_dir: str) -> bool:
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


class _BaseStore:
    kind = "base"

    def __init__(self, common_dir: str, object_format: str) -> None:
        self.common_dir = common_dir
        self._root = os.path.join(common_dir, "")  # ref and object paths are appended to it
        self.object_format = object_format
        self.hex_length = 64 if object_format == "sha256" else 40
        # Objects written since the last ref update: re-checked after it (gc may prune them).
        self._pending: dict[str, tuple[str, bytes]] = {}
        # History commits already read or written: id -> (scope tree or None, parent).
        self.history_states: dict[str, tuple[str | None, str | None]] = {}

    def ref_lock_path(self, ref: str) -> str:
        """Where git takes the lock for REF (files backend)."""
        return self.ref_path(ref) + ".lock"

    def ref_path(self, ref: str) -> str:
        """Where the files backend keeps REF (a name checked by the caller)."""
        return self._root + ref.replace("/", os.sep)

    def write_object(self, kind: str, data: bytes) -> str:
        """Store an object and return its id (in the repository's hash)."""
        oid = object_id(kind, data, self.object_format)
        self._write(oid, kind, data)
        self._pending[oid] = (kind, data)
        return oid

    def update_ref(self, ref: str, old: str | None, new: str) -> bool:
        """Compare-and-swap REF from OLD (None: must not exist) to NEW.

        False when the ref did not hold OLD or could not be locked right now; the caller
        re-reads the ref to tell a lost race from contention. After a successful update,
        the objects written since the previous update are checked and rewritten if a
        concurrent `git gc --prune=now` removed them before the ref protected them.
        """
        pending, self._pending = self._pending, {}
        if not self._swap(ref, old, new):
            return False
        self._settle(pending)
        return True

    def move_scope(
        self,
        digest: str,
        old: str | None,
        new: str,
        action: str,
        parent: "Any" = ...,
        check: "Any" = None,
    ) -> bool | None:
        """Compare-and-swap scope DIGEST's ref from OLD to NEW and record NEW in its history.

        True: moved and recorded. False: the scope ref did not hold OLD (a lost race).
        None: the history ref is locked by another writer right now (contention; a stale
        lock is cleared through `LockWatch`). PARENT, when given, is the history commit
        the new state follows (a repair skips broken states); by default the history's
        head. CHECK, when given, is asked just before the move (under the history lock
        on the in-process store); False stops it. This store records after the move; the
        in-process store holds the history lock across it, so the history's order is the
        scope's.
        """
        if check is not None and not check():
            return False
        if parent is ...:
            ref = history_ref(digest)
            head = self.read_ref(ref)
            ours = self.take_pending()  # the new state's objects: settled by the move below
            catch_up = unrecorded_state(self, digest, head, old, new)
            if catch_up is not None:
                self.update_ref(ref, head, catch_up)  # lost race: record_history catches up
            self._pending = ours
        if not self.update_ref(SCOPE_REF_PREFIX + digest, old, new):
            return False
        if parent is ...:
            record_history(self, digest, old, new, action)
        else:
            ref = history_ref(digest)
            self.update_ref(ref, self.read_ref(ref), history_commit(self, new, parent, action))
        return True

    def take_pending(self) -> dict[str, tuple[str, bytes]]:
        """The objects written since the last ref update (for a ref moved by git itself)."""
        pending, self._pending = self._pending, {}
        return pending

    def _wait_for_gc(self, holding: str | None = None) -> None:
        """Wait while a gc runs; keep the lock HOLDING fresh meanwhile (a lock whose file
        does not change for STALE_LOCK_SECONDS is taken for a dead writer's)."""
        deadline = time.monotonic() + GC_WAIT_SECONDS
        touched = time.monotonic()
        while _gc_running(self.common_dir) and time.monotonic() < deadline:
            time.sleep(0.001)  # a loop of gc runs leaves gaps of a few milliseconds
            if holding is not None and time.monotonic() - touched > STALE_LOCK_SECONDS / 5:
                touched = time.monotonic()
                try:
                    os.utime(holding)
                except OSError:
                    pass

    def _settle(self, pending: dict[str, tuple[str, bytes]], holding: str | None = None) -> None:
        if not pending:
            return
        self._restore(pending)
        if _gc_running(self.common_dir):
            self._wait_for_gc(holding)
            self._restore(pending)

    def _restore(self, pending: dict[str, tuple[str, bytes]]) -> None:
        for oid, (kind, data) in pending.items():
            if not self._surely_present(oid):
                self._write(oid, kind, data)

    def _surely_present(self, oid: str) -> bool:
        return self.has_object(oid)

    def read_object_retrying(self, oid: str, max_bytes: int = OUTPUT_CAP) -> tuple[str, bytes]:
        """read_object, retried briefly: an object can be between a loose file and a pack."""
        for attempt in range(3):
            try:
                return self.read_object(oid, max_bytes)
            except MissingObject:
                time.sleep(0.002 * (attempt + 1))
        return self.read_object(oid, max_bytes)

    def gc_running(self) -> bool:
        return _gc_running(self.common_dir)

    # Implemented by each store.
    def read_ref(self, ref: str) -> str | None:
        raise NotImplementedError

    def read_object(self, oid: str, max_bytes: int = OUTPUT_CAP) -> tuple[str, bytes]:
        """(type, content) of an object. MAX_BYTES is the most the caller accepts (the
        caller checks sizes itself); a store may refuse an object far larger."""
        raise NotImplementedError

    def has_object(self, oid: str) -> bool:
        raise NotImplementedError

    def list_refs(self, prefix: str) -> dict[str, str]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def _write(self, oid: str, kind: str, data: bytes) -> None:
        raise NotImplementedError

    def _swap(self, ref: str, old: str | None, new: str) -> bool:
        raise NotImplementedError

    def __enter__(self) -> "Any":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileStore(_BaseStore):
    """In-process objects and refs, read and written in Git's own file formats (the fast
    path): loose objects, packs, loose refs and packed-refs (`objects.py`)."""

    kind = "in-process"

    @staticmethod
    def suits(common_dir: str, config: "Mapping[str, str | None]") -> bool:
        """Whether this store reads the repository exactly as git does: the files ref
        backend, no extension it does not know (reftable, preciousObjects, a partial
        clone's promisor), no alternate object directories."""
        if any(key.startswith("extensions.") and key not in KNOWN_EXTENSIONS for key in config):
            return False
        return not os.path.exists(os.path.join(common_dir, "objects", "info", "alternates"))

    def __init__(
        self, common_dir: str, object_format: str, config: "Mapping[str, str | None]"
    ) -> None:
        super().__init__(common_dir, object_format)
        self.fsync_objects = _fsyncs(config, "loose-object")
        self.fsync_refs = _fsyncs(config, "reference")
        self._objects_dir = os.path.join(common_dir, "objects")
        self._objects_root = os.path.join(self._objects_dir, "")
        self._packs = objects.Packs(os.path.join(self._objects_dir, "pack"), self.hex_length // 2)
        self._packed_refs = refs.PackedRefs(os.path.join(common_dir, "packed-refs"))
        self._nonce = os.urandom(4).hex()
        self._written = 0
        # Whether new objects start as unnamed files (O_TMPFILE), until that fails once.
        self._unnamed = O_TMPFILE != 0

    def close(self) -> None:
        self._packs.close()

    def _temporary_name(self) -> str:
        """A name no other writer uses (its pid, a random part drawn once, a count): git
        and other processes pick their own, and O_EXCL catches the impossible clash."""
        self._written += 1
        return f"tmp_obj_{os.getpid()}_{self._nonce}_{self._written}"

    def read_ref(self, ref: str) -> str | None:
        try:
            handle = os.open(self.ref_path(ref), os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            return self._packed_refs.refs().get(ref)
        try:
            value = os.read(handle, 4096)
        except IsADirectoryError:  # refs/a names a directory of refs: no ref a
            return self._packed_refs.refs().get(ref)
        finally:
            os.close(handle)
        # A symbolic ref reads as "ref: <target>", which every caller refuses.
        return value.split(b"\n", 1)[0].strip().decode("utf-8", "replace")

    def list_refs(self, prefix: str) -> dict[str, str]:
        names = {name for name in self._packed_refs.refs() if name.startswith(prefix)}
        top = os.path.join(self.common_dir, *prefix.rstrip("/").split("/"))
        for directory, _, files in os.walk(top):
            relative = os.path.relpath(directory, self.common_dir).replace(os.sep, "/")
            names.update(f"{relative}/{name}" for name in files if _is_ref_name(name))
        found = {}
        for name in sorted(names):
            value = self.read_ref(name)
            if value is not None:
                found[name] = value
        return found

    def _loose_path(self, oid: str) -> str:
        return self._objects_root + oid[:2] + os.sep + oid[2:]

    def read_object(self, oid: str, max_bytes: int = OUTPUT_CAP) -> tuple[str, bytes]:
        # Sized before it is read whole: a hostile 500 MB blob costs a header, not 1 GB.
        if len(oid) != self.hex_length or oid.strip(HEX):
            raise MissingObject(oid)
        limit = max_bytes + OUTPUT_CAP
        try:
            found = objects.read_loose(self._loose_path(oid), limit)
            if found is None:
                found = self._read_packed(bytes.fromhex(oid), limit)
        except objects.TooLarge:
            raise StoreError("UNSAFE_STORAGE", "Memory blob exceeds its allowed size.") from None
        except objects.Corrupt as error:
            raise StoreError("UNSAFE_STORAGE", "A memory object is corrupt.") from error
        if found is None:
            raise MissingObject(oid)
        return found

    def _read_packed(self, raw: bytes, limit: int) -> tuple[str, bytes] | None:
        located = self._packs.locate(raw)
        if located is None:
            return None
        pack, offset = located
        if pack.size(offset) > limit:
            raise objects.TooLarge(pack.size(offset))

        def find(base: bytes) -> tuple[str, bytes] | None:
            found = objects.read_loose(self._loose_path(base.hex()), limit)
            return found if found is not None else self._read_packed(base, limit)

        return pack.read(offset, find)

    def has_object(self, oid: str) -> bool:
        if len(oid) != self.hex_length or oid.strip(HEX):
            return False
        return os.path.exists(self._loose_path(oid)) or (
            self._packs.locate(bytes.fromhex(oid)) is not None
        )

    def _surely_present(self, oid: str) -> bool:
        # Only a loose copy counts: a pack mapped here may have been deleted by a
        # concurrent `git repack -a -d`, with our object in it. A stat, not a read: the
        # object was written whole by this process (a temporary file linked into place).
        return os.path.exists(self._loose_path(oid))

    def _write(self, oid: str, kind: str, data: bytes) -> None:
        # As git writes a loose object, whole or not at all: compressed into a file with
        # no name (O_TMPFILE; where the file system has none, a `tmp_obj_*` file, which
        # `git prune` removes should the writer be killed) that is then linked at its
        # name, never a lock. An object that is there already is found by that link
        # failing, not by a look first (a write's objects are new but for a rare blob),
        # and freshened, as git does, so that a prune with an expiry keeps it.
        directory = self._objects_root + oid[:2]
        final = directory + os.sep + oid[2:]
        compressed = deflate(b"%s %d\0" % (kind.encode(), len(data)) + data)
        for _ in range(1000):
            try:
                handle, temporary = self._create_temporary(directory)
            except FileNotFoundError:  # objects/xx/ is new, or a concurrent prune removed it
                try:
                    os.makedirs(directory, exist_ok=True)
                except OSError as error:
                    raise storage_failure(error, write_failure(kind, error)) from error
                continue
            except OSError as error:
                if os.path.exists(final):  # a read-only object store that holds it
                    return
                raise storage_failure(error, write_failure(kind, error)) from error
            try:
                try:
                    _write_all(handle, compressed)
                    if self.fsync_objects:
                        os.fsync(handle)
                    if temporary is None and not self._link_unnamed(handle, final):
                        temporary = ""  # unnamed files cannot be linked here: named ones
                        continue
                finally:
                    os.close(handle)
                if temporary:
                    os.link(temporary, final)
            except FileExistsError:  # there already, or another writer stored it meanwhile
                try:
                    os.utime(final)
                except FileNotFoundError:  # pruned since
                    continue
                except OSError:  # a read-only object store: the object is there
                    pass
            except FileNotFoundError:  # the temporary file (or objects/xx/) pruned meanwhile
                continue
            except OSError as error:
                raise storage_failure(error, write_failure(kind, error)) from error
            finally:
                if temporary:
                    try:
                        os.unlink(temporary)
                    except OSError:
                        pass
            return
        raise write_failure(kind)

    def _create_temporary(self, directory: str) -> tuple[int, str | None]:
        """An open file for a new object in DIRECTORY, and its name (None: it has none,
        `_link_unnamed` gives it its name)."""
        if self._unnamed:
            try:
                return os.open(directory, os.O_WRONLY | O_TMPFILE, 0o444), None
            except IsADirectoryError:
                self._unnamed = False  # a kernel without O_TMPFILE reads it as O_DIRECTORY
            except OSError as error:
                if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                self._unnamed = False  # a file system without unnamed files
        temporary = directory + os.sep + self._temporary_name()
        return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444), temporary

    def _link_unnamed(self, handle: int, final: str) -> bool:
        """Give the unnamed file HANDLE the name FINAL (through /proc, as an unprivileged
        process can); False, and named files from now on, where that cannot be done."""
        try:
            os.link(f"/proc/self/fd/{handle}", final, src_dir_fd=handle, follow_symlinks=True)
        except FileNotFoundError:
            if not os.path.isdir(os.path.dirname(final)):
                raise  # objects/xx/ pruned meanwhile: made again, and tried again
        except OSError as error:
            if error.errno not in UNLINKABLE:
                raise
        else:
            return True
        self._unnamed = False  # no /proc, or a file system that refuses it
        return False

    def _swap(self, ref: str, old: str | None, new: str) -> bool:
        handle = self._lock_ref(ref)
        if handle is None:
            return False
        try:
            if self.read_ref(ref) != old:
                return False
            self._commit_ref(ref, handle, new)
            handle = None
            return True
        finally:
            self._release_ref(ref, handle)

    def move_scope(
        self,
        digest: str,
        old: str | None,
        new: str,
        action: str,
        parent: "Any" = ...,
        check: "Any" = None,
    ) -> bool | None:
        # The history lock is held from before the scope's compare-and-swap until what
        # it names is safe: so the history's order is the scope's, and a reader that
        # finds objects missing can tell a writer still settling (its lock is live) from
        # one killed mid-write (`GitMemory._repair` takes the lock first). There is no
        # wait for a running gc before the move: under a gc loop writers would starve.
        pending, self._pending = self._pending, {}
        history = history_ref(digest)
        handle = self._lock_ref(history)
        if handle is None:
            self._pending = pending
            return None
        try:
            if check is not None and not check():
                return False
            head = self.read_ref(history)
            catch_up = None
            if parent is ...:
                try:
                    catch_up = unrecorded_state(self, digest, head, old, new)
                except (StoreError, MissingObject):
                    pass
            if catch_up is not None:
                # Recorded in a move of its own, then the lock is taken again (a writer
                # that gets in between moves the scope: our swap then fails, as any race).
                written = self.take_pending()
                locked, handle = handle, None  # _commit_ref closes it, whatever happens
                self._commit_ref(history, locked, catch_up)
                append_reflog(self, history, head, catch_up, "unrecorded")
                self._settle(written)
                handle = self._lock_ref(history)
                if handle is None:
                    self._pending = pending
                    return None
                head = self.read_ref(history)
            try:
                if parent is ...:
                    commit = _next_history(self, digest, head, old, new, action)
                else:
                    commit = history_commit(self, new, parent, action)
            except (StoreError, MissingObject):
                commit = None
            if not self._swap(SCOPE_REF_PREFIX + digest, old, new):
                self._pending = {}
                return False
            pending.update(self._pending)
            self._pending = {}
            self._settle(pending, self.ref_lock_path(history))
            if commit is not None:
                locked, handle = handle, None  # _commit_ref closes it, whatever happens
                self._commit_ref(history, locked, commit)
                append_reflog(self, history, head, commit, action)
        finally:
            self._release_ref(history, handle)
        return True

    def _lock_ref(self, ref: str) -> int | None:
        """The open lock file of REF (git's `<ref>.lock`), or None if another holds it."""
        lock = self.ref_lock_path(ref)
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
            except OSError as error:
                raise storage_failure(
                    error, StoreError("STORAGE_ERROR", "Git could not update the memory ref.")
                ) from error
            else:
                _hold(handle)
                return handle
        return None

    def _commit_ref(self, ref: str, handle: int, value: str) -> None:
        """Write VALUE into REF's lock and rename it into place, as git does; fsync only
        when the repository's `core.fsync` asks it for refs."""
        lock = self.ref_lock_path(ref)
        try:
            _write_all(handle, value.encode("ascii") + b"\n")
            if self.fsync_refs:
                os.fsync(handle)
            mine = os.fstat(handle)
        except OSError as error:
            raise storage_failure(
                error, StoreError("STORAGE_ERROR", "Git could not update the memory ref.")
            ) from error
        finally:
            os.close(handle)
        try:
            now = os.stat(lock)
            if (now.st_ino, now.st_dev) != (mine.st_ino, mine.st_dev):
                raise StoreError("STORAGE_ERROR", "Another writer broke the memory ref lock.")
            os.rename(lock, self.ref_path(ref))
        except OSError as error:
            raise storage_failure(
                error, StoreError("STORAGE_ERROR", "Git could not update the memory ref.")
            ) from error

    def _release_ref(self, ref: str, handle: int | None) -> None:
        if handle is None:
            return
        mine = os.fstat(handle)
        os.close(handle)
        lock = self.ref_lock_path(ref)
        try:
            now = os.stat(lock)
            if (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev):
                os.unlink(lock)
        except OSError:
            pass


STALE_LOCK_SECONDS = 5.0  # no live writer holds a ref or object lock this long
ORPHAN_LOCK_SECONDS = 1.0  # an empty lock of ours this old whose owner died is stale


class LockWatch:
    """Tells contention from a stale lock, and clears a stale one.

    A lock held by a live writer (git or git-obversa) exists for microseconds: it is created,
    written and renamed into place in one go. One whose file has not changed for
    STALE_LOCK_SECONDS was left by a killed process; it is removed, with one line saying
    so, and the caller retries at once. A younger lock is waited for.
    """

    def __init__(self, lock: str) -> None:
        self.lock = lock

    def present(self) -> bool:
        """Whether the lock exists now (False after clearing a stale one)."""
        try:
            stat = os.stat(self.lock)
        except FileNotFoundError:
            return False
        age = time.time() - stat.st_mtime
        if age < STALE_LOCK_SECONDS and not (
            age >= ORPHAN_LOCK_SECONDS and stat.st_size == 0 and _orphaned(self.lock)
        ):
            return True
        clear_stale_lock(self.lock, stat)
        return False


def _hold(handle: int) -> None:
    """Mark a ref lock of ours as owned by this process: the kernel drops the mark when
    the process dies, so a killed writer's lock is known at once, not after
    STALE_LOCK_SECONDS (a file system without flock keeps to the age rule)."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pass


def _orphaned(lock: str) -> bool:
    """Whether no live process marks LOCK as its own (see `_hold`). Asked only of an
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


def clear_stale_lock(lock: str, seen: os.stat_result) -> None:
    """Remove LOCK if it is still the file SEEN (not a new lock taken meanwhile)."""
    try:
        now = os.stat(lock)
        if (now.st_ino, now.st_mtime_ns) != (seen.st_ino, seen.st_mtime_ns):
            return
        os.unlink(lock)
    except FileNotFoundError:
        return
    except OSError as error:
        raise StoreError("STORAGE_ERROR", stale_lock_message(lock)) from error
    age = int(time.time() - seen.st_mtime)
    notify(f"removed a stale lock left by a killed writer ({age} s old): {lock}")


FSYNC_GROUPS = {  # core.fsync words that name each component we write (git's aggregates)
    "loose-object": {"loose-object", "objects", "committed", "added", "all"},
    "reference": {"reference", "committed", "added", "all"},
}
TRUE_WORDS = {"true", "yes", "on", "1"}


def _fsyncs(config: "Mapping[str, str | None]", component: str) -> bool:
    """Whether git, with this repository's config, flushes COMPONENT to disk when it
    writes one ("loose-object" or "reference").

    As git's `parse_fsync_components`: `none` clears the default, a word adds its
    components, `-word` removes them from the default, and what is named positively
    wins; git's default names neither loose objects nor refs. `core.fsyncObjectFiles`
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
    return any(word in FSYNC_GROUPS[component] for word in words)


def deflate(data: bytes) -> bytes:
    """DATA compressed for a loose object at git's default level (1), with a window no
    larger than DATA needs and a smaller hash table: the stream git reads (it inflates any
    window up to 32 KB), without setting up zlib's largest state, about 256 KB, for an
    object of a few hundred bytes (that set-up costs more than compressing it)."""
    window = max(9, min(15, (len(data) - 1).bit_length()))
    compressor = zlib.compressobj(1, zlib.DEFLATED, window, 4)
    return compressor.compress(data) + compressor.flush()


def _write_all(handle: int, data: bytes) -> None:
    """os.write until everything is written (a write near a limit can be short)."""
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]


def storage_failure(error: OSError, otherwise: StoreError) -> StoreError:
    """A full disk or quota says so in one line; other OS errors become OTHERWISE."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StoreError(
            "STORAGE_ERROR",
            "No space left on the disk holding the repository (or a quota or file-size "
            "limit reached); free some and retry.",
        )
    return otherwise


def write_failure(kind: str, error: OSError | None = None) -> StoreError:
    """The error for an object of KIND that could not be stored (SPEC §3.3 wording)."""
    what = "tree" if kind == "tree" else "blob"
    why = f" ({error.strerror})" if error is not None and error.strerror else ""
    return StoreError("STORAGE_ERROR", f"Git could not write a memory {what}.{why}")


def stale_lock_message(lock: str) -> str:
    return (
        f"Memory storage is locked by {lock}; if no git or git-obversa process is still "
        "running, remove that file and retry."
    )


def pause(scale: float = 0.001) -> None:
    """A short random sleep, so that retrying writers do not move in lockstep."""
    import random  # only writers that lost a race pay for it

    time.sleep(random.uniform(0.1 * scale, scale))


class PlumbingStore(_BaseStore):
    """Objects and refs through isolated `git` processes (for repositories FileStore
    cannot read as git does)."""

    kind = "plumbing"

    def _git(self, args: "Sequence[str]", input: bytes | None = None, cap: int = OUTPUT_CAP):
        return run_git(["--git-dir", self.common_dir, *args], self.common_dir, input=input, cap=cap)

    def read_ref(self, ref: str) -> str | None:
        symbolic = self._git(["symbolic-ref", "--quiet", "--no-recurse", ref], cap=8192)
        if symbolic.returncode == 0:
            return "ref: " + symbolic.stdout.decode("utf-8", "replace").strip()
        if symbolic.returncode != 1:
            raise StoreError("STORAGE_ERROR", "Git could not inspect the memory ref.")
        value = self._git(["rev-parse", "--verify", "--quiet", ref], cap=8192)
        if value.returncode == 1:
            return None
        if value.returncode != 0:
            raise StoreError("STORAGE_ERROR", "Git could not read the memory ref.")
        return value.stdout.decode("utf-8", "replace").strip()

    def list_refs(self, prefix: str) -> dict[str, str]:
        # %(objectname) would resolve a symbolic ref to its target; report it as the
        # in-process store does ("ref: <target>"), so validation refuses it on both stores alike.
        listed = self._git(["for-each-ref", "--format=%(refname) %(objectname) %(symref)", prefix])
        if listed.returncode != 0:
            raise StoreError("STORAGE_ERROR", "Git could not list the memory refs.")
        found = {}
        for line in listed.stdout.decode("utf-8", "replace").splitlines():
            name, value, target = (line.split(" ", 2) + ["", ""])[:3]
            found[name] = f"ref: {target}" if target else value
        return found

    def read_object(self, oid: str, max_bytes: int = OUTPUT_CAP) -> tuple[str, bytes]:
        # One request to `cat-file --batch`: header "<oid> <type> <size>\n", content, "\n".
        # The slack lets a slightly oversized object through to the caller's own check.
        cap = max_bytes + OUTPUT_CAP
        completed = self._git(["cat-file", "--batch"], input=oid.encode("ascii") + b"\n", cap=cap)
        out = completed.stdout
        header, _, rest = out.partition(b"\n")
        fields = header.split(b" ")
        if completed.returncode != 0 or len(fields) != 3:
            raise MissingObject(oid)
        size = int(fields[2])
        if len(rest) != size + 1:
            raise StoreError("UNSAFE_STORAGE", "Memory blob size changed while reading.")
        return fields[1].decode("ascii"), rest[:size]

    def has_object(self, oid: str) -> bool:
        return self._git(["cat-file", "-e", oid], cap=8192).returncode == 0

    def _write(self, oid: str, kind: str, data: bytes) -> None:
        for attempt in range(3):  # `git gc` repacking can fail a write for a moment
            written = self._git(["hash-object", "-w", "--no-filters", "-t", kind, "--stdin"], data)
            if written.returncode == 0 and written.stdout.decode("ascii").strip() == oid:
                return
            time.sleep(0.01 * (attempt + 1))
        raise write_failure(kind)

    def _swap(self, ref: str, old: str | None, new: str) -> bool:
        expected = old if old is not None else "0" * self.hex_length
        return self._git(["update-ref", "--no-deref", ref, new, expected]).returncode == 0


def history_ref(digest: str) -> str:
    return HISTORY_REF_PREFIX + digest


def scope_ref_digest(ref: str) -> str | None:
    """The digest of a scope ref (`refs/obversa/memory/v1/<64 hex>`), else None."""
    digest = ref[len(SCOPE_REF_PREFIX) :]
    if ref.startswith(SCOPE_REF_PREFIX) and len(digest) == 64 and not digest.strip(HEX):
        return digest
    return None


HEX = "0123456789abcdef"
HISTORY_COMMIT_CAP = 65536  # our history commits are a few hundred bytes


def history_commit(store: "Any", tree: str | None, parent: str | None, action: str) -> str:
    """Write the commit recording one state of a scope: TREE (None: the scope was absent)."""
    headers = [b"tree " + (tree or store.write_object("tree", b"")).encode("ascii")]
    if parent is not None:
        headers.append(b"parent " + parent.encode("ascii"))
    stamp = b"%s %d +0000" % (HISTORY_IDENTITY, int(time.time()))
    headers += [b"author " + stamp, b"committer " + stamp]
    # One line, whatever the caller passed (a remote's name, a path): no control characters.
    line = printable(action)[:500] or "change"
    message = line.encode("utf-8", "surrogatepass") + b"\n"
    if tree is None:
        message += b"\n" + ABSENT_TRAILER.encode("ascii") + b"\n"
    commit = store.write_object("commit", b"\n".join(headers) + b"\n\n" + message)
    store.history_states[commit] = (tree, parent)
    return commit


def parse_history_commit(raw: bytes, hex_length: int) -> tuple[str | None, str | None, int, str]:
    """(tree or None when absent, parent, time, action line) of a history commit;
    ValueError when it is not one of ours in shape."""
    head, _, message = raw.partition(b"\n\n")
    fields: dict[bytes, bytes] = {}
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key in fields and key != b"parent":
            raise ValueError("repeated header")
        fields.setdefault(key, value)
    tree = fields.get(b"tree", b"").decode("ascii", "replace")
    parent = fields.get(b"parent")
    if len(tree) != hex_length or tree.strip(HEX):
        raise ValueError("tree")
    parent_id = parent.decode("ascii", "replace") if parent is not None else None
    if parent_id is not None and (len(parent_id) != hex_length or parent_id.strip(HEX)):
        raise ValueError("parent")
    stamp = fields.get(b"committer", b"").rsplit(b" ", 2)
    when = int(stamp[1]) if len(stamp) == 3 and stamp[1].isdigit() else 0
    lines = message.decode("utf-8", "replace").split("\n")
    absent = ABSENT_TRAILER in lines[1:]
    return (None if absent else tree), parent_id, when, lines[0]


def history_state(store: "Any", commit: str) -> tuple[str | None, str | None]:
    """(scope tree or None, parent) recorded by a history commit (cached per store)."""
    known = store.history_states.get(commit)
    if known is None:
        kind, raw = store.read_object_retrying(commit, HISTORY_COMMIT_CAP)
        if kind != "commit" or len(raw) > HISTORY_COMMIT_CAP:
            raise StoreError("UNSAFE_STORAGE", "Memory history holds an object that is not ours.")
        try:
            tree, parent, _, _ = parse_history_commit(raw, store.hex_length)
        except ValueError as error:
            raise StoreError(
                "UNSAFE_STORAGE", "Memory history holds a malformed commit."
            ) from error
        known = store.history_states[commit] = (tree, parent)
    return known


def _history_position(
    store: "Any", digest: str, head: str | None, before: str | None, after: str | None
) -> tuple[str | None, bool] | None:
    """Where AFTER (the scope moved from BEFORE) goes in the history headed by HEAD:
    (the commit it follows, whether BEFORE must be recorded first), or None when a
    concurrent writer has recorded AFTER already. BEFORE is missing from the history
    when the scope held it unrecorded: a write by the original implementation, or one
    whose writer was killed between moving the scope and recording it."""
    if head is not None:
        try:
            state, _ = history_state(store, head)
        except (StoreError, MissingObject):
            notify(f"the history of scope {digest[:12]} cannot be read; it starts again here")
            head = None
    if head is None:
        return None, before is not None
    if state == after:
        return None
    if state == before:
        return head, False
    recent, commit = [], head
    while commit is not None and len(recent) < RECENT_STATES:
        tree, commit = history_state(store, commit)
        recent.append(tree)
    return None if after in recent else (head, True)


def _next_history(
    store: "Any", digest: str, head: str | None, before: str | None, after: str | None, action: str
) -> str | None:
    """The new history head recording AFTER (the scope moved from BEFORE), or None when
    a concurrent writer has recorded it already. An unrecorded BEFORE is recorded first
    as `unrecorded`, so nothing the ref held when we read it is lost."""
    position = _history_position(store, digest, head, before, after)
    if position is None:
        return None
    parent, unrecorded = position
    if unrecorded:
        parent = history_commit(store, before, parent, "unrecorded")
    return history_commit(store, after, parent, action)


def unrecorded_state(
    store: "Any", digest: str, head: str | None, before: str | None, after: str | None
) -> str | None:
    """The commit recording BEFORE as `unrecorded` on top of HEAD, when the history lacks
    it; None otherwise. A writer records it *before* moving the scope: until then the
    scope ref keeps BEFORE's tree alive, afterwards only the history does, and a `git gc
    --prune=now` in between would leave a history commit whose tree is gone."""
    position = _history_position(store, digest, head, before, after)
    if position is None or not position[1]:
        return None
    return history_commit(store, before, position[0], "unrecorded")


def record_history(
    store: "Any", digest: str, before: str | None, after: str | None, action: str
) -> str | None:
    """Append AFTER to the history of scope DIGEST, whose ref has just moved from BEFORE
    (None: absent) to AFTER, by the compare-and-swap of `store.update_ref`; the history's
    head afterwards."""
    ref = history_ref(digest)
    for _ in range(MAX_HISTORY_ATTEMPTS):
        head = store.read_ref(ref)
        new = _next_history(store, digest, head, before, after, action)
        if new is None:
            return head
        if store.update_ref(ref, head, new):
            if store.kind == "in-process":
                append_reflog(store, ref, head, new, action)
            return new
        pause()
    raise StoreError("STORAGE_ERROR", "Git could not update the memory history.")


# git's words for a ref lock it found taken (a pattern for `re`, which only a failed
# transaction imports: a one-shot command does not pay for it).
LOCK_FAILURE = r"Unable to create '([^']+\.lock)': File exists"


def printable(text: str) -> str:
    """TEXT with every character that is not printable (a newline, a control) as "?"."""
    return text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)


def append_reflog(store: "Any", ref: str, old: str | None, new: str, message: str) -> None:
    """Append one line to REF's reflog, as git would. History refs keep one (they point
    at commits, so git reads, expires and prunes by it as by any branch's): should a
    history ref ever name a commit a concurrent prune removed, the reflog still holds
    its previous value, and `git gc` keeps everything it names."""
    line = printable(message)[:500]
    entry = b"%s %s %s %d +0000\t%s\n" % (
        (old or "0" * store.hex_length).encode("ascii"),
        new.encode("ascii"),
        HISTORY_IDENTITY,
        int(time.time()),
        line.encode("utf-8", "surrogatepass"),
    )
    path = reflog_path(store, ref)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    try:
        try:
            handle = os.open(path, flags, 0o666)
        except FileNotFoundError:  # the first reflog of its directory
            os.makedirs(os.path.dirname(path), exist_ok=True)
            handle = os.open(path, flags, 0o666)
        try:
            _write_all(handle, entry)
            if store.fsync_refs:  # git flushes a reflog as it flushes the ref
                os.fsync(handle)
        finally:
            os.close(handle)
    except OSError as error:  # the ref has moved; only its safety net is missing a line
        notify(f"could not extend the reflog of {ref}: {error.strerror}")


def reflog_path(store: "Any", ref: str) -> str:
    return os.path.join(store.common_dir, "logs", *ref.split("/"))


def reflog_values(store: "Any", ref: str) -> list[str]:
    """The values REF's reflog says it held, newest first (old values included)."""
    try:
        with open(reflog_path(store, ref), "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 65536))
            tail = handle.read()
    except OSError:
        return []
    values: list[str] = []
    for line in reversed(tail.split(b"\n")):
        fields = line.split(b" ", 2)
        for value in reversed(fields[:2]):
            text = value.decode("ascii", "replace")
            if len(text) == store.hex_length and not text.strip(HEX) and text.strip("0"):
                if text not in values:
                    values.append(text)
    return values


def update_refs(
    repository: str,
    updates: "Mapping[str, tuple[str | None, str | None]]",
    zero: str,
    *,
    action: str | None = None,
) -> bool:
    """Apply REF -> (expected, new) in one transaction; False if any ref had moved.

    Expected None means "must not exist"; `...` (Ellipsis) means "whatever it holds".
    With ACTION (e.g. "merge origin", "drop"), every scope ref among UPDATES also gets
    its history commit, and its history ref moves in the same transaction. A stale ref
    lock (a killed writer's) is cleared and the transaction tried again.
    """
    from functools import partial

    deadline = time.monotonic() + 2 * STALE_LOCK_SECONDS + GC_WAIT_SECONDS
    store = open_store(repository) if action is not None else None
    try:
        while True:
            lines = dict(updates)
            pending: dict[str, tuple[str, bytes]] = {}
            if store is not None:
                for ref, (expected, new) in updates.items():
                    digest = scope_ref_digest(ref)
                    if digest is None:
                        continue
                    before = store.read_ref(ref) if expected is ... else expected
                    head = store.read_ref(history_ref(digest))
                    commit = _next_history(store, digest, head, before, new, action or "")
                    if commit is not None:
                        lines[history_ref(digest)] = (head, commit)
                        # git appends to a reflog that exists (and only to those).
                        path = reflog_path(store, history_ref(digest))
                        try:
                            os.makedirs(os.path.dirname(path), exist_ok=True)
                            open(path, "ab").close()
                        except OSError:
                            pass  # reftable, or a read-only logs/: git logs as it can
                pending = store.take_pending()
            completed = past_stale_locks(
                partial(_transaction, repository, lines, zero, action), deadline
            )
            if completed.returncode == 0:
                if store is not None:
                    store._settle(pending)
                return True
            # Retry only a race on the history refs themselves; a moved ref is the caller's.
            if store is None or time.monotonic() > deadline:
                return False
            for ref, (expected, _) in updates.items():
                if expected is not ... and store.read_ref(ref) != expected:
                    return False
            pause()
    finally:
        if store is not None:
            store.close()


def past_stale_locks(
    run: "Callable[[], subprocess.CompletedProcess]", deadline: float
) -> "subprocess.CompletedProcess":
    """RUN (a git command that updates refs) again while it fails on a ref lock that
    exists, until DEADLINE (`time.monotonic`): a live writer's lock is gone in a moment,
    a killed one's is cleared once stale (`LockWatch`), which git itself never does."""
    import re  # here: a command that meets no lock needs no `re`

    while True:
        completed = run()
        if completed.returncode == 0:
            return completed
        stale = re.search(LOCK_FAILURE, completed.stderr)
        if stale is None or time.monotonic() >= deadline:
            return completed
        LockWatch(stale.group(1)).present()  # clears it when stale
        time.sleep(0.005)


def _transaction(
    repository: str,
    updates: "Mapping[str, tuple[Any, str | None]]",
    zero: str,
    message: str | None = None,
) -> "subprocess.CompletedProcess":
    lines = []
    for ref, (expected, new) in updates.items():
        old = "" if expected is ... else f" {expected or zero}"
        lines.append(f"delete {ref}{old}" if new is None else f"update {ref} {new}{old}")
    # --no-deref: a scope ref made symbolic is replaced, never followed to what it names.
    reflog = ["-m", message] if message else []
    return git.run(
        ["update-ref", *reflog, "--no-deref", "--stdin"],
        repository,
        isolated=True,
        check=False,
        input="\n".join(lines) + "\n",
    )
