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
  after a move of one ref the objects written for it are checked and written again if
  gone (once a running gc has finished; a writer killed before that is repaired from
  the history by the next reader); a transaction of many refs (`update_refs`, sync's)
  writes them into a kept pack first, so that none can be taken whenever it is killed,
- loose objects written as git writes them (a temporary file linked into place), so a
  writer killed mid-write leaves no lock behind; a ref lock left by a killed process is
  recognised as stale and cleared, with one line on stderr,
- the durability the repository's config asks of git (`core.fsync`, `core.fsyncMethod`,
  `core.fsyncObjectFiles`), no more and no less (`repo/locks.py`),
- history: every scope-ref move through this layer also appends a commit to the scope's
  history ref (`history_commits.py`, `update_refs(..., action=...)`), see docs/memory.md.

Git's files themselves are read and written by `repo/` (objects, refs, locks, reflogs);
this module decides what to write and turns what goes wrong into `StoreError`.
"""

import os
import time

from git_obversa.lean.builtin import builtin_sha1, builtin_sha256
from git_obversa.memory.ref_names import HEX, SCOPE_REF_PREFIX, history_ref, scope_ref_digest
from git_obversa.memory.store_errors import (
    MissingObject,
    StoreError,
    notify,
    stale_lock_message,
    storage_failure,
    write_failure,
)
from git_obversa.memory.store_git import KNOWN_EXTENSIONS, OUTPUT_CAP, locate, run_git
from git_obversa.repo import git, locks, objects, refs

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

GC_WAIT_SECONDS = 120.0  # longest wait for a running `git gc` before checking objects


# Objects are hashed with hashlib's digests unless the process chose CPython's own
# (`use_builtin_digests`); each is looked up when first needed, by object format.
_use_builtin = False
_hashers: "dict[str, Callable[..., Any]]" = {}


def use_builtin_digests() -> None:
    """Hash objects with CPython's own SHA-1 and SHA-256 from now on (`lean/builtin.py`):
    for a process that writes once and exits."""
    global _use_builtin
    _use_builtin = True
    _hashers.clear()


def object_id(kind: str, data: bytes, object_format: str) -> str:
    """The id git gives an object of KIND with DATA in a repository of OBJECT_FORMAT."""
    hasher = _hashers.get(object_format)
    if hasher is None:
        hasher = _hashers[object_format] = _hasher(object_format)
    digest = hasher()
    digest.update(b"%s %d\0" % (kind.encode("ascii"), len(data)))
    digest.update(data)
    return digest.hexdigest()


def _hasher(object_format: str) -> "Callable[..., Any]":
    if _use_builtin:
        return builtin_sha256() if object_format == "sha256" else builtin_sha1()
    import hashlib

    return hashlib.sha256 if object_format == "sha256" else hashlib.sha1


def open_store(repository_path: str) -> "FileStore | PlumbingStore":
    """The store of the repository at REPOSITORY_PATH (a worktree, a subdirectory, a bare dir).

    A linked worktree shares its repository's store: the common dir is opened, never the
    per-worktree git dir.
    """
    common_dir, object_format, config = locate(repository_path)
    if FileStore.suits(common_dir, config):
        return FileStore(common_dir, object_format, config)
    return PlumbingStore(common_dir, object_format)


class _BaseStore:
    kind = "base"

    def __init__(self, common_dir: str, object_format: str) -> None:
        self.common_dir = common_dir
        self._ref_files = refs.RefFiles(common_dir)
        self.object_format = object_format
        self.hex_length = 64 if object_format == "sha256" else 40
        self.fsync_packs = True  # git's default (`locks.fsyncs`); FileStore reads the config
        # Objects written since the last ref update: re-checked after it (gc may prune them).
        self._pending: dict[str, tuple[str, bytes]] = {}
        # History commits already read or written: id -> (scope tree or None, parent).
        self.history_states: dict[str, tuple[str | None, str | None]] = {}

    def ref_lock_path(self, ref: str) -> str:
        """Where git takes the lock for REF (files backend)."""
        return self._ref_files.lock_path(ref)

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
        # The history's writer loads with the first move: a command that reads never moves.
        from git_obversa.memory.history_commits import (
            history_commit,
            record_history,
            unrecorded_state,
        )

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
        does not change for locks.STALE_LOCK_SECONDS is taken for a dead writer's)."""
        deadline = time.monotonic() + GC_WAIT_SECONDS
        touched = time.monotonic()
        while locks.gc_running(self.common_dir) and time.monotonic() < deadline:
            time.sleep(0.001)  # a loop of gc runs leaves gaps of a few milliseconds
            if holding is not None and time.monotonic() - touched > locks.STALE_LOCK_SECONDS / 5:
                touched = time.monotonic()
                try:
                    os.utime(holding)
                except OSError:
                    pass

    def _settle(self, pending: dict[str, tuple[str, bytes]], holding: str | None = None) -> None:
        if not pending:
            return
        self._restore(pending)
        if locks.gc_running(self.common_dir):
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
        return locks.gc_running(self.common_dir)

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
    path): loose objects, packs, loose refs and packed-refs (`repo/objects.py`,
    `repo/refs.py`)."""

    kind = "in-process"

    @staticmethod
    def suits(common_dir: str, config: "Mapping[str, str | None]") -> bool:
        """Whether this store reads the repository exactly as git does: the files ref
        backend, no extension it does not know (reftable, preciousObjects, a partial
        clone's promisor), no alternate object directories."""
        if any(key.startswith("extensions.") and key not in KNOWN_EXTENSIONS for key in config):
            return False
        return not objects.has_alternates(common_dir)

    def __init__(
        self, common_dir: str, object_format: str, config: "Mapping[str, str | None]"
    ) -> None:
        super().__init__(common_dir, object_format)
        self.fsync_objects = locks.fsyncs(config, "loose-object")
        self.fsync_refs = locks.fsyncs(config, "reference")
        self.fsync_packs = locks.fsyncs(config, "pack")
        self.loose = objects.LooseObjects(common_dir)
        self._packs = objects.Packs(common_dir, self.hex_length // 2)

    def close(self) -> None:
        self._packs.close()

    def read_ref(self, ref: str) -> str | None:
        # A symbolic ref reads as "ref: <target>", which every caller refuses.
        return self._ref_files.read(ref)

    def list_refs(self, prefix: str) -> dict[str, str]:
        found = {}
        for name in sorted(self._ref_files.names(prefix)):
            value = self.read_ref(name)
            if value is not None:
                found[name] = value
        return found

    def read_object(self, oid: str, max_bytes: int = OUTPUT_CAP) -> tuple[str, bytes]:
        # Sized before it is read whole: a hostile 500 MB blob costs a header, not 1 GB.
        if len(oid) != self.hex_length or oid.strip(HEX):
            raise MissingObject(oid)
        limit = max_bytes + OUTPUT_CAP
        try:
            found = self.loose.read(oid, limit)
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
            found = self.loose.read(base.hex(), limit)
            return found if found is not None else self._read_packed(base, limit)

        return pack.read(offset, find)

    def has_object(self, oid: str) -> bool:
        if len(oid) != self.hex_length or oid.strip(HEX):
            return False
        return self.loose.exists(oid) or self._packs.locate(bytes.fromhex(oid)) is not None

    def _surely_present(self, oid: str) -> bool:
        # Only a loose copy counts: a pack mapped here may have been deleted by a
        # concurrent `git repack -a -d`, with our object in it. A stat, not a read: the
        # object was written whole by this process (a temporary file linked into place).
        return self.loose.exists(oid)

    def _write(self, oid: str, kind: str, data: bytes) -> None:
        compressed = objects.deflate(b"%s %d\0" % (kind.encode(), len(data)) + data)
        try:
            self.loose.write(oid, compressed, self.fsync_objects)
        except objects.WriteGaveUp:
            raise write_failure(kind) from None
        except OSError as error:
            raise storage_failure(error, write_failure(kind, error)) from error

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
        # Loaded here, as in `_BaseStore.move_scope`: only a command that writes needs it.
        from git_obversa.memory.history_commits import (
            append_reflog,
            history_commit,
            next_history,
            unrecorded_state,
        )

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
                    commit = next_history(self, digest, head, old, new, action)
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
        try:
            return locks.take(self.ref_lock_path(ref))
        except OSError as error:
            raise storage_failure(error, _REF_FAILURE) from error

    def _commit_ref(self, ref: str, handle: int, value: str) -> None:
        """Write VALUE into REF's lock and rename it into place, as git does; fsync only
        when the repository's `core.fsync` asks it for refs. Closes HANDLE."""
        try:
            locks.commit(
                self.ref_lock_path(ref),
                self._ref_files.path(ref),
                handle,
                value.encode("ascii") + b"\n",
                self.fsync_refs,
            )
        except locks.LockBroken:
            raise StoreError("STORAGE_ERROR", "Another writer broke the memory ref lock.") from None
        except OSError as error:
            raise storage_failure(error, _REF_FAILURE) from error

    def _release_ref(self, ref: str, handle: int | None) -> None:
        locks.release(self.ref_lock_path(ref), handle)


_REF_FAILURE = StoreError("STORAGE_ERROR", "Git could not update the memory ref.")


class LockWatch:
    """Tells contention from a stale lock, and clears a stale one (`repo/locks.py`): a
    stale lock is removed, with one line saying so, and the caller retries at once; a
    younger lock is waited for."""

    def __init__(self, lock: str) -> None:
        self.lock = lock

    def present(self) -> bool:
        """Whether the lock exists now (False after clearing a stale one)."""
        try:
            stands, cleared = locks.clear_if_stale(self.lock)
        except OSError as error:
            raise StoreError("STORAGE_ERROR", stale_lock_message(self.lock)) from error
        if cleared is not None:
            notify(f"removed a stale lock left by a killed writer ({cleared} s old): {self.lock}")
        return stands


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


def update_refs(
    repository: str,
    updates: "Mapping[str, tuple[str | None, str | None]]",
    zero: str,
    *,
    action: str | None = None,
    written: "Mapping[str, tuple[str, bytes]] | None" = None,
) -> bool:
    """Apply REF -> (expected, new) in one transaction; False if any ref had moved.

    Expected None means "must not exist"; `...` (Ellipsis) means "whatever it holds".
    With ACTION (e.g. "merge origin", "drop"), every scope ref among UPDATES also gets
    its history commit, and its history ref moves in the same transaction. A stale ref
    lock (a killed writer's) is cleared and the transaction tried again. WRITTEN: the
    objects written for these refs (`take_pending()`). They and the history commits go
    into a kept pack for the transaction (`repo/kept_pack.py`): a concurrent `git gc
    --prune=now` cannot take them before the refs name them, whenever this process is
    killed.
    """
    from functools import partial

    from git_obversa.memory.history_commits import next_history  # writing, as in move_scope
    from git_obversa.repo import kept_pack, reflog

    deadline = time.monotonic() + 2 * locks.STALE_LOCK_SECONDS
    store = open_store(repository) if action is not None or written else None
    try:
        while True:
            lines = dict(updates)
            protected = dict(written or {})
            if action is not None and store is not None:
                for ref, (expected, new) in updates.items():
                    digest = scope_ref_digest(ref)
                    if digest is None:
                        continue
                    before = store.read_ref(ref) if expected is ... else expected
                    head = store.read_ref(history_ref(digest))
                    commit = next_history(store, digest, head, before, new, action or "")
                    if commit is not None:
                        lines[history_ref(digest)] = (head, commit)
                        reflog.ensure(store.common_dir, history_ref(digest))
                protected.update(store.take_pending())
            transaction = partial(_transaction, repository, lines, zero, action)
            if store is None or not protected:
                completed = past_stale_locks(transaction, deadline)
            else:
                try:
                    kept = kept_pack.write(
                        store.common_dir, protected, store.object_format, store.fsync_packs
                    )
                except OSError as error:
                    raise write_failure("tree", error) from error
                try:
                    completed = past_stale_locks(transaction, deadline)
                except BaseException:
                    kept.release(moved=True)  # they may have moved: the pack stays
                    raise
                kept.release(moved=completed.returncode == 0)
            if completed.returncode == 0:
                return True
            # Retry only a race on the history refs themselves; a moved ref is the caller's.
            if action is None or store is None or time.monotonic() > deadline:
                return False
            for ref, (expected, _) in updates.items():
                if expected is not ... and store.read_ref(ref) != expected:
                    return False
            locks.pause()
    finally:
        if store is not None:
            store.close()


def past_stale_locks(
    run: "Callable[[], subprocess.CompletedProcess]", deadline: float
) -> "subprocess.CompletedProcess":
    """RUN (a git command that updates refs) again while it fails on a ref lock that
    exists, until DEADLINE (`time.monotonic`): a live writer's lock is gone in a moment,
    a killed one's is cleared once stale (`LockWatch`), which git itself never does."""
    import re

    while True:
        completed = run()
        if completed.returncode == 0:
            return completed
        stale = re.search(locks.LOCK_FAILURE, completed.stderr)
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
