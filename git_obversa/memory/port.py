"""The memory port: what every adapter accepts and returns (SPEC.md §1).

Commands are plain dicts with the field names of Anthropic's memory tool; the original
implementation's camelCase names are accepted as aliases. Results are
`{"ok": True, "command", "value"}` or `{"ok": False, "command", "error": {...}}`.
This module holds the vocabulary (codes, limits, paths, lines); `engine.py` holds the
semantics of the six commands.
"""

from git_obversa.lean.builtin import Mapping
from git_obversa.lean.record import Record, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MEMORY_ROOT = "/memories"
# The git config key naming the scope a command of the CLI works in when not given one.
SCOPE_KEY = "obversa.scope"
MAX_PATH_BYTES = 1024
MAX_SAFE_INTEGER = 2**53 - 1
ALLOWED_EXTENSIONS = (".txt", ".md", ".json", ".py", ".yaml", ".yml")
# The characters of a path segment: an ASCII letter or digit first, then up to 127 of
# those or "._-" (so never "." or "..").
ALPHANUMERIC = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
SEGMENT_CHARACTERS = ALPHANUMERIC | frozenset("._-")
MAX_SEGMENT = 128
CONTROL_CHARACTERS = frozenset(map(chr, [*range(0x20), 0x7F]))
UNSAFE_CHARACTERS = CONTROL_CHARACTERS | frozenset("\\%")
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
