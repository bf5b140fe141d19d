"""The command engine: the one place the semantics of the six commands live.

An adapter hands the engine a `Snapshot` (the metadata of every file, plus a way to read
one file's text) and gets back the result and, for a successful write, a `Change` to
store. The engine reads only the texts a command needs, so an adapter that loads texts
lazily pays for the files a command touches, not for the size of the scope.
"""

from git_obversa.lean.builtin import Mapping, itemgetter
from git_obversa.memory.paths import has_allowed_extension, validate_path
from git_obversa.memory.port import (
    COMMANDS,
    MAX_SAFE_INTEGER,
    MEMORY_ROOT,
    MemoryFailure,
    MemoryLimits,
    Record,
    ancestors,
    field,
    is_safe_integer,
    is_well_formed,
    logical_lines,
    normalize_command,
    success,
    utf8_length,
)
from git_obversa.memory.port import failure as failure_result

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, Protocol

    class Snapshot(Protocol):
        """What an adapter hands the engine: every file's metadata, and its texts."""

        entries: "Mapping[str, Entry]"
        clock: int  # the last stamp handed out; 0 for a fresh scope

        def read(self, path: str) -> str: ...

    Outcome = tuple[dict[str, Any], "Change | None"]


class Entry(Record):
    """What the engine knows of a stored file without reading it: its byte length and
    `written`, the write-clock stamp of its last create/str_replace/insert."""

    __slots__ = ()
    _fields = ("byte_length", "written")
    byte_length = field(0)
    written = field(1)

    def __new__(cls, byte_length: int, written: int) -> "Entry":
        return tuple.__new__(cls, (byte_length, written))


class Change:
    """A successful write: the new metadata and where each new file's text comes from."""

    def __init__(
        self,
        entries: dict[str, Entry],
        clock: int,
        written: dict[str, str] | None = None,
        moved: dict[str, str] | None = None,
    ) -> None:
        self.entries = entries
        self.clock = clock
        self.written = written if written is not None else {}  # path -> new text
        self.moved = moved if moved is not None else {}  # new path -> old path


def execute(snapshot: "Snapshot", command: "Any", limits: MemoryLimits) -> "Outcome":
    """Apply COMMAND to SNAPSHOT: (result, change to store or None)."""
    try:
        if not isinstance(command, Mapping):
            raise MemoryFailure("INVALID_COMMAND", "Memory command must be an object.")
        name = command.get("command")
        if name not in COMMANDS:
            raise MemoryFailure("INVALID_COMMAND", "The memory command is not supported.")
        value, change = _HANDLERS[name](snapshot, normalize_command(command), limits)
        return success(name, value), change
    except MemoryFailure as error:
        return failure_result(command, error), None


def is_directory(entries: Mapping[str, Entry], path: str) -> bool:
    if path == MEMORY_ROOT:
        return True
    prefix = path + "/"
    return any(stored.startswith(prefix) for stored in entries)


def _view(snapshot: "Snapshot", args: "dict[str, Any]", limits: MemoryLimits) -> "Outcome":
    path = validate_path(args.get("path"))
    view_range = args.get("view_range")
    if path in snapshot.entries:
        text = snapshot.read(path)
        lines = logical_lines(text)
        total = len(lines)
        if view_range is None:
            start, end = (1, total) if total else (0, 0)
        else:
            start, end = _checked_range(view_range, total, path)
            tail = "\n" if end < total or text.endswith(("\n", "\r")) else ""
            text = "\n".join(lines[start - 1 : end]) + tail
        value = {
            "kind": "file",
            "path": path,
            "text": text,
            "byte_length": utf8_length(text),
            "lines": {"start": start, "end": end, "total": total},
        }
        return value, None
    if not is_directory(snapshot.entries, path):
        raise MemoryFailure("NOT_FOUND", "The memory path does not exist.", path)
    if view_range is not None:
        raise MemoryFailure("INVALID_RANGE", "A directory view cannot have a line range.", path)
    prefix = path + "/"
    children: dict[str, str] = {}
    for stored in snapshot.entries:
        if stored.startswith(prefix):
            name, slash, _ = stored[len(prefix) :].partition("/")
            children[name] = "directory" if slash else "file"
    entries = [
        {"name": name, "path": prefix + name, "kind": kind}
        for name, kind in sorted(children.items())
    ]
    return {"kind": "directory", "path": path, "entries": entries}, None


def _checked_range(view_range: "Any", total: int, path: str) -> tuple[int, int]:
    if not isinstance(view_range, (list, tuple)) or len(view_range) != 2:
        raise MemoryFailure("INVALID_RANGE", "view_range must contain two line numbers.", path)
    start, end = view_range
    if not (is_safe_integer(start) and is_safe_integer(end)):
        raise MemoryFailure("INVALID_RANGE", "Line numbers must be safe integers.", path)
    if end == -1:
        end = total
    if start < 1 or end < start or end > total:
        raise MemoryFailure(
            "INVALID_RANGE",
            "The requested line range is outside the file.",
            path,
            {"total_lines": total},
        )
    return start, end


def _create(snapshot: "Snapshot", args: "dict[str, Any]", limits: MemoryLimits) -> "Outcome":
    path = validate_path(args.get("path"))
    if path == MEMORY_ROOT:
        raise MemoryFailure("ROOT_PROTECTED", "The memory root cannot be a file.", path)
    text = args.get("file_text")
    if not is_well_formed(text):
        raise MemoryFailure("INVALID_ARGUMENT", "file_text must be a well-formed string.", path)
    if not has_allowed_extension(path):
        raise MemoryFailure("INVALID_EXTENSION", "The file extension is not allowed.", path)
    entries = snapshot.entries
    if any(ancestor in entries for ancestor in ancestors(path)) or is_directory(entries, path):
        raise MemoryFailure("PATH_CONFLICT", "A file and directory cannot use the same path.", path)
    overwritten = path in entries
    # Beyond the memory tool: a compare-and-set precondition for read-modify-write
    # callers (consolidate). A str must equal the current text; None means "absent".
    if "expected_text" in args:
        current = snapshot.read(path) if overwritten else None
        if current != args["expected_text"]:
            raise MemoryFailure("CONFLICT", "The file changed since it was read.", path)
    byte_length, evicted, change = _write(snapshot, path, text, limits)
    value = {
        "path": path,
        "byte_length": byte_length,
        "evicted": evicted,
        "overwritten": overwritten,
    }
    return value, change


def _existing_file(snapshot: "Snapshot", path: str) -> str:
    """The text of the file at PATH, or the error a write to a non-file gets."""
    if path in snapshot.entries:
        return snapshot.read(path)
    if is_directory(snapshot.entries, path):
        raise MemoryFailure("PATH_CONFLICT", "The memory path is a directory.", path)
    raise MemoryFailure("NOT_FOUND", "The memory file does not exist.", path)


def _str_replace(snapshot: "Snapshot", args: "dict[str, Any]", limits: MemoryLimits) -> "Outcome":
    path = validate_path(args.get("path"))
    old, new = args.get("old_str"), args.get("new_str")
    if not (is_well_formed(old) and old and is_well_formed(new)):
        raise MemoryFailure(
            "INVALID_ARGUMENT",
            "Replace text must be well-formed strings with non-empty old_str.",
            path,
        )
    text = _existing_file(snapshot, path)
    first = text.find(old)
    if first < 0:
        raise MemoryFailure("MATCH_NOT_FOUND", "old_str was not found.", path)
    if text.find(old, first + len(old)) >= 0:
        raise MemoryFailure("MATCH_NOT_UNIQUE", "old_str occurs more than once.", path)
    replaced = text[:first] + new + text[first + len(old) :]
    byte_length, evicted, change = _write(snapshot, path, replaced, limits)
    return {"path": path, "byte_length": byte_length, "evicted": evicted}, change


def _insert(snapshot: "Snapshot", args: "dict[str, Any]", limits: MemoryLimits) -> "Outcome":
    path = validate_path(args.get("path"))
    insert_text = args.get("insert_text")
    if not is_well_formed(insert_text):
        raise MemoryFailure("INVALID_ARGUMENT", "insert_text must be a well-formed string.", path)
    slot = args.get("insert_line")
    if not is_safe_integer(slot, minimum=0):
        raise MemoryFailure("INVALID_RANGE", "insert_line must be a zero-based line slot.", path)
    lines = logical_lines(_existing_file(snapshot, path))
    if slot > len(lines):
        raise MemoryFailure(
            "INVALID_RANGE",
            "insert_line is outside the file.",
            path,
            {"max_insert_line": len(lines)},
        )
    lines[slot:slot] = logical_lines(insert_text)
    byte_length, evicted, change = _write(snapshot, path, "\n".join(lines) + "\n", limits)
    return {"path": path, "byte_length": byte_length, "evicted": evicted}, change


def _write(
    snapshot: "Snapshot", path: str, text: str, limits: MemoryLimits
) -> tuple[int, list[str], Change]:
    """Stamp PATH with TEXT and evict least-recently-written files until the limits hold."""
    size = utf8_length(text)
    details = {
        "byte_length": size,
        "max_file_bytes": limits.max_file_bytes,
        "max_total_bytes": limits.max_total_bytes,
    }
    if size > limits.max_file_bytes or size > limits.max_total_bytes:
        raise MemoryFailure(
            "LIMIT_EXCEEDED", "The target file exceeds a memory limit.", path, details
        )
    if snapshot.clock >= MAX_SAFE_INTEGER:
        raise MemoryFailure("STORAGE_ERROR", "Memory write clock is exhausted.")
    stamp = snapshot.clock + 1
    entries = dict(snapshot.entries)
    entries[path] = Entry(size, stamp)
    total = sum(map(itemgetter(0), entries.values()))  # the byte lengths
    evicted: list[str] = []
    candidates: list[tuple[int, str]] = []
    while len(entries) > limits.max_files or total > limits.max_total_bytes:
        if not evicted:  # sorted only when something must go: the rest of writes skip it
            candidates = sorted(
                (entry.written, stored) for stored, entry in entries.items() if stored != path
            )
        if len(evicted) == len(candidates):
            raise MemoryFailure(
                "LIMIT_EXCEEDED",
                "The write cannot fit without evicting its target.",
                path,
                details,
            )
        victim = candidates[len(evicted)][1]
        total -= entries.pop(victim).byte_length
        evicted.append(victim)
    return size, evicted, Change(entries=entries, clock=stamp, written={path: text})


def _delete(snapshot: "Snapshot", args: "dict[str, Any]", limits: MemoryLimits) -> "Outcome":
    path = validate_path(args.get("path"))
    if path == MEMORY_ROOT:
        raise MemoryFailure("ROOT_PROTECTED", "The memory root cannot be deleted.", path)
    entries = dict(snapshot.entries)
    if path in entries:
        kind, removed = "file", [path]
    else:
        kind, removed = "directory", [p for p in entries if p.startswith(path + "/")]
    if not removed:
        raise MemoryFailure("NOT_FOUND", "The memory path does not exist.", path)
    freed = sum(entries.pop(stored).byte_length for stored in removed)
    value = {"path": path, "kind": kind, "deleted_files": len(removed), "freed_bytes": freed}
    return value, Change(entries=entries, clock=snapshot.clock)


def _rename(snapshot: "Snapshot", args: "dict[str, Any]", limits: MemoryLimits) -> "Outcome":
    old = validate_path(args.get("old_path"))
    new = validate_path(args.get("new_path"))
    if MEMORY_ROOT in (old, new):
        raise MemoryFailure("ROOT_PROTECTED", "The memory root cannot be renamed.", old)
    entries = snapshot.entries
    if old in entries:
        kind, sources = "file", [old]
    else:
        kind, sources = "directory", sorted(p for p in entries if p.startswith(old + "/"))
    if not sources:
        raise MemoryFailure("NOT_FOUND", "The memory path does not exist.", old)
    if new == old or new in entries or is_directory(entries, new):
        raise MemoryFailure("ALREADY_EXISTS", "The destination already exists.", new)
    if kind == "directory" and new.startswith(old + "/"):
        raise MemoryFailure("CONFLICT", "A directory cannot move inside itself.", new)
    if kind == "file" and not has_allowed_extension(new):
        raise MemoryFailure("INVALID_EXTENSION", "The file extension is not allowed.", new)
    # Any file above the destination blocks it, even the source itself (`x.md` cannot
    # become `x.md/y.md`).
    if any(ancestor in entries for ancestor in ancestors(new)):
        raise MemoryFailure("PATH_CONFLICT", "A destination parent is a file.", new)
    # Every moved path is NEW or lies below it; with nothing stored at or below NEW and
    # no file above it (both checked above), only a moved path's length can be wrong.
    destinations = {new + source[len(old) :]: source for source in sources}
    for destination in destinations:
        validate_path(destination)
    moving = set(sources)
    moved_entries = {p: e for p, e in entries.items() if p not in moving}
    for destination, source in destinations.items():
        moved_entries[destination] = entries[source]
    value = {"old_path": old, "new_path": new, "kind": kind, "moved_files": len(sources)}
    return value, Change(entries=moved_entries, clock=snapshot.clock, moved=destinations)


_HANDLERS: "dict[str, Callable[[Snapshot, dict[str, Any], MemoryLimits], Outcome]]" = {
    "view": _view,
    "create": _create,
    "str_replace": _str_replace,
    "insert": _insert,
    "delete": _delete,
    "rename": _rename,
}
