"""The memory tool's text: memory commands in, the strings Anthropic's memory tool returns out.

Claude is trained on the results of the Anthropic SDK's reference memory tool
(`BetaLocalFilesystemMemoryTool`), so an agent-facing adapter (the SDK tool in
`anthropic_memory.py`, the MCP server's `memory` tool) answers with those strings, byte
for byte, wherever Git memory can mean the same thing. The commands themselves run on
any memory of the port (`execute(command) -> result`); this module only renders, plus the
few extra reads a rendering needs (a file's text for a line-numbered snippet). It imports
nothing beyond the standard library and the port, so both adapters share it.

Where Git memory differs, the text says what Git memory did (docs/memory.md, "Agents"):
a directory's size is the total size of the files below it (the filesystem tool shows
the directory's own inode size, 4K on most disks); `create` overwrites unless built with
`overwrite=False`; a write that evicts least-recently-written files to stay within the
limits says so on a second line; paths, extensions and limits Git memory refuses get
their own one-line errors.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import Any

from git_obversa.memory.port import ALLOWED_EXTENSIONS, MEMORY_ROOT, is_safe_integer

LINE_NUMBER_WIDTH = 6  # the SDK numbers lines up to 999,999, right-aligned
MAX_LINES = 999_999
# A command's fields, in the names of Anthropic's memory tool.
FIELDS = {
    "view": ("path", "view_range"),
    "create": ("path", "file_text"),
    "str_replace": ("path", "old_str", "new_str"),
    "insert": ("path", "insert_line", "insert_text"),
    "delete": ("path",),
    "rename": ("old_path", "new_path"),
}
WRITES = ("create", "str_replace", "insert", "delete", "rename")

Execute = Callable[[Mapping[str, Any]], dict[str, Any]]


class MemoryToolError(Exception):
    """A command failed; `text` is what the tool answers (an error tool result)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def run_memory_command(
    execute: Execute, command: Mapping[str, Any], *, overwrite: bool = True
) -> str:
    """Run COMMAND (a memory tool input) with EXECUTE (a memory's `execute`) and return
    the tool's text; raise MemoryToolError with the error text when it fails.

    With OVERWRITE false, `create` refuses an existing file as the SDK's tool does.
    """
    if not isinstance(command, Mapping):
        raise MemoryToolError("The memory command must be an object with a `command` field.")
    name = command.get("command")
    if name not in FIELDS:
        raise MemoryToolError(f"Unknown memory command: {name!r}. Use one of: {', '.join(FIELDS)}.")
    handler = _HANDLERS[name]
    return handler(_Run(execute, command), overwrite)


def _format_size(size: int) -> str:
    """Bytes as the SDK's tool writes them: 0B, 21B, 4K, 1.5K, 2M."""
    if size == 0:
        return "0B"
    unit = min((size.bit_length() - 1) // 10, 3)
    scaled = size / 1024**unit
    number = str(int(scaled)) if scaled == int(scaled) else f"{scaled:.1f}"
    return number + "BKMG"[unit]


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(
        f"{str(first + offset).rjust(LINE_NUMBER_WIDTH)}\t{line}"
        for offset, line in enumerate(lines)
    )


def _evicted(value: dict[str, Any]) -> str:
    evicted = value.get("evicted") or []
    if not evicted:
        return ""
    return (
        "\nTo stay within the memory limits, the least recently written files were removed: "
        + ", ".join(evicted)
    )


class _Run:
    """One command: its fields, the displayed paths and the memory it runs on."""

    def __init__(self, execute: Execute, command: Mapping[str, Any]) -> None:
        self.execute = execute
        self.command = command

    def field(self, name: str) -> Any:
        return self.command.get(name)

    def path(self, name: str = "path") -> tuple[str, str]:
        """(the path as given, for the text; the normalized path to run) of field NAME."""
        given = self.command.get(name)
        if not isinstance(given, str):
            raise MemoryToolError(f"The `{name}` field must be a string path under /memories.")
        if not given.startswith(MEMORY_ROOT):
            raise MemoryToolError(f"Path must start with /memories, got: {given}")
        # Like the SDK's tool, `/memories/a/../b.md` means `/memories/b.md` and a trailing
        # slash is allowed; what leaves the root is refused before anything runs.
        normalized = posixpath.normpath(given)
        if normalized != MEMORY_ROOT and not normalized.startswith(MEMORY_ROOT + "/"):
            raise MemoryToolError(f"Path {given} would escape /memories directory")
        return given, normalized

    def run(self, command: dict[str, Any]) -> dict[str, Any]:
        return self.execute(command)

    def text_of(self, path: str) -> str | None:
        """The text of the file at PATH, or None when it is not a file."""
        result = self.run({"command": "view", "path": path})
        if result["ok"] and result["value"]["kind"] == "file":
            return result["value"]["text"]
        return None

    def fail(self, result: dict[str, Any], shown: str, messages: dict[str, str]) -> MemoryToolError:
        """The error of a failed RESULT: MESSAGES[code] when given, else Git memory's own."""
        error = result["error"]
        code = error["code"]
        if code in messages:
            return MemoryToolError(messages[code])
        if code == "INVALID_EXTENSION":
            target = error.get("path", shown)
            return MemoryToolError(
                f"The path {target} has an extension memory files cannot have; "
                f"use one of {', '.join(ALLOWED_EXTENSIONS)}."
            )
        if code == "LIMIT_EXCEEDED":
            details = error.get("details") or {}
            return MemoryToolError(
                f"The file {shown} would be {details.get('byte_length')} bytes, over the memory "
                f"limits ({details.get('max_file_bytes')} bytes per file, "
                f"{details.get('max_total_bytes')} in all); write less."
            )
        message = error["message"].rstrip(".")
        where = error.get("path")
        return MemoryToolError(f"{message}: {where}" if where else f"{message}.")


def render_view(execute: Execute, command: Mapping[str, Any], *, sizes: bool = True) -> str:
    """The text of a `view` COMMAND on any memory of the port (the corpus too). Without
    SIZES a listing names files and directories only, so no file is read for it."""
    run = _Run(execute, command)
    shown, path = run.path()
    view_range = run.field("view_range")
    result = run.run({"command": "view", "path": path})
    if not result["ok"]:
        missing = f"The path {shown} does not exist. Please provide a valid path."
        raise run.fail(result, shown, {"NOT_FOUND": missing})
    value = result["value"]
    if value["kind"] == "directory":
        return _directory(run, shown, path, sizes)
    lines = value["text"].split("\n")
    if len(lines) > MAX_LINES:
        raise MemoryToolError(f"File {shown} exceeds maximum line limit of 999,999 lines.")
    first = 1
    if view_range:  # the SDK's rule: 1-based, -1 is the end, a range past the end is empty
        if (
            not isinstance(view_range, (list, tuple))
            or len(view_range) != 2
            or not all(is_safe_integer(number) for number in view_range)
        ):
            raise MemoryToolError(
                "Invalid `view_range`: give two line numbers [start, end]; end -1 means "
                "the last line."
            )
        start = max(1, view_range[0]) - 1
        end = len(lines) if view_range[1] == -1 else view_range[1]
        lines, first = lines[start:end], start + 1
    return f"Here's the content of {shown} with line numbers:\n" + _numbered(lines, first)


def _view(run: _Run, overwrite: bool) -> str:
    return render_view(run.execute, run.command)


def _directory(run: _Run, shown: str, path: str, sizes: bool) -> str:
    """The SDK's listing, two levels deep; sizes are bytes of files (all below a directory).
    Without SIZES, only the names, and nothing below the second level is visited."""
    listed: list[tuple[str, str]] = []  # (size, path relative to PATH)

    def walk(directory: str, relative: str, depth: int) -> int:
        result = run.run({"command": "view", "path": directory})
        total = 0
        if not result["ok"] or result["value"]["kind"] != "directory":
            return total  # changed while listing: list what is still there
        for entry in result["value"]["entries"]:
            name = f"{relative}/{entry['name']}" if relative else entry["name"]
            if entry["kind"] == "directory":
                at = len(listed)
                if depth <= 2:
                    listed.append(("", name + "/"))
                if sizes or depth < 2:
                    size = walk(entry["path"], name, depth + 1)
                    if depth <= 2:
                        listed[at] = (_format_size(size), name + "/")
                    total += size
            else:
                if sizes:
                    text = run.text_of(entry["path"])
                    size = len(text.encode("utf-8")) if text is not None else 0
                    total += size
                if depth <= 2:
                    listed.append((_format_size(size) if sizes else "", name))
        return total

    total = walk(path, "", 1)
    if sizes:
        lines = [f"{_format_size(total)}\t{shown}"]
        lines += [f"{size}\t{shown}/{name}" for size, name in listed]
    else:
        lines = [shown] + [f"{shown}/{name}" for _, name in listed]
    header = (
        f"Here're the files and directories up to 2 levels deep in {shown}, excluding hidden items:"
    )
    return header + "\n" + "\n".join(lines)


def _create(run: _Run, overwrite: bool) -> str:
    shown, path = run.path()
    command = {"command": "create", "path": path, "file_text": run.field("file_text")}
    if not overwrite:
        command["expected_text"] = None  # the engine's precondition: the file must be absent
    result = run.run(command)
    if not result["ok"]:
        exists = f"File {shown} already exists"
        if result["error"]["code"] == "INVALID_ARGUMENT":
            raise MemoryToolError("The `file_text` field must be a string.")
        raise run.fail(result, shown, {"CONFLICT": exists} if not overwrite else {})
    return f"File created successfully at: {shown}" + _evicted(result["value"])


def _not_a_file(shown: str) -> dict[str, str]:
    return {
        "NOT_FOUND": f"The path {shown} does not exist. Please provide a valid path.",
        "PATH_CONFLICT": f"The path {shown} is not a file.",
    }


def _str_replace(run: _Run, overwrite: bool) -> str:
    shown, path = run.path()
    old, new = run.field("old_str"), run.field("new_str")
    if not isinstance(old, str) or not isinstance(new, str):
        raise MemoryToolError("The `old_str` and `new_str` fields must be strings.")
    if not old:
        raise MemoryToolError("No replacement was performed: old_str must not be empty.")
    before = run.text_of(path)
    result = run.run({"command": "str_replace", "path": path, "old_str": old, "new_str": new})
    if not result["ok"]:
        code = result["error"]["code"]
        if code == "MATCH_NOT_FOUND":
            raise MemoryToolError(
                f"No replacement was performed, old_str `{old}` did not appear verbatim in {shown}."
            )
        if code == "MATCH_NOT_UNIQUE":
            # The SDK lists the line of every match, overlapping ones included.
            text, lines, at = before or "", [], (before or "").find(old)
            while at >= 0:
                lines.append(str(text.count("\n", 0, at) + 1))
                at = text.find(old, at + 1)
            raise MemoryToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{old}` in "
                f"lines: {', '.join(lines)}. Please ensure it is unique"
            )
        raise run.fail(result, shown, _not_a_file(shown))
    changed = (before or "")[: max((before or "").find(old), 0)].count("\n")
    after = (run.text_of(path) or "").split("\n")
    start, end = max(0, changed - 2), min(len(after), changed + 3)
    snippet = _numbered(after[start:end], start + 1)
    return (
        "The memory file has been edited. Here is the snippet showing the change "
        "(with line numbers):\n" + snippet + _evicted(result["value"])
    )


def _insert(run: _Run, overwrite: bool) -> str:
    shown, path = run.path()
    slot, text = run.field("insert_line"), run.field("insert_text")
    if not isinstance(text, str):
        raise MemoryToolError("The `insert_text` field must be a string.")
    if not is_safe_integer(slot):
        raise MemoryToolError(f"Invalid `insert_line` parameter: {slot}. It must be an integer.")
    # The SDK inserts the text, trailing newlines dropped, as one line: an empty text is
    # an empty line. The engine inserts the text's lines, so hand it exactly those.
    command = {
        "command": "insert",
        "path": path,
        "insert_line": slot,
        "insert_text": text.rstrip("\n") + "\n",
    }
    result = run.run(command)
    if not result["ok"]:
        if result["error"]["code"] == "INVALID_RANGE":
            lines = (run.text_of(path) or "").split("\n")
            count = len(lines) - 1 if lines[-1] == "" else len(lines)
            raise MemoryToolError(
                f"Invalid `insert_line` parameter: {slot}. It should be within the range "
                f"[0, {count}]."
            )
        raise run.fail(result, shown, _not_a_file(shown))
    return f"The file {shown} has been edited." + _evicted(result["value"])


def _delete(run: _Run, overwrite: bool) -> str:
    shown, path = run.path()
    result = run.run({"command": "delete", "path": path})
    if not result["ok"]:
        messages = {
            "ROOT_PROTECTED": "Cannot delete the /memories directory itself",
            "NOT_FOUND": f"The path {shown} does not exist",
        }
        raise run.fail(result, shown, messages)
    return f"Successfully deleted {shown}"


def _rename(run: _Run, overwrite: bool) -> str:
    old_shown, old = run.path("old_path")
    new_shown, new = run.path("new_path")
    if old == MEMORY_ROOT:
        raise MemoryToolError("Cannot rename the /memories directory itself")
    exists = f"The destination {new_shown} already exists"
    result = run.run({"command": "rename", "old_path": old, "new_path": new})
    if not result["ok"]:
        code = result["error"]["code"]
        # The SDK checks the destination first: a missing source onto a taken name says so.
        if code == "ROOT_PROTECTED" or (
            code == "NOT_FOUND" and run.run({"command": "view", "path": new})["ok"]
        ):
            raise MemoryToolError(exists)
        messages = {"ALREADY_EXISTS": exists, "NOT_FOUND": f"The path {old_shown} does not exist"}
        raise run.fail(result, new_shown, messages)
    return f"Successfully renamed {old_shown} to {new_shown}"


_HANDLERS: dict[str, Callable[[_Run, bool], str]] = {
    "view": _view,
    "create": _create,
    "str_replace": _str_replace,
    "insert": _insert,
    "delete": _delete,
    "rename": _rename,
}


def clear_all(execute: Execute) -> str:
    """Delete every file of the memory (the SDK tool's `clear_all_memory`)."""
    listing = execute({"command": "view", "path": MEMORY_ROOT})
    if not listing["ok"]:
        raise MemoryToolError(f"Memory could not be cleared: {listing['error']['message']}")
    for entry in listing["value"]["entries"]:
        result = execute({"command": "delete", "path": entry["path"]})
        if not result["ok"] and result["error"]["code"] != "NOT_FOUND":
            raise MemoryToolError(f"Memory could not be cleared: {result['error']['message']}")
    return "All memory cleared"
