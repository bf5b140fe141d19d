"""The history of a scope: every state its ref held, and a way back to any of them.

Each scope ref `refs/obversa/memory/v1/<digest>` has a history ref beside it,
`refs/obversa/history/v1/<digest>`, pointing at a chain of commits, one per state: the
commit's tree is the scope's root tree exactly as the scope ref held it (format 1,
untouched), its message says which command or sync made it. A reflog cannot do this
job: git refuses reflog entries that name trees (every `git gc` prints an error for them
and `git reflog` shows nothing). Commits also keep every state alive through
`git gc --prune=now`, for as long as the history ref exists.

`scope_log` lists the states newest first with what changed; `restore_scope` makes an
old state current again, as a new state (so a restore is undone the same way).
"""

from __future__ import annotations

import datetime
import os
from typing import Any

from git_obversa.memory import gitstore, history_commits, ref_names
from git_obversa.memory.git_memory import ScopeTree, read_scope_tree, scope_ref
from git_obversa.memory.names import Resolved, resolve_scope
from git_obversa.memory.port import MemoryFailure, MemoryLimits
from git_obversa.memory.ref_names import history_ref
from git_obversa.memory.store_errors import MissingObject, StoreError
from git_obversa.repo import locks

MAX_STATES = 100000  # a history walk stops here (a scope written ten times a minute for a week)


class HistoryError(MemoryFailure):
    """A log or restore that cannot be done; the message says why and what to do."""

    def __init__(self, message: str, code: str = "NOT_FOUND") -> None:
        super().__init__(code, message)


def _open(repository: str | os.PathLike[str]) -> Any:
    try:
        return gitstore.open_store(os.path.realpath(os.fspath(repository)))
    except StoreError as error:
        message = f"{error.message}; run this inside a Git repository"
        raise HistoryError(message, error.code) from None


def _catch_up(store: Any, resolved: Resolved) -> str | None:
    """The history head, after recording the scope's current state if no one has (a
    write by the original implementation, or one made before history existed)."""
    current = store.read_ref(scope_ref_of(resolved))
    head = store.read_ref(history_ref(resolved.digest))
    state = history_commits.history_state(store, head)[0] if head is not None else None
    if head is None and current is None:
        return None
    if head is None or state != current:
        before = state if head is not None else None
        return history_commits.record_history(store, resolved.digest, before, current, "unrecorded")
    return head


def scope_ref_of(resolved: Resolved) -> str:
    return ref_names.SCOPE_REF_PREFIX + resolved.digest


def _states(store: Any, head: str | None, limit: int | None) -> list[dict[str, Any]]:
    """(commit, tree, time, action) from HEAD back, LIMIT of them plus one to diff with."""
    found: list[dict[str, Any]] = []
    commit = head
    while commit is not None and len(found) < min(limit + 1 if limit else MAX_STATES, MAX_STATES):
        kind, raw = store.read_object_retrying(commit, history_commits.HISTORY_COMMIT_CAP)
        if kind != "commit" or len(raw) > history_commits.HISTORY_COMMIT_CAP:
            raise StoreError("UNSAFE_STORAGE", "Memory history holds an object that is not ours.")
        try:
            tree, parent, when, action = history_commits.parse_history_commit(raw, store.hex_length)
        except ValueError as error:
            message = "Memory history holds a malformed commit."
            raise StoreError("UNSAFE_STORAGE", message) from error
        found.append({"state": commit, "tree": tree, "when": when, "summary": action})
        commit = parent
    return found


def _files(store: Any, tree: str | None, digest: str, cache: dict) -> ScopeTree | None:
    if tree is None:
        return None
    if tree not in cache:
        cache[tree] = read_scope_tree(store, tree, digest, None)
    return cache[tree]


def scope_log(
    repository: str | os.PathLike[str],
    scope: str,
    *,
    limit: int | None = None,
    record: bool = True,
) -> list[dict[str, Any]]:
    """The states of SCOPE (a name, a digest or a unique prefix), newest first.

    Each: `state` (the id `restore_scope` takes), `time` (ISO 8601, UTC), `action`
    (create, str_replace, insert, delete, rename, import, merge, sync, drop, restore,
    unrecorded), `summary` (the whole line, e.g. "create /memories/a.md"), `present`
    (False: the scope was dropped in this state), `files`, and the paths `added`,
    `changed` and `removed` since the state before. A state that cannot be read has
    `error` and empty lists. Without RECORD (a reader that must not write), a current
    state no one recorded is left out rather than recorded first.
    """
    with _open(repository) as store:
        resolved = resolve_scope(store, scope)
        head = (
            _catch_up(store, resolved) if record else store.read_ref(history_ref(resolved.digest))
        )
        states = _states(store, head, limit)
        cache: dict[str, ScopeTree] = {}
        log = []
        shown = states[:limit] if limit else states
        for index, item in enumerate(shown):
            older = states[index + 1]["tree"] if index + 1 < len(states) else None
            entry = {
                "state": item["state"],
                "time": datetime.datetime.fromtimestamp(item["when"], datetime.timezone.utc)
                .isoformat()
                .replace("+00:00", "Z"),
                "action": item["summary"].split(" ", 1)[0],
                "summary": item["summary"],
                "scope": resolved.name,
                "digest": resolved.digest,
                "present": item["tree"] is not None,
                "files": 0,
                "added": [],
                "changed": [],
                "removed": [],
            }
            try:
                new = _files(store, item["tree"], resolved.digest, cache)
                old = _files(store, older, resolved.digest, cache)
            except (StoreError, MissingObject) as error:
                entry["error"] = str(error)
                log.append(entry)
                continue
            new_blobs = new.blobs if new else {}
            old_blobs = old.blobs if old else {}
            entry["files"] = len(new_blobs)
            entry["added"] = sorted(new_blobs.keys() - old_blobs.keys())
            entry["removed"] = sorted(old_blobs.keys() - new_blobs.keys())
            entry["changed"] = sorted(
                p for p in new_blobs.keys() & old_blobs.keys() if new_blobs[p] != old_blobs[p]
            )
            log.append(entry)
        return log


def _find_state(store: Any, head: str | None, state: str) -> dict[str, Any]:
    wanted = state.strip().lower()
    if len(wanted) < 4 or wanted.strip(ref_names.HEX):
        raise HistoryError(f"'{state}' is not a state id; `git obversa memory log` lists them")
    matches = [item for item in _states(store, head, None) if item["state"].startswith(wanted)]
    if not matches:
        raise HistoryError(
            f"no state {state} in this scope's history; `git obversa memory log` lists them"
        )
    if len({item["state"] for item in matches}) > 1:
        raise HistoryError(f"state {state} is ambiguous; give more digits", "INVALID_ARGUMENT")
    return matches[0]


def restore_scope(
    repository: str | os.PathLike[str],
    scope: str,
    state: str,
    limits: MemoryLimits | None = None,
) -> dict[str, Any]:
    """Make STATE (an id from `scope_log`, or a unique prefix) the scope's current state.

    The restore is a new state of its own, so it can be undone by restoring the state
    before it. Every file of the old state is checked (readable, within LIMITS) before
    the ref moves. Returns {"scope", "digest", "restored", "state", "files", "unchanged"}.
    """
    limits = MemoryLimits.resolve(limits)
    with _open(repository) as store:
        resolved = resolve_scope(store, scope)
        head = _catch_up(store, resolved)
        found = _find_state(store, head, state)
        tree = found["tree"]
        if tree is None:
            raise HistoryError(
                f"state {state} is the dropped scope; `git obversa memory drop --scope "
                f"{resolved.name or resolved.digest}` drops it again",
                "INVALID_ARGUMENT",
            )
        try:
            restored = read_scope_tree(store, tree, resolved.digest, limits)
            for path, entry in restored.entries.items():
                kind, data = store.read_object_retrying(restored.blobs[path], entry.byte_length)
                if kind != "blob" or len(data) != entry.byte_length:
                    raise StoreError("UNSAFE_STORAGE", f"{path} does not match its metadata.")
        except MissingObject as error:
            message = f"state {state} cannot be restored: an object of it is gone ({error.oid})"
            raise HistoryError(message, "UNSAFE_STORAGE") from None
        except StoreError as error:
            message = f"state {state} cannot be restored: {error.message}"
            raise HistoryError(message, error.code) from None
        ref = scope_ref(resolved.name) if resolved.name else scope_ref_of(resolved)
        for _ in range(history_commits.MAX_HISTORY_ATTEMPTS):
            current = store.read_ref(ref)
            if current == tree:
                new_head = head
                break
            if store.update_ref(ref, current, tree):
                action = f"restore {found['state'][:12]}"
                new_head = history_commits.record_history(
                    store, resolved.digest, current, tree, action
                )
                break
            locks.pause()
        else:
            raise HistoryError("the scope kept changing while restoring; run it again", "CONFLICT")
        return {
            "scope": resolved.name,
            "digest": resolved.digest,
            "restored": found["state"],
            "state": new_head,
            "files": len(restored.entries),
            "unchanged": current == tree,
        }
