"""A scope as stored in format 1: its trees and metadata, read and validated.

The scope ref points at a root tree holding `.obversa-memory.json` (compact JSON metadata)
and `memories` (the files, as 100644 blobs of raw UTF-8); see memory/git_memory.py for
the whole format. Validation (UNSAFE_STORAGE) of the ref's root tree, the metadata and the
full listing of the `memories` trees happens here; a file's blob is checked (type, UTF-8,
declared length) when it is read (`read_blob_text`).
"""

from itertools import repeat

from git_obversa.lean import jsonscan
from git_obversa.lean.builtin import itemgetter
from git_obversa.memory import gitstore, store_git
from git_obversa.memory.engine import Entry
from git_obversa.memory.paths import are_stored_paths, is_segment, is_stored_path
from git_obversa.memory.port import (
    MAX_SAFE_INTEGER,
    MEMORY_ROOT,
    MemoryLimits,
    is_safe_integer,
)
from git_obversa.memory.store_errors import MissingObject, StoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

METADATA_NAME = ".obversa-memory.json"
FILES_NAME = "memories"
FILE_MODE = 0o100644
TREE_MODE = 0o040000

Store = gitstore.FileStore | gitstore.PlumbingStore


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
    return tree_bytes([(*entry, "") for entry in entries])[0]


def _tree_order(entry: tuple[bytes, int, str, str]) -> bytes:
    return entry[0] + b"/" if entry[1] == TREE_MODE else entry[0]


def tree_bytes(entries: list[tuple[bytes, int, str, str]]) -> tuple[bytes, list[tuple[str, int]]]:
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
    lengths = list(map(itemgetter(0), entries.values()))  # byte lengths
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
    checked field by field across all entries at once; else None."""
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
    # Each path's parent (a scope's files share a few), then its ancestors.
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
