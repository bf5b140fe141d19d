"""A scope written in format 1: its files' blobs, directory trees, metadata and root tree.

A writer passes the `ScopeTree` it read (memory/scope_tree.py) as the base; only the
trees of directories whose content changed are written again, from the base's raw trees
with the new ids put in place where no file is added or removed.
"""

from itertools import compress

from git_obversa.lean import jsonscan
from git_obversa.lean.builtin import is_not, itemgetter, ne
from git_obversa.memory.engine import Entry
from git_obversa.memory.port import (
    MEMORY_ROOT,
)
from git_obversa.memory.scope_tree import (
    FILE_MODE,
    FILES_NAME,
    METADATA_NAME,
    TREE_MODE,
    ScopeTree,
    Store,
    implied_directories,
    serialize_tree,
    tree_bytes,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


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
        # the map and replaces the entries it changes), found by identity.
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
        sum(map(itemgetter(0), entries.values())),  # byte lengths
        b",".join(listed),
    )


ENTRY_JSON = b'{"path":"%s","byteLength":%d,"written":%d}'


def _entries_json(paths: list[str], entries: "Mapping[str, Entry]") -> list[bytes]:
    """`_entry_json` of each of PATHS, formatted all at once when no path holds a
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
        return _same_paths(store, digest, entries, clock, dict(blobs), base, changed)
    # Only ENTRIES' paths, copied whole when they are exactly BLOBS' (a write that adds and
    # removes no file).
    blobs = dict(blobs) if blobs.keys() == entries.keys() else {p: blobs[p] for p in entries}
    if base is not None and base.tree is not None and entries.keys() == base.entries.keys():
        return _same_paths(store, digest, entries, clock, blobs, base)
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


def _same_paths(
    store: Store,
    digest: str,
    entries: "Mapping[str, Entry]",
    clock: int,
    blobs: dict[str, str],
    base: ScopeTree,
    changed: "Iterable[str] | None" = None,
) -> ScopeTree:
    """`build_scope_tree` when the paths are BASE's (a file's content changed, none
    added or removed): only the trees above a changed file are written again, deepest
    first. Where BASE knows its raw trees, each is its raw tree with the new ids put in
    place (names, modes and order are unchanged), so nothing is walked in proportion to
    the scope's size but, without CHANGED, one comparison of the blob ids; otherwise it
    is serialized again from its members."""
    raws = dict(base.raws) if base.raws is not None and base.slots is not None else None
    slots = base.slots or {}
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
    subtrees = dict(base.subtrees)
    children = base.children
    if raws is None and children is None:
        children = _children(base.subtrees, blobs)
    width = store.hex_length // 2
    for directory in sorted(members, key=len, reverse=True):  # a child is longer than its parent
        if raws is None:
            tree, _ = _write_tree(store, children[directory], subtrees, blobs)
        else:
            raw = bytearray(raws[directory])
            for member in members[directory]:
                slot = slots[member]
                raw[slot : slot + width] = bytes.fromhex(
                    subtrees[member] if member in subtrees else blobs[member]
                )
            raws[directory] = tree = bytes(raw)
        subtrees[directory] = store.write_object("tree", tree)
    scope = _finish(store, digest, entries, clock, blobs, subtrees, base, children, changed_entries)
    if raws is not None:
        scope.raws, scope.slots = raws, slots
    return scope


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
    return tree_bytes(items)


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
