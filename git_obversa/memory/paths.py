"""The memory path rule (SPEC §1.5), once.

`validate_path` is the rule: every other check here gives, for every input, the answer of
applying it (tests/test_memory_paths.py holds them equal on valid and hostile paths).
They exist because a store checks every stored path of a scope on each command, and a
corpus every name of a directory it lists, so they judge many paths at once:

- `is_valid_file_path(path)`: `validate_path` accepts PATH and PATH is a file's (below
  the root, not the root);
- `is_stored_path(path)`: that, and the file has an allowed extension;
- `are_stored_paths(paths)`: `is_stored_path` of each, joined by newlines and each
  condition tested on the whole text;
- `are_markdown_names(names)`: each name is one segment of a valid path (no "/") ending
  in ".md", joined by "/" and tested on the whole text.
"""

from itertools import repeat

from git_obversa.memory.port import (
    ALLOWED_EXTENSIONS,
    ALPHANUMERIC,
    MAX_PATH_BYTES,
    MAX_SEGMENT,
    MEMORY_ROOT,
    SEGMENT_CHARACTERS,
    UNSAFE_CHARACTERS,
    MemoryFailure,
    is_well_formed,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_FILE_ROOT = MEMORY_ROOT + "/"
_FILE_PATH_CHARACTERS = SEGMENT_CHARACTERS | {"/"}
_JOINED_PATH_BYTES = "".join(sorted(_FILE_PATH_CHARACTERS | {"\n"})).encode("ascii")
_NAME_BYTES = "".join(sorted(_FILE_PATH_CHARACTERS)).encode("ascii")


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
            raise MemoryFailure(
                "INVALID_PATH", "The memory path contains an invalid segment.", path
            )
    return path


def is_segment(text: str) -> bool:
    """Whether TEXT is one segment of a memory path (or a memory file's name): an ASCII
    letter or digit, then up to MAX_SEGMENT - 1 of those or "._-"."""
    return (
        0 < len(text) <= MAX_SEGMENT
        and text[0] in ALPHANUMERIC
        and SEGMENT_CHARACTERS.issuperset(text)
    )


def has_allowed_extension(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return dot >= 0 and name[dot:] in ALLOWED_EXTENSIONS


def is_valid_file_path(path: "Any") -> bool:
    """Whether `validate_path` accepts PATH and PATH is below the root (not the root).

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


def is_stored_path(path: "Any") -> bool:
    """Whether PATH may be stored: a valid file path with an allowed extension."""
    return is_valid_file_path(path) and has_allowed_extension(path)


def are_stored_paths(paths: "list[Any]") -> bool:
    """Whether every one of PATHS passes `is_stored_path`: the paths joined by newlines (no
    path character) and each condition tested on the whole text."""
    if not paths:
        return True
    if set(map(type, paths)) != {str}:  # not exactly strings: judged one by one
        return all(map(is_stored_path, paths))
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


def are_markdown_names(names: "list[str]") -> bool:
    """Whether every one of NAMES is a segment (`is_segment`) ending in ".md": joined by
    "/" (no segment character), each condition tested on the whole text."""
    if not names:
        return True
    joined = "/".join(names)
    return (
        joined.count("/") == len(names) - 1  # no name holds a "/"
        and joined.isascii()
        and not joined.encode("ascii").translate(None, _NAME_BYTES)
        and joined[:1] in ALPHANUMERIC
        and "//" not in joined
        and "/." not in joined
        and "/_" not in joined
        and "/-" not in joined
        and joined.endswith(".md")
        and joined.count(".md/") == len(names) - 1
        and max(map(len, names)) <= MAX_SEGMENT
    )
