"""Whole scopes in and out of a repository: export to JSON, import from it, drop.

An export is the scope's name, its write clock and every file with its text and write
stamp, so an import restores the same least-recently-written order:

    {"format": 1, "scope": "team", "next_write": 7,
     "files": [{"path": "/memories/a.md", "written": 3, "text": "..."}]}
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from git_obversa.memory.engine import Entry
from git_obversa.memory.git_memory import (
    SCOPE_REF_PREFIX,
    Store,
    implied_directories,
    read_blob_text,
    read_scope_tree,
    scope_digest,
    scope_ref,
)
from git_obversa.memory.gitstore import open_store, update_refs
from git_obversa.memory.history_commits import history_state, record_history
from git_obversa.memory.names import SHOWN_DIGITS, Resolved, record_name, resolve_scope
from git_obversa.memory.paths import has_allowed_extension, validate_path
from git_obversa.memory.port import (
    MemoryFailure,
    MemoryLimits,
    is_safe_integer,
    is_well_formed,
    utf8_length,
    validate_scope,
)
from git_obversa.memory.ref_names import history_ref
from git_obversa.memory.scope_build import write_scope_tree
from git_obversa.memory.store_errors import MissingObject, StoreError

EXPORT_FORMAT = 1


class ScopeIOError(Exception):
    """The scope could not be exported, imported or dropped; the message says why."""


@contextmanager
def _store(repository: str) -> Iterator[Store]:
    try:
        store = open_store(os.fspath(repository))
    except StoreError as error:  # not a repository, or one Git cannot open
        raise ScopeIOError(f"{error.message}; run this inside a Git repository") from None
    with store:
        yield store


def _resolved(store: Store, scope: str) -> Resolved:
    """The scope SCOPE names (a name, a digest, a unique digest prefix), or ScopeIOError."""
    try:
        return resolve_scope(store, scope)
    except MemoryFailure as error:
        raise ScopeIOError(error.message) from None


def export_scope(repository: str, scope: str, limits: MemoryLimits | None = None) -> dict:
    """The scope as a JSON-ready dict; ScopeIOError if it does not exist here.

    SCOPE may be its name, its digest or a unique digest prefix; an export carries the
    name, so a scope whose name this repository does not know cannot be exported."""
    with _store(repository) as store:
        resolved = _resolved(store, scope)
        digest = resolved.digest
        if resolved.name is None:
            raise ScopeIOError(
                f"scope {resolved.label} has no recorded name, and an export needs it; "
                "name it with any write, e.g. `git obversa memory view --scope NAME`"
            )
        scope = resolved.name
        tree = store.read_ref(scope_ref(scope))
        if tree is None:
            raise ScopeIOError(f"scope {resolved.label} was dropped; `memory log` lists its states")
        try:
            stored = read_scope_tree(store, tree, digest, MemoryLimits.resolve(limits))
            files = [
                {
                    "path": path,
                    "written": entry.written,
                    "text": read_blob_text(store, stored.blobs[path], entry.byte_length),
                }
                for path, entry in sorted(stored.entries.items())
            ]
        except (StoreError, MissingObject) as error:
            raise ScopeIOError(f"UNSAFE_STORAGE: scope {resolved.label}: {error}") from None
    return {"format": EXPORT_FORMAT, "scope": scope, "next_write": stored.clock, "files": files}


def import_scope(
    repository: str,
    exported: Any,
    *,
    replace: bool = False,
    limits: MemoryLimits | None = None,
) -> dict:
    """Store an exported scope; an existing scope is only overwritten with REPLACE.

    Everything is checked as a write through the port would be (paths, extensions,
    well-formed text, limits) before anything is stored. Returns {"scope", "files", "bytes"}.
    """
    limits = MemoryLimits.resolve(limits)
    scope, clock, files = _checked_export(exported, limits)
    digest = scope_digest(scope)
    with _store(repository) as store:
        current = store.read_ref(scope_ref(scope))
        if current is not None and not replace:
            raise ScopeIOError(
                f"scope '{scope}' already exists here; drop it first or import with --replace"
            )
        entries, blobs = {}, {}
        for item in files:
            entries[item["path"]] = Entry(utf8_length(item["text"]), item["written"])
            blobs[item["path"]] = store.write_object("blob", item["text"].encode("utf-8"))
        tree = write_scope_tree(store, digest, entries, clock, blobs)
        # Compare-and-swap against what was read above: a scope created or changed
        # meanwhile is never overwritten.
        if not store.update_ref(scope_ref(scope), current, tree):
            raise ScopeIOError(f"scope '{scope}' changed while importing; run the import again")
        record_name(store, scope)
        record_history(store, digest, current, tree, "import")
    total = sum(entry.byte_length for entry in entries.values())
    return {"scope": scope, "files": len(entries), "bytes": total}


def _checked_export(exported: Any, limits: MemoryLimits) -> tuple[str, int, list[dict]]:
    def bad(why: str) -> ScopeIOError:
        return ScopeIOError(f"not a scope export: {why}")

    if not isinstance(exported, dict) or exported.get("format") != EXPORT_FORMAT:
        raise bad(f'expected a JSON object with "format": {EXPORT_FORMAT}')
    try:
        scope = validate_scope(exported.get("scope"))
    except TypeError as error:
        raise bad(str(error)) from None
    clock, files = exported.get("next_write"), exported.get("files")
    if not is_safe_integer(clock, minimum=0) or not isinstance(files, list):
        raise bad('"next_write" must be a count and "files" a list')
    seen: set[str] = set()
    total = 0
    for item in files:
        if not isinstance(item, dict):
            raise bad("every file must be an object")
        path, text, written = item.get("path"), item.get("text"), item.get("written")
        try:
            validate_path(path)
        except MemoryFailure as error:
            raise bad(f"{path!r}: {error.message}") from None
        if not has_allowed_extension(path) or path in seen:
            raise bad(f"{path}: extension not allowed or path repeated")
        if not is_well_formed(text) or not is_safe_integer(written, minimum=1) or written > clock:
            raise bad(f"{path}: text must be a string and 1 <= written <= next_write")
        size = utf8_length(text)
        if size > limits.max_file_bytes:
            raise bad(f"{path}: {size} bytes is over the limit of {limits.max_file_bytes}")
        seen.add(path)
        total += size
    if len(files) > limits.max_files or total > limits.max_total_bytes:
        raise bad(f"{len(files)} files, {total} bytes: over the scope limits")
    both = sorted(seen & implied_directories(seen))  # a path may not be file and directory
    if both:
        raise bad(f"{both[0]} is a file and a directory")
    return scope, clock, files


# A tombstone: `refs/obversa/dropped/v1/<digest>` -> the tree the scope held when it was
# dropped on purpose. Sync carries it, and only a tombstone makes a scope missing on one
# side a deletion on the other (a scope merely missing is sent back). It also keeps the
# dropped tree reachable, so `git gc` never takes it.
DROPPED_REF_PREFIX = "refs/obversa/dropped/v1/"


def drop_scope(repository: str, scope: str) -> dict:
    """Delete the scope's ref here (SCOPE: a name, a digest or a unique digest prefix),
    leaving a tombstone in the same transaction. Its history keeps every state: `memory
    log` / `memory restore` bring it back ("restore" in the result is the command). With
    sync set up, the next sync deletes it on the remote too, unless someone changed it
    there (their files then come back)."""
    with _store(repository) as store:
        resolved = _resolved(store, scope)
        ref = SCOPE_REF_PREFIX + resolved.digest
        current = store.read_ref(ref)
    if current is None:
        raise ScopeIOError(f"scope {resolved.label} was dropped already")
    updates = {ref: (current, None), DROPPED_REF_PREFIX + resolved.digest: (..., current)}
    if not update_refs(os.fspath(repository), updates, "", action="drop"):
        raise ScopeIOError(f"scope {resolved.label} changed while dropping; run the drop again")
    with _store(repository) as store:
        state = state_before(store, resolved.digest)
    named = resolved.name if resolved.name and not resolved.name.startswith("-") else None
    return {
        "scope": resolved.name or resolved.digest,
        "name": resolved.name,
        "digest": resolved.digest,
        "ref": ref,
        "tree": current,
        "state": state,
        "restore": state
        and f"git obversa memory restore {scope_option(resolved.digest, named)} {state[:12]}",
    }


def state_before(store: Store, digest: str) -> str | None:
    """The history state a scope held before its latest change (what undoes that change)."""
    try:
        head = store.read_ref(history_ref(digest))
        return history_state(store, head)[1] if head is not None else None
    except MemoryFailure:
        return None


def scope_option(digest: str, name: str | None) -> str:
    """The command-line words that name scope DIGEST (NAME: its name, if known), for a
    command printed for the user to run: `--scope NAME`, or `--scope-digest <digest>`
    for a scope without a name here (or one argparse would take for an option)."""
    if name is not None and not name.startswith("-"):
        return f"--scope {shell_word(name)}"
    return f"--scope-digest {digest[:SHOWN_DIGITS]}"


def shell_word(text: str) -> str:
    """TEXT as one word a POSIX shell reads back unchanged."""
    if re.fullmatch(r"[A-Za-z0-9_.,:/@+=-]+", text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def load_export(path: str) -> Any:
    """The JSON of an export file ('-' is stdin)."""
    try:
        if path == "-":
            return json.load(sys.stdin)
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except RecursionError:
        raise ScopeIOError(f"cannot read {path}: JSON nested too deeply") from None
    except (OSError, ValueError) as error:
        raise ScopeIOError(f"cannot read {path}: {error}") from None
