"""The memory port: what every adapter accepts and returns (SPEC.md §1).

Commands are plain dicts with the field names of Anthropic's memory tool; the original
implementation's camelCase names are accepted as aliases. Results are
`{"ok": True, "command", "value"}` or `{"ok": False, "command", "error": {...}}`.
This module holds the vocabulary (codes, limits, paths, lines); `engine.py` holds the
semantics of the six commands.
"""

# The modules collections.abc and operator re-export, which cost nothing to import:
# `_collections_abc` is loaded with the interpreter (os uses it), `_operator` is built
# in. collections.abc runs the whole collections package first, about a tenth of a
# one-shot memory command's instructions; operator defines a Python twin of every
# function before replacing it with `_operator`'s, another 2 %.
from _collections_abc import Mapping
from _operator import itemgetter
from itertools import repeat

TYPE_CHECKING = False  # typing costs a one-shot command its import
if TYPE_CHECKING:
    from typing import Any

MEMORY_ROOT = "/memories"
# The git config key naming the scope a command of the CLI works in when not given one.
SCOPE_KEY = "obversa.scope"
MAX_PATH_BYTES = 1024
MAX_SAFE_INTEGER = 2**53 - 1
ALLOWED_EXTENSIONS = (".txt", ".md", ".json", ".py", ".yaml", ".yml")
# The characters of a path segment: an ASCII letter or digit first, then up to 127 of
# those or "._-" (so never "." or ".."). Sets, not patterns: a one-shot command that
# imported `re` for them would pay a third of its start (docs/benchmarks.md).
ALPHANUMERIC = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
SEGMENT_CHARACTERS = ALPHANUMERIC | frozenset("._-")
MAX_SEGMENT = 128
INVALID_SEGMENT = "The memory path contains an invalid segment."
SEGMENT_RULE = "each name starts with a letter or digit; then letters, digits, '.', '_', '-'"
CONTROL_CHARACTERS = frozenset(map(chr, [*range(0x20), 0x7F]))
UNSAFE_CHARACTERS = CONTROL_CHARACTERS | frozenset("\\%")
_FILE_PATH_CHARACTERS = SEGMENT_CHARACTERS | {"/"}
_FILE_ROOT = MEMORY_ROOT + "/"
_JOINED_PATH_BYTES = "".join(sorted(_FILE_PATH_CHARACTERS | {"\n"})).encode("ascii")
COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")

ERROR_CODES = (
    "INVALID_COMMAND",
    "INVALID_ARGUMENT",
    "INVALID_PATH",
    "ROOT_PROTECTED",
    "INVALID_EXTENSION",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PATH_CONFLICT",
    "INVALID_RANGE",
    "MATCH_NOT_FOUND",
    "MATCH_NOT_UNIQUE",
    "LIMIT_EXCEEDED",
    "CONFLICT",
    "UNSAFE_STORAGE",
    "STORAGE_ERROR",
)

# The original's camelCase limit names -> ours.
LIMIT_ALIASES = {
    "maxFileBytes": "max_file_bytes",
    "maxTotalBytes": "max_total_bytes",
    "maxFiles": "max_files",
}

# The original's camelCase field names -> ours, per command.
FIELD_ALIASES: dict[str, dict[str, str]] = {
    "view": {"viewRange": "view_range"},
    "create": {"text": "file_text"},
    "str_replace": {"oldText": "old_str", "newText": "new_str"},
    "insert": {"insertLine": "insert_line", "text": "insert_text"},
    "delete": {},
    "rename": {"oldPath": "old_path", "newPath": "new_path"},
}


class MemoryFailure(Exception):
    """A command failed with one of the fifteen codes; becomes an error result."""

    def __init__(
        self,
        code: str,
        message: str,
        path: str | None = None,
        details: "dict[str, Any] | None" = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path
        self.details = details

    def error(self) -> "dict[str, Any]":
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.path is not None:
            error["path"] = self.path
        if self.details is not None:
            error["details"] = self.details
        return error


def success(command: str, value: "dict[str, Any]") -> "dict[str, Any]":
    return {"ok": True, "command": command, "value": value}


def failure(command: "Any", error: MemoryFailure) -> "dict[str, Any]":
    return {"ok": False, "command": command_name(command), "error": error.error()}


def command_name(command: "Any") -> str:
    """The name a result reports: the supplied string, or "unknown"."""
    if isinstance(command, Mapping) and isinstance(command.get("command"), str):
        return command["command"]
    return "unknown"


class Record(tuple):
    """A tuple whose items have names (`_fields`), each read as an attribute: what
    `collections.namedtuple` makes, for a subclass that writes its own `__new__` with
    those names as parameters. (Not namedtuple: the collections package costs a one-shot
    command a tenth of its start; not a dataclass: dataclasses and typing cost more.)"""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({shown})"

    def __getnewargs__(self) -> "tuple[Any, ...]":
        return tuple(self)  # copy and pickle build it again from its items


def field(index: int, doc: str = "") -> property:
    """Item INDEX of a Record, as an attribute."""
    return property(itemgetter(index), doc=doc)


DEFAULT_LIMITS = (65536, 1048576, 256)  # max_file_bytes, max_total_bytes, max_files


class MemoryLimits(Record):
    """The limits a memory enforces; immutable."""

    __slots__ = ()
    _fields = ("max_file_bytes", "max_total_bytes", "max_files")
    max_file_bytes = field(0)
    max_total_bytes = field(1)
    max_files = field(2)

    def __new__(
        cls,
        max_file_bytes: int = DEFAULT_LIMITS[0],
        max_total_bytes: int = DEFAULT_LIMITS[1],
        max_files: int = DEFAULT_LIMITS[2],
    ) -> "MemoryLimits":
        limits = tuple.__new__(cls, (max_file_bytes, max_total_bytes, max_files))
        for name, value in zip(cls._fields, limits, strict=True):
            if not is_safe_integer(value, minimum=1):
                raise TypeError(f"{name} must be a positive safe integer.")
        return limits

    @classmethod
    def resolve(cls, limits: "MemoryLimits | Mapping[str, Any] | None") -> "MemoryLimits":
        """Accept None, a MemoryLimits, or a mapping (snake_case or the original camelCase)."""
        if limits is None:
            return cls()
        if isinstance(limits, MemoryLimits):
            return limits
        if not isinstance(limits, Mapping):
            raise TypeError("limits must be a MemoryLimits or a mapping.")
        values = {}
        for key, value in limits.items():
            name = LIMIT_ALIASES.get(key, key)
            if name not in cls._fields:
                raise TypeError(f"unknown memory limit: {key}")
            if value is not None:
                values[name] = value
        return cls(**values)


def is_safe_integer(value: "Any", minimum: int = -MAX_SAFE_INTEGER) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and minimum <= value <= MAX_SAFE_INTEGER
    )


def is_well_formed(text: "Any") -> bool:
    """A str without lone surrogates (which cannot be encoded as UTF-8)."""
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf8_length(text: str) -> int:
    return len(text.encode("utf-8"))


def validate_scope(scope: "Any") -> str:
    if (
        not isinstance(scope, str)
        or not scope.strip()
        or not is_well_formed(scope)
        or not CONTROL_CHARACTERS.isdisjoint(scope)
    ):
        raise TypeError("scope must be a non-empty, well-formed string without control characters.")
    return scope


def validate_path(path: "Any") -> str:
    """The path rules of SPEC §1.5, in their order; returns the path."""
    if not isinstance(path, str):
        raise MemoryFailure("INVALID_ARGUMENT", "A memory path must be a string.")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise MemoryFailure(
            "INVALID_PATH", "The memory path is too long.", path, {"max_bytes": MAX_PATH_BYTES}
        )
    if path == MEMORY_ROOT:
        return path
    if not path.startswith(MEMORY_ROOT + "/"):
        raise MemoryFailure("INVALID_PATH", "The path must be inside /memories.", path)
    if not UNSAFE_CHARACTERS.isdisjoint(path) or not is_well_formed(path):
        raise MemoryFailure("INVALID_PATH", "The memory path contains an unsafe character.", path)
    for segment in path[len(MEMORY_ROOT) + 1 :].split("/"):
        if not is_segment(segment):
            raise MemoryFailure("INVALID_PATH", INVALID_SEGMENT, path)
    return path


def is_segment(text: str) -> bool:
    """Whether TEXT is one segment of a memory path (or a memory file's name)."""
    return (
        0 < len(text) <= MAX_SEGMENT
        and text[0] in ALPHANUMERIC
        and SEGMENT_CHARACTERS.issuperset(text)
    )


def is_valid_file_path(path: "Any") -> bool:
    """Whether validate_path accepts PATH and PATH is below the root (not the root).

    A store checks every stored path of a scope on each command, so this is
    `is_segment` for every segment at once: only segment characters and "/" (ASCII, so
    bytes = characters), and no segment empty or starting with anything but a letter or
    digit (every other segment character is one of "._-")."""
    return (
        isinstance(path, str)
        and len(path) <= MAX_PATH_BYTES
        and path.startswith(_FILE_ROOT)
        and _FILE_PATH_CHARACTERS.issuperset(path)
        and "//" not in path
        and "/." not in path
        and "/_" not in path
        and "/-" not in path
        and path[-1] != "/"
        and (
            len(path) <= len(_FILE_ROOT) + MAX_SEGMENT
            or max(map(len, path.split("/"))) <= MAX_SEGMENT
        )
    )


def are_stored_paths(paths: "list[Any]") -> bool:
    """Whether every one of PATHS passes `is_valid_file_path` and `has_allowed_extension`
    (the verdict of checking each), checked all at once: the paths joined by newlines (no
    path character) and each rule tested on the whole text, in C. A store checks every
    path of a scope on each command; this is that check for a one-shot command, which
    runs it once, cold."""
    if not paths:
        return True
    if set(map(type, paths)) != {str}:
        return False
    joined = "\n".join(paths)
    if joined.count("\n") != len(paths) - 1:  # a path holding a newline: not a path
        return False
    longest = max(map(len, paths))
    return (
        longest <= MAX_PATH_BYTES
        # Only path characters (ASCII): nothing is left once they are deleted.
        and joined.isascii()
        and not joined.encode("ascii").translate(None, _JOINED_PATH_BYTES)
        and ("\n" + joined).count("\n" + _FILE_ROOT) == len(paths)
        and "//" not in joined
        and "/." not in joined
        and "/_" not in joined
        and "/-" not in joined
        and "/\n" not in joined
        and joined[-1] != "/"
        and (
            longest <= len(_FILE_ROOT) + MAX_SEGMENT
            or max(map(len, joined.replace("\n", "/").split("/"))) <= MAX_SEGMENT
        )
        # An extension holds one dot, its first character: the name ends with it exactly
        # when the name's last dot starts it.
        and all(map(str.endswith, paths, repeat(ALLOWED_EXTENSIONS)))
    )


def has_allowed_extension(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return dot >= 0 and name[dot:] in ALLOWED_EXTENSIONS


def ancestors(path: str) -> list[str]:
    """The directories strictly between the root and PATH, outermost first."""
    parts = path[len(MEMORY_ROOT) + 1 :].split("/")[:-1]
    return [MEMORY_ROOT + "/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def logical_lines(text: str) -> list[str]:
    """SPEC §1.8: "" has no lines; CRLF and CR count as LF; a final newline ends a line."""
    if text == "":
        return []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def normalize_command(command: "Mapping[str, Any]") -> "dict[str, Any]":
    """A copy of COMMAND with the original camelCase field names mapped to ours.

    Where both spellings are given, ours wins unless it is None: absent and None fields
    are the same.
    """
    aliases = FIELD_ALIASES[command["command"]]
    normalized = {key: value for key, value in command.items() if key not in aliases}
    for alias, name in aliases.items():
        if alias in command and normalized.get(name) is None:
            normalized[name] = command[alias]
    return normalized
