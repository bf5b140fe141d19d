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
`build_scope_tree` / `write_scope_tree`, and `gitstore.open_store` for the store they take.
"""

import os
import time
from itertools import compress, repeat

from git_obversa.lean import jsonscan
from git_obversa.lean.builtin import allocate_lock, is_not, itemgetter, ne
from git_obversa.memory import engine, gitstore, history_commits, ref_names, store_errors, store_git
from git_obversa.memory.engine import Entry
from git_obversa.memory.names import MIN_PREFIX, names, record_name, resolve_scope, scope_digest
from git_obversa.memory.paths import are_stored_paths, is_segment, is_stored_path
from git_obversa.memory.port import (
    MAX_SAFE_INTEGER,
    MEMORY_ROOT,
    MemoryFailure,
    MemoryLimits,
    failure,
    is_safe_integer,
    validate_scope,
)
from git_obversa.memory.store_errors import MissingObject, StoreError
from git_obversa.repo import reflog

TYPE_CHECKING = False  # typing costs a one-shot command its import
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

SCOPE_REF_PREFIX = ref_names.SCOPE_REF_PREFIX
METADATA_NAME = ".obversa-memory.json"
FILES_NAME = "memories"
MAX_CAS_ATTEMPTS = 64
MISSING_OBJECT_WAIT = 2.0  # seconds an object under the ref may be missing before UNSAFE
FILE_MODE = 0o100644
TREE_MODE = 0o040000

Store = gitstore.FileStore | gitstore.PlumbingStore


def scope_ref(scope: str) -> str:
    """The ref that holds SCOPE: `refs/obversa/memory/v1/<scope_digest(scope)>`."""
    return SCOPE_REF_PREFIX + scope_digest(scope)


class ScopeTree:
    """A validated scope as stored under one root tree.

    `tree` is the root tree id (None: the scope does not exist yet, which reads as empty).
    `entries` maps each memory path ("/memories/a/b.md") to its `Entry` (byte length,
    write stamp); `clock` is the metadata's `nextWrite`; `blobs` maps each memory path
    to its blob id; `subtrees` maps "/memories" and every implied directory to its tree
    id (so a writer can reuse untouched subtrees); `texts` holds texts already read and
    checked. The rest are caches a writer fills and passes on, so that a write that adds
    or removes no file costs in proportion to what it changes: `parts` (each entry's
    metadata JSON), `ordered` (the paths in metadata order), `listed` (their JSON in that
    order) and `positions` (each path's index there), `children` (each directory's files
    and subdirectories), `raws` (each directory's raw tree, None when not known for every
    directory) and `slots` (where each file's or directory's id sits in its directory's
    raw tree): a changed file's trees are its parents' raw trees with the new ids put in
    place, not serialized again.
    """

    def __init__(
        self,
        tree: str | None,
        entries: dict[str, Entry],
        clock: int,
        blobs: dict[str, str],
        subtrees: dict[str, str] | None = None,
        texts: dict[str, str] | None = None,
    ) -> None:
        self.tree = tree
        self.entries = entries
        self.clock = clock
        self.blobs = blobs
        self.subtrees = subtrees if subtrees is not None else {}
        self.texts = texts if texts is not None else {}
        self.parts: dict[str, bytes] = {}
        self.ordered: list[str] | None = None
        self.listed: list[bytes] | None = None
        self.positions: dict[str, int] | None = None
        self.children: dict[str, list[str]] | None = None
        self.raws: dict[str, bytes] | None = None
        self.slots: dict[str, int] | None = None


def empty_scope_tree() -> ScopeTree:
    return ScopeTree(tree=None, entries={}, clock=0, blobs={})


def _unsafe(message: str) -> StoreError:
    return StoreError("UNSAFE_STORAGE", message)


def metadata_cap(limits: MemoryLimits | None) -> int:
    """Largest metadata blob accepted (SPEC §3.5): enough for max_files long entries."""
    if limits is None or limits.max_files > 909:
        return 1048576
    return max(1024, 1024 + limits.max_files * 1152)


def parse_tree(raw: bytes, oid_bytes: int) -> list[tuple[bytes, int, str]]:
    """Entries (name, mode, hex id) of a raw tree object; ValueError when malformed."""
    return [entry[:3] for entry in _tree_entries(raw, oid_bytes)]


def _tree_entries(raw: bytes, oid_bytes: int) -> list[tuple[bytes, int, str, int]]:
    """Entries (name, mode, hex id, offset of the id in RAW) of a raw tree object."""
    entries = []
    position = 0
    while position < len(raw):
        space = raw.index(b" ", position)
        nul = raw.index(b"\0", space)
        mode_text = raw[position:space]
        if not mode_text.isdigit():
            raise ValueError("tree entry mode")
        binary = raw[nul + 1 : nul + 1 + oid_bytes]
        if len(binary) != oid_bytes:
            raise ValueError("truncated tree entry")
        entries.append((raw[space + 1 : nul], int(mode_text, 8), binary.hex(), nul + 1))
        position = nul + 1 + oid_bytes
    return entries


def serialize_tree(entries: list[tuple[bytes, int, str]]) -> bytes:
    """A raw tree object, entries in Git's order (a tree sorts as if its name ended in /)."""
    return _tree_bytes([(*entry, "") for entry in entries])[0]


def _tree_order(entry: tuple[bytes, int, str, str]) -> bytes:
    return entry[0] + b"/" if entry[1] == TREE_MODE else entry[0]


def _tree_bytes(entries: list[tuple[bytes, int, str, str]]) -> tuple[bytes, list[tuple[str, int]]]:
    """A raw tree object of ENTRIES (name, mode, hex id, member path) in Git's order, and
    where each member's id sits in it."""
    pieces = []
    slots = []
    position = 0
    for name, mode, oid, member in sorted(entries, key=_tree_order):
        head = b"%o %s\0" % (mode, name)
        binary = bytes.fromhex(oid)
        position += len(head)
        slots.append((member, position))
        position += len(binary)
        pieces += (head, binary)
    return b"".join(pieces), slots


def _read(
    store: Store, oid: str, missing: str, max_bytes: int = store_git.OUTPUT_CAP
) -> tuple[str, bytes]:
    try:
        return store.read_object_retrying(oid, max_bytes)
    except MissingObject as error:
        raise MissingObject(oid, missing) from error


def read_scope_tree(
    store: Store, tree_id: str, digest: str, limits: MemoryLimits | None
) -> ScopeTree:
    """Read and validate the scope stored under root tree TREE_ID (SPEC §3.5).

    TREE_ID is the value of a scope ref as the store read it (a symbolic ref reads as
    "ref: <target>" and is refused). DIGEST is the scope digest the metadata must carry.
    LIMITS are the reader's limits the stored scope must fit (None: skip that check, e.g.
    for listing). Raises `StoreError` (UNSAFE_STORAGE) for anything unsafe and
    `MissingObject` for a missing object. Blob contents are not read here:
    `read_blob_text` checks each when read.
    """
    if tree_id.startswith("ref:"):
        raise _unsafe("Memory ref must not be symbolic.")
    if len(tree_id) != store.hex_length or tree_id.strip("0123456789abcdef"):
        raise _unsafe("Git returned an invalid object id.")
    oid_bytes = store.hex_length // 2
    kind, raw = _read(store, tree_id, "Memory ref points to a missing object.")
    if kind != "tree":
        raise _unsafe("Memory ref does not point to a tree.")
    try:
        listing = parse_tree(raw, oid_bytes)
    except ValueError as error:
        raise _unsafe("Memory tree cannot be read.") from error
    if len(listing) != 2:  # counted before names collapse: a repeated name is a third entry
        raise _unsafe("Memory root tree has an unexpected layout.")
    root = {name: (mode, oid) for name, mode, oid in listing}
    metadata = root.get(METADATA_NAME.encode())
    files = root.get(FILES_NAME.encode())
    if metadata is None or files is None or metadata[0] != FILE_MODE or files[0] != TREE_MODE:
        raise _unsafe("Memory root tree has an unsafe layout.")
    kind, data = _read(store, metadata[1], "Memory blob cannot be read.")
    if kind != "blob":
        raise _unsafe("Memory root tree has an unsafe layout.")
    if len(data) > metadata_cap(limits):
        raise _unsafe("Memory blob exceeds its allowed size.")
    entries, clock = parse_metadata(data, digest, limits)
    blobs, subtrees, raws, slots = _walk_files(store, files[1], entries)
    scope = ScopeTree(tree_id, entries, clock, blobs, subtrees)
    scope.raws, scope.slots = raws, slots
    return scope


def parse_metadata(
    data: bytes, digest: str, limits: MemoryLimits | None
) -> tuple[dict[str, Entry], int]:
    """Entries and clock from the metadata blob, with every check of SPEC §3.5."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _unsafe("Memory content is not valid UTF-8.") from error
    try:
        metadata = jsonscan.loads(text, constants=False)
    except (ValueError, RecursionError) as error:  # RecursionError: nested too deeply
        raise _unsafe("Memory metadata is not valid JSON.") from error
    if (
        not isinstance(metadata, dict)
        or not is_safe_integer(metadata.get("format"))
        or metadata["format"] != 1
        or metadata.get("scopeDigest") != digest
    ):
        raise _unsafe("Memory metadata belongs to another scope or format.")
    clock, total, stored = (metadata.get(k) for k in ("nextWrite", "totalBytes", "entries"))
    if not (is_safe_integer(clock, 0) and is_safe_integer(total, 0) and isinstance(stored, list)):
        raise _unsafe("Memory metadata is malformed.")
    entries = _entries_at_once(stored, clock)
    if entries is None:  # something is wrong: found, and named, one entry at a time
        entries = _entries_one_by_one(stored, clock)
    lengths = list(map(itemgetter(0), entries.values()))  # byte lengths, in C
    if limits is not None and (
        len(entries) > limits.max_files
        or total > limits.max_total_bytes
        or max(lengths, default=0) > limits.max_file_bytes
    ):
        raise _unsafe("Memory storage exceeds the current limits.")
    if sum(lengths) != total:
        raise _unsafe("Memory metadata does not match its declared byte total.")
    return entries, clock


def _entries_at_once(stored: "list[Any]", clock: int) -> dict[str, Entry] | None:
    """The entries of STORED when every one passes the checks of `_entries_one_by_one`,
    checked field by field across all entries (in C, where a one-shot command would
    otherwise spend milliseconds on a scope of hundreds of files); else None."""
    if set(map(type, stored)) - {dict}:  # (JSON objects are read as dicts, never subclasses)
        return None
    paths = list(map(dict.get, stored, repeat("path")))
    lengths = list(map(dict.get, stored, repeat("byteLength")))
    stamps = list(map(dict.get, stored, repeat("written")))
    if stored and not (
        # Whole numbers, never bool (JSON's true and false), in the ranges checked below.
        set(map(type, lengths)) == {int}
        and set(map(type, stamps)) == {int}
        and 0 <= min(lengths)
        and max(lengths) <= MAX_SAFE_INTEGER
        and 1 <= min(stamps)
        and max(stamps) <= clock  # a stamp past the clock is a conflict
        and are_stored_paths(paths)
    ):
        return None
    made = map(tuple.__new__, repeat(Entry), zip(lengths, stamps, strict=True))
    entries = dict(zip(paths, made, strict=True))
    return entries if len(entries) == len(stored) else None  # else a path is repeated


def _entries_one_by_one(stored: "list[Any]", clock: int) -> dict[str, Entry]:
    """The entries of STORED, each checked in turn; the first that fails says why."""
    entries: dict[str, Entry] = {}
    conflicting = False
    for item in stored:
        if not (
            isinstance(item, dict)
            and is_safe_integer(item.get("byteLength"), 0)
            and is_safe_integer(item.get("written"), 1)
        ):
            raise _unsafe("Memory metadata contains an invalid entry.")
        path = item.get("path")
        if not is_stored_path(path):
            raise _unsafe("Memory storage contains an invalid file path.")
        if path in entries or item["written"] > clock:
            conflicting = True
        entries[path] = Entry(item["byteLength"], item["written"])
    if conflicting:
        raise _unsafe("Memory metadata contains conflicting entries.")
    return entries


def implied_directories(paths: "Mapping[str, Any]") -> set[str]:
    """Every directory a set of memory paths implies, "/memories" included."""
    directories = {MEMORY_ROOT}
    # Each path's parent (taken in C: a scope's files share a few), then its ancestors.
    for parent in set(map(itemgetter(0), map(str.rpartition, paths, repeat("/")))):
        end = len(parent)
        while end > len(MEMORY_ROOT) and parent[:end] not in directories:
            directories.add(parent[:end])
            end = parent.rfind("/", 0, end)
    return directories


def _walk_files(
    store: Store, files_tree: str, entries: dict[str, Entry]
) -> tuple[dict[str, str], dict[str, str], dict[str, bytes], dict[str, int]]:
    """Check the `memories` trees against the metadata; (blob ids, subtree ids, raw
    trees, where each id sits in its raw tree)."""
    oid_bytes = store.hex_length // 2
    directories = implied_directories(entries)
    # The original caps `ls-tree -r -t` output at this many bytes; raw trees are smaller.
    named = (*directories, *entries)
    budget = (13 + store.hex_length) * len(named) + sum(map(len, map(str.encode, named)))
    blobs: dict[str, str] = {}
    subtrees = {MEMORY_ROOT: files_tree}
    raws: dict[str, bytes] = {}
    slots: dict[str, int] = {}
    pending = [MEMORY_ROOT]
    while pending:
        directory = pending.pop()
        kind, raw = _read(store, subtrees[directory], "Memory tree cannot be read.")
        if kind != "tree":
            raise _unsafe("Memory tree contains an unsafe entry.")
        budget -= len(raw)
        if budget < 0:
            raise _unsafe("Git output exceeded the memory storage limit.")
        raws[directory] = raw
        listed = _usual_listing(raw, directory, oid_bytes, entries, directories, blobs, subtrees)
        if listed is not None:
            files, folders, placed = listed
            blobs.update(files)
            subtrees.update(folders)
            pending += folders
            slots.update(placed)
            continue
        # Something unusual in this tree: read entry by entry, the first wrong one says why.
        try:
            listing = _tree_entries(raw, oid_bytes)
        except ValueError as error:
            raise _unsafe("Git returned a malformed tree entry.") from error
        for name, mode, oid, slot in listing:
            try:
                segment = name.decode("utf-8")
            except UnicodeDecodeError as error:
                raise _unsafe("Memory tree contains an unsafe entry.") from error
            # A name is one segment: "a/b.md" would otherwise pass for a nested path.
            if not is_segment(segment):
                raise _unsafe("Memory storage contains an invalid file path.")
            path = directory + "/" + segment
            slots[path] = slot
            if mode == TREE_MODE:
                if path not in directories or path in subtrees:
                    raise _unsafe("Memory tree contains an unsafe directory.")
                subtrees[path] = oid
                pending.append(path)
            elif mode != FILE_MODE:
                raise _unsafe("Memory tree contains an unsafe entry.")
            elif path not in entries or path in blobs:
                raise _unsafe("Memory metadata does not match stored content.")
            else:
                blobs[path] = oid
    if len(subtrees) != len(directories) or len(blobs) != len(entries):
        raise _unsafe("Memory metadata does not match the tree.")
    if any(directory in entries for directory in directories):
        raise _unsafe("Memory tree contains a file and directory path conflict.")
    return blobs, subtrees, raws, slots


def _usual_listing(
    raw: bytes,
    directory: str,
    oid_bytes: int,
    entries: "Mapping[str, Entry]",
    directories: set[str],
    blobs: "Mapping[str, str]",
    subtrees: "Mapping[str, str]",
) -> tuple[dict[str, str], dict[str, str], dict[str, int]] | None:
    """The files, subdirectories (path -> id) and id offsets of DIRECTORY's raw tree when
    every entry is as git writes a scope's (a file of ENTRIES or a directory of
    DIRECTORIES in canonical mode, each once); None when any is not, for `_walk_files`
    to read the tree entry by entry. Such a name needs no check of its own: its path is
    one the metadata's checks passed, and it holds no "/"."""
    files: dict[str, str] = {}
    folders: dict[str, str] = {}
    placed: dict[str, int] = {}
    prefix = directory + "/"
    position, end = 0, len(raw)
    try:
        while position < end:
            space = raw.index(b" ", position)
            mode = raw[position:space]
            nul = raw.index(b"\0", space)
            name = raw[space + 1 : nul].decode("utf-8")
            start = nul + 1
            position = start + oid_bytes
            if position > end or "/" in name:
                return None
            path = prefix + name
            if mode == b"100644" and path in entries and path not in files and path not in blobs:
                files[path] = raw[start:position].hex()
            elif (
                mode == b"40000"
                and path in directories
                and path not in folders
                and path not in subtrees
            ):
                folders[path] = raw[start:position].hex()
            else:
                return None
            placed[path] = start
    except (ValueError, UnicodeDecodeError):
        return None
    return files, folders, placed


def read_blob_text(store: Store, blob_id: str, byte_length: int) -> str:
    """The text of a stored file, checked: a blob, strict UTF-8, BYTE_LENGTH bytes."""
    kind, data = _read(store, blob_id, "Memory blob cannot be read.", byte_length)
    if kind != "blob":
        raise _unsafe("Memory tree contains an unsafe entry.")
    if len(data) > byte_length:
        raise _unsafe("Memory metadata does not match stored content.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _unsafe("Memory content is not valid UTF-8.") from error
    if len(data) != byte_length:
        raise _unsafe("Memory metadata does not match stored content.")
    return text


def _entry_json(path: str, entry: Entry) -> bytes:
    # Exactly what json.dumps(..., separators=(",", ":"), ensure_ascii=False) writes.
    quoted = jsonscan.quote(path, ascii=False).encode("utf-8")
    return b'{"path":%s,"byteLength":%d,"written":%d}' % (quoted, *entry)


def _metadata(
    digest: str,
    entries: "Mapping[str, Entry]",
    clock: int,
    base: ScopeTree | None,
    changed: "Iterable[str] | None" = None,
) -> "_Encoded":
    """The metadata blob of ENTRIES, reusing what BASE (the scope the entries were
    derived from) has already encoded (CHANGED: as `build_scope_tree` takes it)."""
    # BASE's parts, when it has them, encode every entry of BASE.
    known, before = (base.parts, base.entries) if base is not None else ({}, {})
    if not known:  # nothing encoded yet (a scope read, not written, here): all at once
        encoded = _Encoded({})
        # Sorted by code point, which is the order of their UTF-8 bytes.
        encoded.ordered = sorted(entries)
        encoded.listed = _entries_json(encoded.ordered, entries)
        encoded.parts = dict(zip(encoded.ordered, encoded.listed, strict=True))
        encoded.blob = _metadata_blob(digest, entries, clock, encoded.listed)
        return encoded
    parts = dict(known)
    if changed is None:
        # Only entries that are not BASE's own objects are encoded again (a write copies
        # the map and replaces the entries it changes), found in C without hashing each.
        changed = compress(entries, map(is_not, entries.values(), map(before.get, entries)))
    changed = list(changed)
    added = False
    for path in changed if known else entries:
        added = added or path not in parts
        parts[path] = _entry_json(path, entries[path])
    same_paths = bool(known) and not added and len(entries) == len(known)
    encoded = _Encoded(parts)
    if same_paths and base is not None and base.ordered is not None and base.listed is not None:
        # The same paths in the same order: BASE's list with the changed entries replaced.
        encoded.ordered = base.ordered
        positions = base.positions
        if positions is None:
            positions = {path: index for index, path in enumerate(base.ordered)}
        encoded.positions = positions
        encoded.listed = listed = list(base.listed)
        for path in changed:
            listed[positions[path]] = parts[path]
    else:
        if not same_paths:
            for gone in known.keys() - entries.keys():
                del parts[gone]
        if same_paths and base is not None and base.ordered is not None:
            encoded.ordered = base.ordered
        else:
            encoded.ordered = sorted(entries, key=lambda path: path.encode("utf-8"))
        encoded.listed = [parts[path] for path in encoded.ordered]
    encoded.blob = _metadata_blob(digest, entries, clock, encoded.listed)
    return encoded


def _metadata_blob(
    digest: str, entries: "Mapping[str, Entry]", clock: int, listed: list[bytes]
) -> bytes:
    return b'{"format":1,"scopeDigest":%s,"nextWrite":%d,"totalBytes":%d,"entries":[%s]}' % (
        jsonscan.quote(digest).encode("ascii"),
        clock,
        sum(map(itemgetter(0), entries.values())),  # byte lengths, summed in C
        b",".join(listed),
    )


ENTRY_JSON = b'{"path":"%s","byteLength":%d,"written":%d}'


def _entries_json(paths: list[str], entries: "Mapping[str, Entry]") -> list[bytes]:
    """`_entry_json` of each of PATHS, formatted all at once (in C) when no path holds a
    character JSON escapes (as stored paths never do: "/" is not one)."""
    joined = "/".join(paths)
    if jsonscan.quote(joined, ascii=False) != f'"{joined}"':
        return [_entry_json(path, entries[path]) for path in paths]
    # No newline either (JSON escapes it): it parts the paths' bytes.
    encoded = "\n".join(paths).encode("utf-8").split(b"\n") if paths else []
    held = list(map(entries.__getitem__, paths))
    lengths, stamps = map(itemgetter(0), held), map(itemgetter(1), held)
    return list(map(ENTRY_JSON.__mod__, zip(encoded, lengths, stamps, strict=True)))


class _Encoded:
    """A metadata blob and the encodings a later write reuses (see `ScopeTree`)."""

    def __init__(self, parts: dict[str, bytes]) -> None:
        self.parts = parts
        self.blob = b""
        self.ordered: list[str] = []
        self.listed: list[bytes] = []
        self.positions: dict[str, int] | None = None


def build_scope_tree(
    store: Store,
    digest: str,
    entries: "Mapping[str, Entry]",
    clock: int,
    blobs: "Mapping[str, str]",
    base: ScopeTree | None = None,
    changed: "Iterable[str] | None" = None,
) -> ScopeTree:
    """Write the trees and metadata of a scope; the returned ScopeTree names the root tree.

    BLOBS maps every path of ENTRIES to a blob already in the store (write new texts with
    `store.write_object("blob", text.encode())`). With BASE (the scope this one was
    derived from), directories whose files did not change keep their tree ids and are
    not serialized or hashed again. CHANGED, when given with a stored BASE, says that
    ENTRIES and BLOBS have exactly BASE's paths and differ from BASE's at most at these
    paths (what a command that adds, removes and moves no file knows): nothing else is
    compared. Nothing here moves a ref.
    """
    if changed is not None and base is not None and base.tree is not None:
        if base.raws is not None and base.slots is not None:
            return _patch_changed(store, digest, entries, clock, dict(blobs), base, changed)
    # Only ENTRIES' paths, copied in C when they are exactly BLOBS' (a write that adds and
    # removes no file).
    blobs = dict(blobs) if blobs.keys() == entries.keys() else {p: blobs[p] for p in entries}
    if base is not None and base.tree is not None and entries.keys() == base.entries.keys():
        if base.raws is not None and base.slots is not None:
            return _patch_changed(store, digest, entries, clock, blobs, base)
        return _rebuild_changed(store, digest, entries, clock, blobs, base)
    directories = implied_directories(entries)
    if base is None:
        dirty = directories
    else:
        changed = {p for p in blobs.keys() | base.blobs.keys() if blobs.get(p) != base.blobs.get(p)}
        dirty = implied_directories(changed) & directories
    children = _children(directories, blobs)
    subtrees: dict[str, str] = {}
    # The raw trees are known for every directory when each one is written here or
    # reused from a BASE that knows its own.
    known = True
    raws = dict(base.raws) if base is not None and base.raws is not None else {}
    slots = dict(base.slots) if base is not None and base.slots is not None else {}

    def emit(directory: str) -> None:
        nonlocal known
        # Subdirectories first; an unchanged one keeps its id (a later writer reuses it).
        for child in children[directory]:
            if child in children:
                emit(child)
        if directory not in dirty and base is not None and directory in base.subtrees:
            subtrees[directory] = base.subtrees[directory]
            known = known and directory in raws
        else:
            raw, placed = _write_tree(store, children[directory], subtrees, blobs)
            subtrees[directory] = store.write_object("tree", raw)
            raws[directory] = raw
            slots.update(placed)

    emit(MEMORY_ROOT)
    scope = _finish(store, digest, entries, clock, blobs, subtrees, base, children)
    if known:
        if len(slots) > 2 * (len(blobs) + len(subtrees)) + 64:
            # Paths and directories gone since: dropped once they outnumber the living.
            slots = {path: slots[path] for path in (*blobs, *subtrees) if path in slots}
            raws = {directory: raws[directory] for directory in subtrees}
        scope.raws, scope.slots = raws, slots
    return scope


def _patch_changed(
    store: Store,
    digest: str,
    entries: "Mapping[str, Entry]",
    clock: int,
    blobs: dict[str, str],
    base: ScopeTree,
    changed: "Iterable[str] | None" = None,
) -> ScopeTree:
    """`build_scope_tree` when the paths are BASE's (a file's content changed, none
    added or removed) and BASE knows its raw trees: each tree above a changed file is
    its raw tree with the new ids put in place (names, modes and order are unchanged),
    deepest first; nothing is walked in proportion to the scope's size but, without
    CHANGED, one comparison of the blob ids, in C."""
    assert base.raws is not None and base.slots is not None
    slots = base.slots
    width = store.hex_length // 2
    raws = dict(base.raws)
    subtrees = dict(base.subtrees)
    if changed is None:
        changed = compress(blobs, map(ne, blobs.values(), map(base.blobs.__getitem__, blobs)))
        changed_entries = None
    else:
        changed_entries = changed = list(changed)
    # Each directory to write again, with the members whose ids changed in it.
    members: dict[str, list[str]] = {}
    for path in changed:
        if blobs[path] == base.blobs[path]:
            continue
        while path != MEMORY_ROOT:
            parent = path[: path.rfind("/")]
            pending = members.get(parent)
            members.setdefault(parent, []).append(path)
            if pending is not None:
                break  # its parents are already on the way up
            path = parent
    for directory in sorted(members, key=len, reverse=True):  # a child is longer than its parent
        raw = bytearray(raws[directory])
        for member in members[directory]:
            slot = slots[member]
            raw[slot : slot + width] = bytes.fromhex(
                subtrees[member] if member in subtrees else blobs[member]
            )
        raws[directory] = bytes(raw)
        subtrees[directory] = store.write_object("tree", raws[directory])
    scope = _finish(
        store, digest, entries, clock, blobs, subtrees, base, base.children, changed_entries
    )
    scope.raws, scope.slots = raws, slots
    return scope


def _rebuild_changed(
    store: Store,
    digest: str,
    entries: "Mapping[str, Entry]",
    clock: int,
    blobs: dict[str, str],
    base: ScopeTree,
) -> ScopeTree:
    """`build_scope_tree` when the paths are BASE's (a file's content changed, none
    added or removed) but its raw trees are not known: only the trees above a changed
    file are written again, deepest first."""
    children = base.children if base.children is not None else _children(base.subtrees, blobs)
    changed = compress(blobs, map(ne, blobs.values(), map(base.blobs.__getitem__, blobs)))
    dirty = implied_directories(changed)
    subtrees = dict(base.subtrees)
    for directory in sorted(dirty, key=len, reverse=True):  # a child is longer than its parent
        raw, _ = _write_tree(store, children[directory], subtrees, blobs)
        subtrees[directory] = store.write_object("tree", raw)
    return _finish(store, digest, entries, clock, blobs, subtrees, base, children)


def _children(directories: "Iterable[str]", blobs: "Mapping[str, str]") -> dict[str, list[str]]:
    """Each directory's files and subdirectories (their full paths)."""
    children: dict[str, list[str]] = {directory: [] for directory in directories}
    for path in (*children, *blobs):
        if path != MEMORY_ROOT:
            children[path[: path.rfind("/")]].append(path)
    return children


def _write_tree(
    store: Store, members: list[str], subtrees: "Mapping[str, str]", blobs: "Mapping[str, str]"
) -> tuple[bytes, list[tuple[str, int]]]:
    """The raw tree of a directory whose MEMBERS (full paths) are files of BLOBS or
    directories whose trees SUBTREES already names, and where each member's id sits."""
    items = []
    for member in members:
        name = member[member.rfind("/") + 1 :].encode("utf-8")
        if member in subtrees:
            items.append((name, TREE_MODE, subtrees[member], member))
        else:
            items.append((name, FILE_MODE, blobs[member], member))
    return _tree_bytes(items)


def _finish(
    store: Store,
    digest: str,
    entries: "Mapping[str, Entry]",
    clock: int,
    blobs: dict[str, str],
    subtrees: dict[str, str],
    base: ScopeTree | None,
    children: dict[str, list[str]] | None,
    changed: "Iterable[str] | None" = None,
) -> ScopeTree:
    """Write the metadata and the root tree over SUBTREES; the new ScopeTree."""
    encoded = _metadata(digest, entries, clock, base, changed)
    root = serialize_tree(
        [
            (METADATA_NAME.encode(), FILE_MODE, store.write_object("blob", encoded.blob)),
            (FILES_NAME.encode(), TREE_MODE, subtrees[MEMORY_ROOT]),
        ]
    )
    scope = ScopeTree(store.write_object("tree", root), dict(entries), clock, blobs, subtrees)
    scope.parts, scope.ordered, scope.children = encoded.parts, encoded.ordered, children
    scope.listed, scope.positions = encoded.listed, encoded.positions
    return scope


def write_scope_tree(
    store: Store,
    digest: str,
    entries: "Mapping[str, Entry]",
    clock: int,
    blobs: "Mapping[str, str]",
    base: ScopeTree | None = None,
) -> str:
    """`build_scope_tree` returning only the root tree id (to put in a scope ref)."""
    return build_scope_tree(store, digest, entries, clock, blobs, base).tree or ""


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
        self._named = False  # whether this memory has made sure its name is recorded
        self._lock = allocate_lock()

    @property
    def backend(self) -> str:
        """Which store serves this memory: "in-process" (Git's files read and written here)
        or "plumbing" (git processes)."""
        return self._store.kind

    def close(self) -> None:
        self._store.close()

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
                    time.sleep(0.001)
                continue
            if self._store.read_ref(self.ref) != observed:
                lost += 1
                if lost >= MAX_CAS_ATTEMPTS:
                    raise MemoryFailure("CONFLICT", "Memory changed repeatedly while writing.")
                # Back off with jitter, longer after each lost race, so writers spread out.
                history_commits.pause(0.001 * min(2**lost, 64))
                continue
            if watch.present():  # a live writer holds the ref: wait for it, unhurried
                time.sleep(0.005)
                continue
            contended += 1
            if contended >= MAX_CAS_ATTEMPTS:
                raise StoreError("STORAGE_ERROR", "Git could not update the memory ref.")
            history_commits.pause()

    def _repair(self, broken: str) -> bool | None:
        """The scope ref names objects that are gone: a writer was killed after moving
        it while a `git gc --prune=now` removed what it had just written. That write was
        never acknowledged; every acknowledged one is in the history. Move the ref back
        to the newest complete state (one line says so). A live writer holds the history
        lock until its objects are safe, so the move is made under that lock and only if
        the objects are still missing: None while the lock is held, False if no complete
        state is found."""
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
    """Open the scope SCOPE names: a name, or the full digest or a unique digest prefix
    (six hex digits or more) of a scope stored here. A name wins when its scope exists;
    a name no scope has yet opens that new scope."""
    memory = GitMemory(repository_path, scope, limits)
    if memory._store.read_ref(memory.ref) is None and len(scope) >= MIN_PREFIX:
        resolved = resolve_scope(memory._store, scope, existing=False)
        if resolved.digest != memory.digest:
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
    """
    store = gitstore.open_store(os.path.realpath(repository_path))
    try:
        known = names(store)
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
            try:
                scope = read_scope_tree(store, value, digest, None)
                item["files"] = len(scope.entries)
                item["bytes"] = sum(entry.byte_length for entry in scope.entries.values())
            except MemoryFailure as error:
                item["error"] = error.message
            found.append(item)
        return found
    finally:
        store.close()
