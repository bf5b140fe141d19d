"""A small object and ref layer for memory storage: dulwich in-process, git plumbing as fallback.

`open_store(path)` asks git once where the repository's common directory is and which
object format it uses, then reads and writes objects and refs in-process with dulwich.
A repository dulwich cannot open safely (an extension it does not know, reftable refs)
gets `PlumbingStore`, which spawns isolated `git` processes instead. Both have the same
methods; callers never see which one they hold, except through `kind`.

What dulwich does not do for us, and this module adds:
- object ids in the repository's hash (`ShaFile.id` is always SHA-1),
- ref creation with `add_if_new` (a CAS against forty zeros never matches on sha256),
- tolerance for concurrent writers and maintenance: `FileLocked` on a ref or a loose
  object, `FileNotFoundError` while `git pack-refs`/`gc` removes empty directories, an
  object moving into a pack while it is read,
- `git gc --prune=now` deleting objects written just before the ref that names them:
  after a ref update the objects written for it are checked and written again if gone.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Any

from git_obversa import git
from git_obversa.memory.port import MemoryFailure

OBJECT_TYPES = ("commit", "tree", "blob", "tag")  # dulwich type numbers 1..4
OUTPUT_CAP = 1048576  # bytes of stdout+stderr any git process may print (SPEC §3.4)
GIT_TIMEOUT = 600.0
GC_WAIT_SECONDS = 120.0  # longest wait for a running `git gc` before checking objects
GC_PID_EXPIRY = 12 * 3600.0  # git ignores a gc.pid older than this (builtin/gc.c)


class StoreError(MemoryFailure):
    """Storage failed: code UNSAFE_STORAGE or STORAGE_ERROR, a message, no path or details."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


class MissingObject(StoreError):
    """An object is not in the repository (possibly only for a moment, during gc)."""

    def __init__(self, oid: str, message: str = "Memory blob cannot be read.") -> None:
        super().__init__("UNSAFE_STORAGE", message)
        self.oid = oid


def object_id(kind: str, data: bytes, object_format: str) -> str:
    """The id git gives an object of KIND with DATA in a repository of OBJECT_FORMAT."""
    digest = hashlib.sha256() if object_format == "sha256" else hashlib.sha1()
    digest.update(b"%s %d\0" % (kind.encode("ascii"), len(data)))
    digest.update(data)
    return digest.hexdigest()


def run_git(
    args: Sequence[str], cwd: str, *, input: bytes | None = None, cap: int = OUTPUT_CAP
) -> subprocess.CompletedProcess:
    """Run isolated git (no GIT_* from the caller, no hooks, no lazy fetch) with an output cap."""
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


def locate(repository_path: str) -> tuple[str, str]:
    """(absolute common git dir, object format) of the repository containing REPOSITORY_PATH."""
    completed = run_git(
        ["rev-parse", "--path-format=absolute", "--git-common-dir",
         "--show-object-format=storage"],
        repository_path,
    )  # fmt: skip
    if completed.returncode != 0:
        raise StoreError(
            "STORAGE_ERROR", f"repositoryPath must identify a Git repository: {repository_path}"
        )
    lines = completed.stdout.decode("utf-8", "replace").splitlines()
    if len(lines) != 2:
        raise StoreError("STORAGE_ERROR", "Git did not report its object format")
    common_dir, object_format = lines
    if object_format not in ("sha1", "sha256"):
        raise StoreError("STORAGE_ERROR", f"unsupported Git object format: {object_format}")
    return common_dir, object_format


def open_store(repository_path: str) -> DulwichStore | PlumbingStore:
    """The store of the repository at REPOSITORY_PATH (a worktree, a subdirectory, a bare dir).

    A linked worktree shares its repository's store: the common dir is opened, never the
    per-worktree git dir (dulwich cannot open `.git/worktrees/<name>`).
    """
    common_dir, object_format = locate(repository_path)
    try:
        return DulwichStore(common_dir, object_format)
    except _DulwichUnsuitable:
        return PlumbingStore(common_dir, object_format)


class _DulwichUnsuitable(Exception):
    pass


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
        self.object_format = object_format
        self.hex_length = 64 if object_format == "sha256" else 40
        # Objects written since the last ref update: re-checked after it (gc may prune them).
        self._pending: dict[str, tuple[str, bytes]] = {}

    def ref_lock_path(self, ref: str) -> str:
        """Where git and dulwich take the lock for REF (files backend)."""
        return os.path.join(self.common_dir, *ref.split("/")) + ".lock"

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

    def _settle(self, pending: dict[str, tuple[str, bytes]]) -> None:
        if not pending:
            return
        self._restore(pending)
        if _gc_running(self.common_dir):
            deadline = time.monotonic() + GC_WAIT_SECONDS
            while _gc_running(self.common_dir) and time.monotonic() < deadline:
                time.sleep(0.01)
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

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DulwichStore(_BaseStore):
    """In-process objects and refs (the fast path)."""

    kind = "dulwich"

    def __init__(self, common_dir: str, object_format: str) -> None:
        super().__init__(common_dir, object_format)
        try:
            from dulwich.file import FileLocked
            from dulwich.objects import ShaFile
            from dulwich.refs import DiskRefsContainer
            from dulwich.repo import Repo
        except ImportError as error:
            raise _DulwichUnsuitable() from error
        try:
            repo = Repo(common_dir)
        except Exception as error:  # UnsupportedExtension, UnsupportedVersion, ...
            raise _DulwichUnsuitable() from error
        # Reftable: dulwich's CAS is not atomic there; git's is.
        if not isinstance(repo.refs, DiskRefsContainer) or (
            repo.object_format.name != object_format
        ):
            repo.close()
            raise _DulwichUnsuitable()
        self._repo = repo
        self._objects = repo.object_store
        self._refs = repo.refs
        self._file_locked = FileLocked
        self._sha_file = ShaFile

    def close(self) -> None:
        self._repo.close()

    def read_ref(self, ref: str) -> str | None:
        value = self._refs.read_ref(ref.encode("utf-8"))
        if value is None:
            return None
        return value.decode("utf-8", "replace")

    def list_refs(self, prefix: str) -> dict[str, str]:
        base = prefix.encode("utf-8")
        found = {}
        for name in self._refs.keys(base=base):
            value = self._refs.read_ref(base + name)
            if value is not None:
                found[(base + name).decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        return found

    def read_object(self, oid: str, max_bytes: int = OUTPUT_CAP) -> tuple[str, bytes]:
        try:
            type_num, data = self._objects.get_raw(oid.encode("ascii"))
        except KeyError as error:
            raise MissingObject(oid) from error
        except FileNotFoundError as error:  # a loose file pruned between stat and open
            raise MissingObject(oid) from error
        return OBJECT_TYPES[type_num - 1], data

    def has_object(self, oid: str) -> bool:
        key = oid.encode("ascii")
        return self._objects.contains_loose(key) or self._objects.contains_packed(key)

    def _surely_present(self, oid: str) -> bool:
        # Only a loose copy counts: dulwich's pack cache can still list a pack that
        # `git repack -a -d` has just deleted, with our object in it.
        return self._objects.contains_loose(oid.encode("ascii"))

    def _write(self, oid: str, kind: str, data: bytes) -> None:
        obj = self._sha_file.from_raw_string(
            OBJECT_TYPES.index(kind) + 1, data, object_format=self._repo.object_format
        )
        key = oid.encode("ascii")
        watch = LockWatch(os.path.join(self.common_dir, "objects", oid[:2], oid[2:] + ".lock"))
        for _ in range(100000):
            try:
                self._objects.add_object(obj)
                return
            except FileNotFoundError:  # objects/xx/ removed by a concurrent prune
                pass
            except self._file_locked:  # another process is writing the same object
                if self._objects.contains_loose(key):
                    return
                watch.present()
            pause()
        raise write_failure(kind)

    def _swap(self, ref: str, old: str | None, new: str) -> bool:
        name = ref.encode("utf-8")
        try:
            if old is None:
                return self._refs.add_if_new(name, new.encode("ascii"))
            return self._refs.set_if_equals(name, old.encode("ascii"), new.encode("ascii"))
        except (self._file_locked, FileNotFoundError):
            return False


LOCK_WAIT_SECONDS = 5.0  # how long one lock file may persist before we call it stale


class LockWatch:
    """Tells contention from a stale lock.

    A lock held by a live writer comes and goes within milliseconds. One that stays (the
    same file, unchanged) for LOCK_WAIT_SECONDS was left by a killed process: we report
    it rather than delete it, because only the user can know no writer is still running.
    """

    def __init__(self, lock: str) -> None:
        self.lock = lock
        self._identity: tuple[int, int] | None = None
        self._since = time.monotonic()

    def present(self) -> bool:
        """Whether the lock exists; raises STORAGE_ERROR once it has stayed too long."""
        try:
            stat = os.stat(self.lock)
            identity: tuple[int, int] | None = (stat.st_ino, stat.st_mtime_ns)
        except FileNotFoundError:
            identity = None
        now = time.monotonic()
        if identity != self._identity:
            self._identity, self._since = identity, now
        elif identity is not None and now - self._since > LOCK_WAIT_SECONDS:
            raise StoreError("STORAGE_ERROR", stale_lock_message(self.lock))
        return identity is not None


def write_failure(kind: str) -> StoreError:
    """The error for an object of KIND that could not be stored (SPEC §3.3 wording)."""
    what = "tree" if kind == "tree" else "blob"
    return StoreError("STORAGE_ERROR", f"Git could not write a memory {what}.")


def stale_lock_message(lock: str) -> str:
    return (
        f"Memory storage is locked by {lock}; if no git or git-obversa process is still "
        "running, remove that file and retry."
    )


def pause(scale: float = 0.001) -> None:
    """A short random sleep, so that retrying writers do not move in lockstep."""
    time.sleep(random.uniform(0.1 * scale, scale))


class PlumbingStore(_BaseStore):
    """Objects and refs through isolated `git` processes (repositories dulwich cannot open)."""

    kind = "plumbing"

    def _git(self, args: Sequence[str], input: bytes | None = None, cap: int = OUTPUT_CAP):
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
        # %(objectname) would resolve a symbolic ref to its target; report it as dulwich
        # does ("ref: <target>"), so validation refuses it on both stores alike.
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


def update_refs(
    repository: str, updates: Mapping[str, tuple[str | None, str | None]], zero: str
) -> bool:
    """Apply REF -> (expected, new) in one transaction; False if any ref had moved.

    Expected None means "must not exist"; `...` (Ellipsis) means "whatever it holds".
    """
    lines = []
    for ref, (expected, new) in updates.items():
        old = "" if expected is ... else f" {expected or zero}"
        lines.append(f"delete {ref}{old}" if new is None else f"update {ref} {new}{old}")
    # --no-deref: a scope ref made symbolic is replaced, never followed to what it names.
    completed = git.run(
        ["update-ref", "--no-deref", "--stdin"],
        repository,
        isolated=True,
        check=False,
        input="\n".join(lines) + "\n",
    )
    return completed.returncode == 0
