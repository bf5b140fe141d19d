"""Stands in for the `json` package: reads and writes JSON as it does, without importing it.

Why: `import json` imports `re` (and with it `enum`), a large part of the start of a
one-shot command, which reads one metadata blob and perhaps `--limits` and may print its
result as JSON (docs/benchmarks.md). The `json` package itself reads with CPython's C
scanner and quotes strings with its C functions (`_json`); this module calls them
directly. Any text they do not read whole goes to `json.loads`, and any value `dumps`
does not know to `json.dumps`, so errors, and their messages, stay the package's own. An
interpreter without `_json` uses the package throughout.

Held equal to `json` by tests/test_lean.py (reading, quoting, writing).
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

try:
    from _json import encode_basestring, encode_basestring_ascii, make_scanner
except ImportError:  # not CPython: the package's own functions
    from json.encoder import encode_basestring, encode_basestring_ascii

    make_scanner = None

WHITESPACE = " \t\n\r"  # JSON's, which json.loads skips around the value
CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Settings:
    """What the C scanner reads from a `json.JSONDecoder`: json.loads's defaults."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int

    def __init__(self, parse_constant: "Callable[[str], Any]") -> None:
        self.parse_constant = parse_constant


def _scanner(parse_constant: "Callable[[str], Any]") -> "Callable[[str, int], Any] | None":
    return make_scanner(_Settings(parse_constant)) if make_scanner is not None else None


def _reject_constant(name: str) -> "Any":
    raise ValueError(f"not JSON: {name}")


_SCAN = _scanner(CONSTANTS.__getitem__)
_SCAN_STRICT = _scanner(_reject_constant)


def loads(text: str, *, constants: bool = True) -> "Any":
    """`json.loads(TEXT)`: the same value, or the same error. With CONSTANTS False,
    NaN and ±Infinity (which JSON does not have) are refused with a ValueError."""
    scan = _SCAN if constants else _SCAN_STRICT
    if scan is not None and not text.startswith("\ufeff"):
        start = len(text) - len(text.lstrip(WHITESPACE))
        try:
            value, end = scan(text, start)
        except Exception:  # whatever it is, the package says it below
            # The scanner reports a malformed text with json.decoder's error class, and
            # without the package imported it cannot (a SystemError): read it again.
            pass
        else:
            if not text[end:].strip(WHITESPACE):
                return value
    import json

    if constants:
        return json.loads(text)
    return json.loads(text, parse_constant=_reject_constant)


def quote(text: str, *, ascii: bool = True) -> str:
    """`json.dumps(TEXT)` of a string (with ASCII False: `ensure_ascii=False`)."""
    return encode_basestring_ascii(text) if ascii else encode_basestring(text)


def dumps(value: "Any") -> str:
    """`json.dumps(VALUE, ensure_ascii=False, indent=2)`, the same text, for the JSON a
    command prints (dicts with string keys, lists, strings, numbers, booleans, None)."""
    parts: list[str] = []
    try:
        whole = make_scanner is not None and _written(value, parts, "\n")
    except RecursionError:
        whole = False
    if whole:
        return "".join(parts)
    import json  # a value of another kind, NaN, a cycle: the package's text or error

    return json.dumps(value, ensure_ascii=False, indent=2)


def _written(value: "Any", parts: list[str], newline: str) -> bool:
    """Append VALUE's JSON to PARTS (NEWLINE: a line break and the current indent), as
    json.dumps writes it; False for anything it would write otherwise or refuse."""
    kind = type(value)
    if kind is str:
        parts.append(encode_basestring(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif kind is int:
        parts.append(int.__repr__(value))
    elif kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            return False  # json writes NaN and Infinity: the package does
        parts.append(float.__repr__(value))
    elif kind is list or kind is tuple:
        if not value:
            parts.append("[]")
            return True
        inner = newline + "  "
        parts.append("[")
        for index, item in enumerate(value):
            parts.append(inner if index == 0 else "," + inner)
            if not _written(item, parts, inner):
                return False
        parts.append(newline + "]")
    elif kind is dict:
        if not value:
            parts.append("{}")
            return True
        inner = newline + "  "
        parts.append("{")
        for index, (key, item) in enumerate(value.items()):
            if type(key) is not str:
                return False  # json turns other keys into strings: the package does
            parts.append((inner if index == 0 else "," + inner) + encode_basestring(key) + ": ")
            if not _written(item, parts, inner):
                return False
        parts.append(newline + "}")
    else:
        return False
    return True
