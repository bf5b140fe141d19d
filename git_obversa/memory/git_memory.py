"""The Git adapter: each scope's files in a private ref that points at a tree (SPEC.md §3).

Storage format 1, byte for byte as the original writes it:

    refs/obversa/memory/v1/<sha256 hex of the scope's UTF-8 bytes>  ->  tree
        .obversa-memory.json   100644 blob   compact JSON metadata (key order fixed)
        memories               040000 tree   the files, as 100644 blobs of raw UTF-8

No commit and no reflog on that ref; HEAD, the index, branches and the worktree are
never touched, and no hook runs. Beside it (never inside), each write appends a commit
to the scope's history ref and the first one records the scope's name (`names.py`).

Validation (UNSAFE_STORAGE) is split by cost. On every command the ref, the root tree,
the metadata and the full listing of the `memories` trees (modes, paths, implied
directories, counts) are checked; the result is cached per memory object under the root
tree id, which names immutable content, so an unchanged scope is not re-checked. A
file's blob is checked (type, UTF-8, declared length) when a command reads it. So a
command costs in proportion to the files it touches, not to the size of the scope.

Building blocks for other storage code (sync/merge of scopes), kept stable:
`SCOPE_REF_PREFIX`, `scope_digest`, `scope_ref`, `read_scope_tree`, `read_blob_text`,
`gitstore.open_store` for the store they take; the tree is written by `scope_build.py`.
"""

import os
import time

from git_obversa.lean.builtin import allocate_lock
from git_obversa.memory import engine, gitstore, ref_names, store_errors
from git_obversa.memory.names import (
    DIGEST_MARK,
    checked_name,
    record_name,
    resolve_scope,
    scope_digest,
)
from git_obversa.memory.port import (
    MemoryFailure,
    MemoryLimits,
    failure,
    validate_scope,
)
from git_obversa.memory.scope_tree import (
    ScopeTree,
    Store,
    empty_scope_tree,
    implied_directories,
    parse_metadata,
    read_blob_text,
    read_scope_tree,
)
from git_obversa.memory.store_errors import MissingObject, StoreError
from git_obversa.repo import locks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SCOPE_REF_PREFIX = ref_names.SCOPE_REF_PREFIX

# The building blocks other storage code (sync, scope export and import, the web view)
# takes from here, wherever they are defined.
__all__ = [
    "SCOPE_REF_PREFIX",
    "GitMemory",
    "ScopeTree",
    "Store",
    "empty_scope_tree",
    "implied_directories",
    "list_scopes",
    "open_git_memory",
    "open_scope",
    "parse_metadata",
    "read_blob_text",
    "read_scope_tree",
    "scope_complete",
    "scope_digest",
    "scope_ref",
]
MAX_CAS_ATTEMPTS = 64


def _still_waiting(waiting: "tuple | None", lock: str) -> "tuple | None":
    """The wait for LOCK so far: (the lock file seen, since when). A lock file that
    stays the same past locks.STALE_LOCK_SECONDS while its holder cannot be proven gone
    is reported, never removed; writers taking turns make new lock files, and each
    starts the wait again."""
    try:
        seen = os.stat(lock)
    except FileNotFoundError:
        return None
    identity = (seen.st_ino, seen.st_mtime_ns)
    now = time.monotonic()
    if waiting is None or waiting[0] != identity:
        return identity, now
    # Never before a dead holder could be proven (ORPHAN_LOCK_SECONDS after its lock).
    if now - waiting[1] > max(locks.STALE_LOCK_SECONDS, 2 * locks.ORPHAN_LOCK_SECONDS):
        raise StoreError("STORAGE_ERROR", store_errors.stale_lock_message(lock))
    return waiting


MISSING_OBJECT_WAIT = 2.0  # seconds an object under the ref may be missing before UNSAFE


def scope_ref(scope: str) -> str:
    """The ref that holds SCOPE: `refs/obversa/memory/v1/<scope_digest(scope)>`."""
    return SCOPE_REF_PREFIX + scope_digest(scope)


class _Snapshot:
    """What the engine sees: metadata up front, texts read (and checked) on demand."""

    def __init__(self, store: Store, scope: ScopeTree) -> None:
        self.store = store
        self.scope = scope
        self.entries = scope.entries
        self.clock = scope.clock

    def read(self, path: str) -> str:
        text = self.scope.texts.get(path)
        if text is None:
            blob = self.scope.blobs[path]
            length = self.entries[path].byte_length
            deadline = time.monotonic() + MISSING_OBJECT_WAIT
            while text is None:
                try:
                    text = read_blob_text(self.store, blob, length)
                except MissingObject:
                    if time.monotonic() > deadline:
                        raise
                    _wait_for_missing_object(self.store)
            self.scope.texts[path] = text
        return text


def _wait_for_missing_object(store: Store) -> None:
    """`git gc --prune=now` can delete objects a writer has just put under the ref; the
    writer puts them back once the gc ends. Wait for that, briefly."""
    deadline = time.monotonic() + gitstore.GC_WAIT_SECONDS
    while store.gc_running() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.02)


class GitMemory:
    """A memory whose scope lives in a private ref of one Git repository."""

    def __init__(
        self, repository_path: str, scope: str, limits: "MemoryLimits | Mapping[str, Any] | None"
    ) -> None:
        if not isinstance(repository_path, str) or not repository_path:
            raise TypeError("repositoryPath must be a non-empty string")
        self.scope = validate_scope(scope)
        try:
            real = os.path.realpath(repository_path, strict=True)
        except OSError as error:
            raise TypeError("repositoryPath must identify an accessible Git repository") from error
        self.limits = MemoryLimits.resolve(limits)
        self.repository_path = real
        self.digest = scope_digest(scope)
        self.ref = SCOPE_REF_PREFIX + self.digest
        self._store = gitstore.open_store(real)
        self.named = True  # False when opened by digest, the name unknown here
        self._scope: ScopeTree | None = None  # the last scope read or written, by tree id
        self._found_absent: bool | None = None  # whether the first read found no scope
        self._named = False  # whether this memory has made sure its name is recorded
        self._lock = allocate_lock()

    @property
    def backend(self) -> str:
        """Which store serves this memory: "in-process" (Git's files read and written here)
        or "plumbing" (git processes)."""
        return self._store.kind

    def close(self) -> None:
        self._store.close()

    def discard(self) -> bool:
        """Remove this scope and every trace of it (its ref, name and history), as a
        throwaway scope goes (the conformance kit's): only a scope this memory found
        absent and then created; False for any other, which stays."""
        if not self._found_absent:
            return False
        refs = (self.ref, ref_names.NAME_REF_PREFIX + self.digest)
        refs += (ref_names.history_ref(self.digest),)
        updates = {ref: (..., None) for ref in refs if self._store.read_ref(ref) is not None}
        zero = "0" * self._store.hex_length
        return not updates or gitstore.update_refs(self._store.common_dir, updates, zero)

    def __enter__(self) -> "GitMemory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(self, command: "Any") -> "dict[str, Any]":
        with self._lock:
            try:
                return self._execute(command)
            except MemoryFailure as error:
                return failure(command, error)
            except Exception:  # an adapter never raises out of execute
                return failure(
                    command, MemoryFailure("STORAGE_ERROR", "Git memory storage failed.")
                )

    def _execute(self, command: "Any") -> "dict[str, Any]":
        lost = 0
        contended = 0
        watch = gitstore.LockWatch(self._store.ref_lock_path(self.ref))
        history = gitstore.LockWatch(self._store.ref_lock_path(ref_names.history_ref(self.digest)))
        # Every command, a view too, removes this scope's locks whose writer is provably
        # gone: git (`git gc`, `git maintenance`) fails on them as long as they stay.
        watch.present()
        history.present()
        waiting_since = None
        while True:
            observed, scope = self._load()
            result, change = engine.execute(_Snapshot(self._store, scope), command, self.limits)
            if change is None:
                return result
            written = self._write(scope, change)
            moved = self._store.move_scope(
                self.digest, observed, written.tree or "", _action(result)
            )
            if moved:
                self._scope = written
                self._name_once()
                return result
            if moved is None:  # another writer is recording its state; ours comes next
                if history.present():
                    waiting_since = _still_waiting(waiting_since, history.lock)
                    time.sleep(0.001)
                continue
            if self._store.read_ref(self.ref) != observed:
                lost += 1
                if lost >= MAX_CAS_ATTEMPTS:
                    raise MemoryFailure("CONFLICT", "Memory changed repeatedly while writing.")
                # Back off with jitter, longer after each lost race, so writers spread out.
                locks.pause(0.001 * min(2**lost, 64))
                continue
            if watch.present():  # a live writer holds the ref: wait for it, unhurried
                waiting_since = _still_waiting(waiting_since, watch.lock)
                time.sleep(0.005)
                continue
            contended += 1
            if contended >= MAX_CAS_ATTEMPTS:
                raise StoreError("STORAGE_ERROR", "Git could not update the memory ref.")
            locks.pause()

    def _repair(self, broken: str) -> bool | None:
        """The scope ref names objects that are gone: a writer was killed after moving
        it while a `git gc --prune=now` removed what it had just written. That write was
        never acknowledged; every acknowledged one is in the history. Move the ref back
        to the newest complete state (one line says so). A live writer holds the history
        lock until its objects are safe, so the move is made under that lock and only if
        the objects are still missing: None while the lock is held, False if no complete
        state is found."""
        # Repairing writes, and is rare: a command that only reads never loads these.
        from git_obversa.memory import history_commits
        from git_obversa.repo import reflog

        store = self._store
        history = ref_names.history_ref(self.digest)
        candidates = [
            store.read_ref(history),
            *reflog.values(store.common_dir, history, store.hex_length),
        ]
        for start in filter(None, candidates):
            commit: str | None = start
            for _ in range(history_commits.RECENT_STATES * 8):
                if commit is None:
                    break
                try:
                    tree, parent = history_commits.history_state(store, commit)
                except (StoreError, MissingObject):
                    break
                if tree is None:
                    break  # the scope was dropped there: nothing older is current
                if tree != broken and scope_complete(store, tree, self.digest):
                    moved = store.move_scope(
                        self.digest,
                        broken,
                        tree,
                        f"repair {broken[:12]}",
                        parent=commit,
                        check=lambda: not scope_complete(store, broken, self.digest),
                    )
                    if not moved:  # locked, complete again, or moved on: load again
                        return None
                    store_errors.notify(
                        f"scope {self.scope} named objects a concurrent `git gc` removed "
                        f"(a writer was killed mid-write); restored its state {commit[:12]}"
                    )
                    return True
                commit = parent
        return False

    def _name_once(self) -> None:
        """Record the scope's name beside it, once per memory (a name ref that exists
        already is left as it is)."""
        if self._named:
            return
        self._named = True
        if self.named:
            try:
                record_name(self._store, self.scope)
            except MemoryFailure as error:  # the write itself has succeeded
                store_errors.notify(f"the scope's name could not be recorded: {error.message}")

    def _load(self) -> tuple[str | None, ScopeTree]:
        """(the ref's value, the validated scope it names), waiting out a vanished object."""
        deadline = time.monotonic() + MISSING_OBJECT_WAIT
        patience = deadline + gitstore.GC_WAIT_SECONDS
        while True:
            value = self._store.read_ref(self.ref)
            if self._found_absent is None:
                self._found_absent = value is None
            if value is None:
                return None, empty_scope_tree()
            if self._scope is not None and self._scope.tree == value:
                return value, self._scope
            try:
                scope = read_scope_tree(self._store, value, self.digest, self.limits)
            except MissingObject:
                if time.monotonic() > deadline:
                    repaired = self._repair(value)
                    if repaired is None and time.monotonic() < patience:
                        time.sleep(0.01)  # its writer is alive, still putting objects back
                        continue
                    if repaired:
                        continue
                    raise
                _wait_for_missing_object(self._store)
                continue
            self._scope = scope
            return value, scope

    def _write(self, scope: ScopeTree, change: engine.Change) -> ScopeTree:
        # Only a command that changes the scope loads the module that builds its tree.
        from git_obversa.memory.scope_build import build_scope_tree

        changed = None
        if not change.moved and change.entries.keys() == scope.entries.keys():
            # Files changed, none added, removed or moved: copy the maps, not each path;
            # the engine changed the entries of the files it wrote and no other.
            blobs, texts = dict(scope.blobs), dict(scope.texts)
            changed = change.written.keys()
        else:
            blobs, texts = {}, {}
            for path in change.entries.keys() - change.written.keys():
                source = change.moved.get(path, path)
                blobs[path] = scope.blobs[source]
                if source in scope.texts:
                    texts[path] = scope.texts[source]
        for path, text in change.written.items():
            texts[path] = text
            blobs[path] = self._store.write_object("blob", text.encode("utf-8"))
        written = build_scope_tree(
            self._store, self.digest, change.entries, change.clock, blobs, scope, changed
        )
        written.texts = texts
        return written


def scope_complete(store: Store, tree: str, digest: str) -> bool:
    """Whether this repository holds every object of the scope stored under TREE (a
    tree of any shape that cannot be read as a scope counts as incomplete)."""
    try:
        scope = read_scope_tree(store, tree, digest, None)
    except (MemoryFailure, MissingObject, ValueError, RecursionError, UnicodeError):
        return False
    return all(store.has_object(blob) for blob in scope.blobs.values())


def _action(result: "dict[str, Any]") -> str:
    """How a history entry names a write: the command and its path(s)."""
    value = result["value"]
    where = value.get("path") or f"{value.get('old_path')} -> {value.get('new_path')}"
    return f"{result['command']} {where}"


def open_git_memory(
    repository_path: str, scope: str, limits: "MemoryLimits | Mapping[str, Any] | None" = None
) -> GitMemory:
    """Open SCOPE's memory in the Git repository at REPOSITORY_PATH.

    REPOSITORY_PATH may be a worktree (main or linked: one memory per repository), a
    directory inside one, or a bare repository. Raises TypeError for bad arguments and
    `MemoryFailure` (code STORAGE_ERROR or UNSAFE_STORAGE) when the repository cannot be
    used; `execute` never raises.
    """
    return GitMemory(repository_path, scope, limits)


def open_scope(
    repository_path: str, scope: str, limits: "MemoryLimits | Mapping[str, Any] | None" = None
) -> GitMemory:
    """Open the scope SCOPE names (`names.resolve_scope`): the scope of that name (a
    new one if none has it yet), or, spelled `names.by_digest(prefix)`, the stored scope
    whose digest starts with that prefix."""
    if not scope.startswith(DIGEST_MARK):
        return GitMemory(repository_path, scope, limits)
    # Opened as the name PREFIX first (for its store), then pointed at the scope found.
    memory = GitMemory(repository_path, scope[len(DIGEST_MARK) :], limits)
    try:
        resolved = resolve_scope(memory._store, scope)
    except MemoryFailure:
        memory.close()
        raise
    memory.scope = resolved.name or resolved.digest
    memory.named = resolved.name is not None
    memory.digest = resolved.digest
    memory.ref = SCOPE_REF_PREFIX + resolved.digest
    return memory


def list_scopes(repository_path: str) -> "list[dict[str, Any]]":
    """The scopes stored in a repository, by digest: [{"digest", "name", "ref", "files",
    "bytes"}]. "name" is None for a scope whose name was never recorded here (one
    written by the original implementation). A scope that fails validation has "files"
    and "bytes" None and an "error" message naming the problem.

    What a tree or a name blob says never changes, so what was read of each is kept in
    `<git dir>/obversa/scope-list.json` by object id: a listing reads only what is new.
    """
    store = gitstore.open_store(os.path.realpath(repository_path))
    try:
        for prefix in (SCOPE_REF_PREFIX, ref_names.HISTORY_REF_PREFIX):
            folder = os.path.dirname(store.ref_lock_path(prefix + "x"))
            for lock in locks.dead_locks_removed(folder):
                store_errors.notify(f"removed a lock left by a killed writer: {lock}")
        cache_path = os.path.join(store.common_dir, "obversa", "scope-list.json")
        cache = _read_listing_cache(cache_path)
        fresh: dict[str, Any] = {}
        known = {}
        for ref, blob in store.list_refs(ref_names.NAME_REF_PREFIX).items():
            digest = ref[len(ref_names.NAME_REF_PREFIX) :]
            name = cache.get(blob)
            if not isinstance(name, str) or scope_digest(name) != digest:
                name = checked_name(store, digest, blob)
            if name is not None:
                known[digest] = fresh[blob] = name
        found = []
        for ref, value in sorted(store.list_refs(SCOPE_REF_PREFIX).items()):
            digest = ref[len(SCOPE_REF_PREFIX) :]
            item: dict[str, Any] = {
                "digest": digest,
                "name": known.get(digest),
                "ref": ref,
                "files": None,
                "bytes": None,
            }
            counted = cache.get(f"{value} {digest}")
            if not (isinstance(counted, list) and len(counted) == 2):
                try:
                    scope = read_scope_tree(store, value, digest, None)
                    sizes = (entry.byte_length for entry in scope.entries.values())
                    counted = [len(scope.entries), sum(sizes)]
                except MemoryFailure as error:
                    item["error"] = error.message
                    counted = None
            if counted is not None:
                item["files"], item["bytes"] = counted
                fresh[f"{value} {digest}"] = counted
            found.append(item)
        if fresh != cache:
            _write_listing_cache(cache_path, fresh)
        return found
    finally:
        store.close()


def _read_listing_cache(path: str) -> "dict[str, Any]":
    import json  # only a listing needs it

    try:
        with open(path, encoding="utf-8") as file:
            cache = json.load(file)
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def _write_listing_cache(path: str, cache: "dict[str, Any]") -> None:
    """Replace the cache file whole (a reader sees the old one or the new one)."""
    import json

    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(cache, file, separators=(",", ":"))
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only repository lists as well, only slower
