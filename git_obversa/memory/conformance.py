"""The conformance kit: 17 cases any memory adapter must pass (SPEC.md §2).

`factory(scope, limits)` returns a memory (an object with `execute(command) -> result`);
`limits` is None or a `MemoryLimits`. The factory, and `execute`, may also be async: an
awaitable is awaited. No test framework is needed; failures come back as data.

The kit cleans up after itself: after each case, every memory it opened is discarded
(`discard()`, where the adapter has it: the Git memory removes a scope it created,
history and name included) or else emptied through its own commands.

    report = run_memory_conformance(lambda scope, limits: create_simple_memory(scope, limits))
    assert report == {"ok": True, "cases": 17, "failures": []}
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from git_obversa.memory.port import MemoryLimits

Factory = Callable[[str, "MemoryLimits | None"], Any]


async def _settled(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class _Case:
    """One open memory plus the helpers every case uses; a failed check raises."""

    def __init__(self, factory: Factory, scope: str) -> None:
        self.factory = factory
        self.scope = scope
        self.opened: list[Any] = []

    async def open(self, suffix: str = "", limits: MemoryLimits | None = None) -> Any:
        memory = await _settled(self.factory(self.scope + suffix, limits))
        self.opened.append(memory)
        return memory

    async def clean_up(self) -> None:
        """Leave nothing behind: discard each memory opened, or delete what it holds."""
        for memory in self.opened:
            try:
                if callable(getattr(memory, "discard", None)):
                    await _settled(memory.discard())
                    continue
                listing = await _settled(memory.execute({"command": "view", "path": "/memories"}))
                for entry in (listing.get("value") or {}).get("entries", []):
                    await _settled(memory.execute({"command": "delete", "path": entry["path"]}))
            except Exception:  # noqa: BLE001 - cleaning up never turns a pass into a failure
                continue

    async def succeed(self, memory: Any, command: dict[str, Any]) -> dict[str, Any]:
        result = await _settled(memory.execute(command))
        if not result.get("ok"):
            code = result.get("error", {}).get("code")
            raise AssertionError(f"Expected {command['command']} to succeed, received {code}.")
        return result

    async def fail(self, memory: Any, command: dict[str, Any], code: str) -> dict[str, Any]:
        result = await _settled(memory.execute(command))
        if result.get("ok"):
            raise AssertionError(f"Expected {command['command']} to fail with {code}.")
        actual = result.get("error", {}).get("code")
        if actual != code:
            raise AssertionError(f"Expected {code}, received {actual}.")
        return result


def _check(condition: Any, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _same(actual: Any, expected: Any, message: str) -> None:
    # Compared as canonical JSON: key order is free, but 1 and True differ (as in JSON).
    def canonical(value: Any) -> str:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)

    if canonical(actual) != canonical(expected):
        raise AssertionError(
            f"{message} Expected {json.dumps(expected, ensure_ascii=False)}, "
            f"received {json.dumps(actual, ensure_ascii=False, default=repr)}."
        )


def _create(path: str, text: str) -> dict[str, Any]:
    return {"command": "create", "path": "/memories/" + path, "file_text": text}


def _view(path: str, view_range: list[int] | None = None) -> dict[str, Any]:
    command: dict[str, Any] = {"command": "view", "path": "/memories/" + path}
    if view_range is not None:
        command["view_range"] = view_range
    return command


def _replace(path: str, old: str, new: str) -> dict[str, Any]:
    return {"command": "str_replace", "path": "/memories/" + path, "old_str": old, "new_str": new}


def _insert(path: str, line: int, text: str) -> dict[str, Any]:
    return {
        "command": "insert",
        "path": "/memories/" + path,
        "insert_line": line,
        "insert_text": text,
    }


def _rename(old: str, new: str) -> dict[str, Any]:
    return {"command": "rename", "old_path": old, "new_path": new}


async def _empty_root_view(case: _Case) -> None:
    memory = await case.open()
    result = await case.succeed(memory, {"command": "view", "path": "/memories"})
    expected = {
        "ok": True,
        "command": "view",
        "value": {"kind": "directory", "path": "/memories", "entries": []},
    }
    _same(result, expected, "The empty root view was not stable.")


async def _create_overwrite_and_ranged_view(case: _Case) -> None:
    memory = await case.open()
    created = await case.succeed(memory, _create("notes/plan.md", "first\nsecond\nthird\n"))
    _check(created["command"] == "create", "Create returned the wrong receipt.")
    _check(created["value"]["overwritten"] is False, "First create reported an overwrite.")
    viewed = await case.succeed(memory, _view("notes/plan.md", [2, -1]))
    _check(viewed["value"]["kind"] == "file", "File view returned the wrong result.")
    _same(viewed["value"]["lines"], {"start": 2, "end": 3, "total": 3}, "The line range was wrong.")
    _check(viewed["value"]["text"] == "second\nthird\n", "The ranged text was wrong.")
    again = await case.succeed(memory, _create("notes/plan.md", "new"))
    _check(again["value"]["overwritten"] is True, "Create did not overwrite.")


async def _sorted_immediate_entries(case: _Case) -> None:
    memory = await case.open()
    for path, text in (("z.md", "z"), ("a/file.txt", "a"), ("b.json", "{}")):
        await case.succeed(memory, _create(path, text))
    viewed = await case.succeed(memory, {"command": "view", "path": "/memories"})
    _check(viewed["value"]["kind"] == "directory", "Root was not a directory.")
    expected = [
        {"name": "a", "path": "/memories/a", "kind": "directory"},
        {"name": "b.json", "path": "/memories/b.json", "kind": "file"},
        {"name": "z.md", "path": "/memories/z.md", "kind": "file"},
    ]
    _same(viewed["value"]["entries"], expected, "Directory entries were not immediate and sorted.")


async def _unique_replacement(case: _Case) -> None:
    memory = await case.open()
    await case.succeed(memory, _create("a.md", "one two"))
    await case.succeed(memory, _replace("a.md", "one", "three"))
    await case.fail(memory, _replace("a.md", "missing", "x"), "MATCH_NOT_FOUND")
    await case.succeed(memory, _create("a.md", "x x"))
    await case.fail(memory, _replace("a.md", "x", "y"), "MATCH_NOT_UNIQUE")
    await case.fail(memory, _replace("a.md", "", "y"), "INVALID_ARGUMENT")


async def _ranged_view_and_insert_lines(case: _Case) -> None:
    memory = await case.open()
    original = "a\r\nc\rd\r\n"
    await case.succeed(memory, _create("a.md", original))
    full = await case.succeed(memory, _view("a.md"))
    _check(full["value"]["text"] == original, "A full view changed the stored line endings.")
    ranged = await case.succeed(memory, _view("a.md", [2, 2]))
    _same(
        ranged["value"]["lines"],
        {"start": 2, "end": 2, "total": 3},
        "The ranged view used different line numbers from insert.",
    )
    _check(
        ranged["value"]["text"] == "c\n",
        "The ranged view did not return the selected logical line.",
    )
    await case.succeed(memory, _insert("a.md", 2, "b"))
    viewed = await case.succeed(memory, _view("a.md"))
    _check(
        viewed["value"]["text"] == "a\nc\nb\nd\n",
        "Insert did not use the ranged view line numbers.",
    )
    await case.fail(memory, _insert("a.md", 5, "e"), "INVALID_RANGE")


async def _recursive_delete_and_protected_root(case: _Case) -> None:
    memory = await case.open()
    await case.succeed(memory, _create("a/one.md", "1"))
    await case.succeed(memory, _create("a/two.md", "22"))
    deleted = await case.succeed(memory, {"command": "delete", "path": "/memories/a"})
    expected = {
        "ok": True,
        "command": "delete",
        "value": {"path": "/memories/a", "kind": "directory", "deleted_files": 2, "freed_bytes": 3},
    }
    _same(deleted, expected, "Directory deletion returned the wrong receipt.")
    await case.fail(memory, {"command": "delete", "path": "/memories"}, "ROOT_PROTECTED")


async def _rename_without_overwrite(case: _Case) -> None:
    memory = await case.open()
    await case.succeed(memory, _create("a/one.md", "1"))
    renamed = await case.succeed(memory, _rename("/memories/a", "/memories/b"))
    _check(renamed["value"]["kind"] == "directory", "Directory rename failed.")
    _check(renamed["value"]["moved_files"] == 1, "Directory rename moved the wrong file count.")
    await case.succeed(memory, _create("c.md", "c"))
    await case.fail(memory, _rename("/memories/b/one.md", "/memories/c.md"), "ALREADY_EXISTS")
    await case.fail(memory, _rename("/memories", "/memories/root"), "ROOT_PROTECTED")


async def _path_and_extension_safety(case: _Case) -> None:
    memory = await case.open()
    await case.fail(memory, _create("../escape.md", "x"), "INVALID_PATH")
    await case.fail(memory, _create("a%2Fescape.md", "x"), "INVALID_PATH")
    await case.fail(memory, _create("code.ts", "x"), "INVALID_EXTENSION")
    await case.succeed(memory, _create("note.md", "x"))
    await case.fail(memory, _rename("/memories/note.md", "/memories/code.ts"), "INVALID_EXTENSION")
    root = {"command": "create", "path": "/memories", "file_text": "x"}
    await case.fail(memory, root, "ROOT_PROTECTED")


async def _path_conflict_safety(case: _Case) -> None:
    memory = await case.open()
    await case.succeed(memory, _create("file.md", "x"))
    await case.fail(memory, _create("file.md/child.txt", "y"), "PATH_CONFLICT")
    await case.succeed(memory, _create("dir/child.md", "y"))
    await case.fail(memory, _create("dir", "z"), "INVALID_EXTENSION")


async def _invalid_line_ranges(case: _Case) -> None:
    memory = await case.open()
    await case.succeed(memory, _create("a.md", "one\ntwo"))
    await case.fail(memory, _view("a.md", [0, 1]), "INVALID_RANGE")
    await case.fail(memory, _view("a.md", [1, 3]), "INVALID_RANGE")


async def _least_recently_written_eviction(case: _Case) -> None:
    two_files = MemoryLimits(max_files=2)
    memory = await case.open(limits=two_files)
    await case.succeed(memory, _create("a.md", "a"))
    await case.succeed(memory, _create("b.md", "b"))
    await case.succeed(memory, _view("a.md"))
    created = await case.succeed(memory, _create("c.md", "c"))
    _same(created["value"]["evicted"], ["/memories/a.md"], "View changed eviction recency.")
    await case.fail(memory, _view("a.md"), "NOT_FOUND")

    overwritten = await case.open("-overwrite", two_files)
    await case.succeed(overwritten, _create("a.md", "a"))
    await case.succeed(overwritten, _create("b.md", "b"))
    await case.succeed(overwritten, _create("a.md", "new"))
    created = await case.succeed(overwritten, _create("c.md", "c"))
    _same(
        created["value"]["evicted"], ["/memories/b.md"], "Overwrite did not refresh write recency."
    )

    renamed = await case.open("-rename", two_files)
    await case.succeed(renamed, _create("a.md", "a"))
    await case.succeed(renamed, _create("b.md", "b"))
    await case.succeed(renamed, _rename("/memories/a.md", "/memories/renamed.md"))
    created = await case.succeed(renamed, _create("c.md", "c"))
    _same(created["value"]["evicted"], ["/memories/renamed.md"], "Rename changed write recency.")


async def _total_byte_eviction(case: _Case) -> None:
    memory = await case.open(limits=MemoryLimits(4, 4, 3))
    await case.succeed(memory, _create("a.md", "aa"))
    await case.succeed(memory, _create("b.md", "bb"))
    created = await case.succeed(memory, _create("c.md", "cc"))
    _same(
        created["value"]["evicted"], ["/memories/a.md"], "Total-byte eviction chose the wrong file."
    )


async def _atomic_limit_failure(case: _Case) -> None:
    memory = await case.open(limits=MemoryLimits(4, 4, 1))
    await case.succeed(memory, _create("a.md", "safe"))
    await case.fail(memory, _create("b.md", "large"), "LIMIT_EXCEEDED")
    viewed = await case.succeed(memory, _view("a.md"))
    _check(viewed["value"]["kind"] == "file", "Atomic failure removed the old file.")
    _check(viewed["value"]["text"] == "safe", "Atomic failure changed the old file.")


async def _scope_isolation(case: _Case) -> None:
    first = await case.open("-first")
    second = await case.open("-second")
    await case.succeed(first, _create("a.md", "private"))
    await case.fail(second, _view("a.md"), "NOT_FOUND")


async def _rename_validates_every_path(case: _Case) -> None:
    memory = await case.open()
    # 914 bytes at the source; moved under a 128-byte name the path would be 1041 bytes.
    source = "a/" + "/".join(["s" * 128] * 6 + ["f" * 125 + ".md"])
    await case.succeed(memory, _create(source, "safe"))
    destination = "/memories/" + "b" * 128
    await case.fail(memory, _rename("/memories/a", destination), "INVALID_PATH")
    await case.succeed(memory, _view(source))


async def _utf8_byte_limits(case: _Case) -> None:
    memory = await case.open(limits=MemoryLimits(max_file_bytes=4))
    created = await case.succeed(memory, _create("a.md", "££"))
    _check(created["value"]["byte_length"] == 4, "Byte length was not UTF-8.")
    await case.fail(memory, _create("b.md", "£££"), "LIMIT_EXCEEDED")
    emoji = await case.succeed(memory, _create("emoji.md", "🧠"))
    _check(emoji["value"]["byte_length"] == 4, "A valid surrogate pair was rejected.")
    await case.fail(memory, _create("high.md", "\ud800"), "INVALID_ARGUMENT")
    await case.fail(memory, _replace("emoji.md", "\udc00", "x"), "INVALID_ARGUMENT")
    await case.fail(memory, _replace("emoji.md", "🧠", "\ud800"), "INVALID_ARGUMENT")
    await case.fail(memory, _insert("emoji.md", 0, "\udc00"), "INVALID_ARGUMENT")


async def _invalid_command_and_argument(case: _Case) -> None:
    memory = await case.open()
    result = await _settled(memory.execute({"command": "write"}))
    _check(not result.get("ok"), "An unknown command succeeded.")
    _check(result.get("command") == "write", "The failure did not retain the supplied command.")
    _check(
        result.get("error", {}).get("code") == "INVALID_COMMAND",
        "An unknown command returned the wrong code.",
    )
    result = await _settled(memory.execute({"command": "view"}))
    _check(
        not result.get("ok") and result.get("error", {}).get("code") == "INVALID_ARGUMENT",
        "A missing path returned the wrong code.",
    )


CASES: tuple[tuple[str, Callable[[_Case], Awaitable[None]]], ...] = (
    ("empty root view", _empty_root_view),
    ("create, overwrite, and ranged view", _create_overwrite_and_ranged_view),
    ("sorted immediate directory entries", _sorted_immediate_entries),
    ("unique string replacement", _unique_replacement),
    ("consistent ranged view and zero-based insertion lines", _ranged_view_and_insert_lines),
    ("recursive delete and protected root", _recursive_delete_and_protected_root),
    ("file and directory rename without overwrite", _rename_without_overwrite),
    ("path and extension safety", _path_and_extension_safety),
    ("path conflict safety", _path_conflict_safety),
    ("invalid line ranges", _invalid_line_ranges),
    ("deterministic least-recently-written eviction", _least_recently_written_eviction),
    ("total-byte eviction", _total_byte_eviction),
    ("limit failure is atomic and never evicts the target", _atomic_limit_failure),
    ("scope isolation", _scope_isolation),
    ("rename validates every moved path atomically", _rename_validates_every_path),
    ("UTF-8 byte limits", _utf8_byte_limits),
    ("invalid command and argument errors", _invalid_command_and_argument),
)


async def _run_cases(factory: Factory) -> dict[str, Any]:
    failures = []
    for index, (name, run_case) in enumerate(CASES):
        case = _Case(factory, f"memory-conformance-{index + 1}")
        try:
            await run_case(case)
        except Exception as error:  # a case that raises is one failure; the kit goes on
            failures.append({"case": name, "message": str(error) or type(error).__name__})
        await case.clean_up()
    return {"ok": not failures, "cases": len(CASES), "failures": failures}


def run_memory_conformance(factory: Factory) -> dict[str, Any]:
    """Run the 17 cases in order against memories from FACTORY: {"ok", "cases", "failures"}."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_run_cases(factory))
    # Called from inside an event loop (an async test): run the kit on its own loop.
    report: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: report.update(asyncio.run(_run_cases(factory))))
    thread.start()
    thread.join()
    return report


def assert_memory_conformance(factory: Factory) -> None:
    """Raise AssertionError naming every failed case, one per line."""
    report = run_memory_conformance(factory)
    if report["ok"]:
        return
    lines = [f"{failure['case']}: {failure['message']}" for failure in report["failures"]]
    count = len(report["failures"])
    raise AssertionError("\n".join([f"Memory adapter failed {count} conformance case(s).", *lines]))
