"""SPEC.md §9 scenarios 1–35 and 39–54: the memory port, against both adapters.

Every test takes `open_memory`, parametrised over the in-process adapter and the Git
adapter (a real repository in a temporary directory). Test names carry the scenario
number (`test_s07_...` is scenario 7).
"""

from __future__ import annotations

import pytest

from git_obversa import MemoryLimits, create_simple_memory
from tests.gitutil import make_repo


@pytest.fixture(params=["simple", "git"])
def open_memory(request, tmp_path):
    """open_memory(scope="port", limits=None) -> a memory of the adapter under test."""
    if request.param == "simple":
        return lambda scope="port", limits=None: create_simple_memory(scope, limits)
    git_memory = pytest.importorskip("git_obversa.memory.git_memory")
    repository = make_repo(tmp_path / "repo", commit=False)
    return lambda scope="port", limits=None: git_memory.open_git_memory(
        str(repository), scope, limits
    )


def create(memory, path, text):
    return memory.execute({"command": "create", "path": "/memories/" + path, "file_text": text})


def view(memory, path, view_range=None):
    command = {"command": "view", "path": path if path.startswith("/") else "/memories/" + path}
    if view_range is not None:
        command["view_range"] = view_range
    return memory.execute(command)


def replace(memory, path, old, new):
    return memory.execute(
        {"command": "str_replace", "path": "/memories/" + path, "old_str": old, "new_str": new}
    )


def insert(memory, path, line, text):
    return memory.execute(
        {"command": "insert", "path": "/memories/" + path, "insert_line": line, "insert_text": text}
    )


def rename(memory, old, new):
    return memory.execute({"command": "rename", "old_path": old, "new_path": new})


def ok(result):
    assert result["ok"], result
    return result["value"]


def error(result, code):
    assert result["ok"] is False, result
    assert result["error"]["code"] == code, result
    return result["error"]


def text_of(memory, path):
    return ok(view(memory, path))["text"]


def test_s01_empty_root_view(open_memory):
    result = open_memory().execute({"command": "view", "path": "/memories"})
    assert result == {
        "ok": True,
        "command": "view",
        "value": {"kind": "directory", "path": "/memories", "entries": []},
    }


def test_s02_to_s04_create_ranged_view_overwrite(open_memory):
    memory = open_memory()
    created = create(memory, "notes/plan.md", "first\nsecond\nthird\n")
    assert created == {
        "ok": True,
        "command": "create",
        "value": {
            "path": "/memories/notes/plan.md",
            "byte_length": 19,
            "evicted": [],
            "overwritten": False,
        },
    }
    ranged = ok(view(memory, "notes/plan.md", [2, -1]))
    assert ranged["text"] == "second\nthird\n"
    assert ranged["lines"] == {"start": 2, "end": 3, "total": 3}
    assert ok(create(memory, "notes/plan.md", "new"))["overwritten"] is True
    assert text_of(memory, "notes/plan.md") == "new"


def test_original_camel_case_field_names_are_aliases(open_memory):
    memory = open_memory()
    ok(memory.execute({"command": "create", "path": "/memories/a.md", "text": "one\ntwo\n"}))
    ranged = ok(memory.execute({"command": "view", "path": "/memories/a.md", "viewRange": [2, 2]}))
    assert ranged["text"] == "two\n"
    command = {"command": "str_replace", "path": "/memories/a.md", "oldText": "one"}
    ok(memory.execute({**command, "newText": "uno"}))
    command = {"command": "insert", "path": "/memories/a.md", "insertLine": 0}
    ok(memory.execute({**command, "text": "0"}))
    command = {"command": "rename", "oldPath": "/memories/a.md"}
    ok(memory.execute({**command, "newPath": "/memories/b.md"}))
    assert text_of(memory, "b.md") == "0\nuno\ntwo\n"
    # Ours wins over the alias, unless ours is None (absent and None are the same).
    both = {"command": "view", "path": "/memories/b.md", "view_range": [1, 1]}
    assert ok(memory.execute({**both, "viewRange": [2, 2]}))["text"] == "0\n"
    assert ok(memory.execute({**both, "view_range": None, "viewRange": [2, 2]}))["text"] == "uno\n"


def test_create_with_expected_text_is_a_compare_and_set(open_memory):
    memory = open_memory()

    def create_expecting(text, expected):
        command = {"command": "create", "path": "/memories/a.md", "file_text": text}
        return memory.execute({**command, "expected_text": expected})

    assert ok(create_expecting("one", None))["overwritten"] is False
    failed = error(create_expecting("two", None), "CONFLICT")
    assert failed == {
        "code": "CONFLICT",
        "message": "The file changed since it was read.",
        "path": "/memories/a.md",
    }
    error(create_expecting("two", "not what is stored"), "CONFLICT")
    assert text_of(memory, "a.md") == "one"
    assert ok(create_expecting("two", "one"))["overwritten"] is True
    assert text_of(memory, "a.md") == "two"


def test_s05_sorted_immediate_entries(open_memory):
    memory = open_memory()
    for path, text in (("z.md", "z"), ("a/file.txt", "a"), ("b.json", "{}")):
        ok(create(memory, path, text))
    assert ok(view(memory, "/memories"))["entries"] == [
        {"name": "a", "path": "/memories/a", "kind": "directory"},
        {"name": "b.json", "path": "/memories/b.json", "kind": "file"},
        {"name": "z.md", "path": "/memories/z.md", "kind": "file"},
    ]
    assert ok(view(memory, "a"))["entries"] == [
        {"name": "file.txt", "path": "/memories/a/file.txt", "kind": "file"}
    ]


def test_s06_to_s09_str_replace(open_memory):
    memory = open_memory()
    ok(create(memory, "a.md", "one two"))
    assert ok(replace(memory, "a.md", "one", "three")) == {
        "path": "/memories/a.md",
        "byte_length": 9,
        "evicted": [],
    }
    assert text_of(memory, "a.md") == "three two"
    failed = error(replace(memory, "a.md", "missing", "x"), "MATCH_NOT_FOUND")
    assert failed["path"] == "/memories/a.md"
    ok(create(memory, "a.md", "x x"))
    error(replace(memory, "a.md", "x", "y"), "MATCH_NOT_UNIQUE")
    error(replace(memory, "a.md", "", "y"), "INVALID_ARGUMENT")
    assert text_of(memory, "a.md") == "x x"


def test_str_replace_is_literal(open_memory):
    memory = open_memory()
    ok(create(memory, "a.md", "price: (x)"))
    ok(replace(memory, "a.md", "(x)", "$1 \\1"))
    assert text_of(memory, "a.md") == "price: $1 \\1"


def test_s10_to_s13_line_model(open_memory):
    memory = open_memory()
    original = "a\r\nc\rd\r\n"
    ok(create(memory, "a.md", original))
    full = ok(view(memory, "a.md"))
    assert full["text"] == original
    assert full["lines"] == {"start": 1, "end": 3, "total": 3}
    ranged = ok(view(memory, "a.md", [2, 2]))
    assert ranged["text"] == "c\n"
    assert ranged["lines"] == {"start": 2, "end": 2, "total": 3}
    assert ok(insert(memory, "a.md", 2, "b"))["byte_length"] == 8
    assert text_of(memory, "a.md") == "a\nc\nb\nd\n"
    failed = error(insert(memory, "a.md", 5, "e"), "INVALID_RANGE")
    assert failed["details"] == {"max_insert_line": 4}
    assert failed["message"] == "insert_line is outside the file."


def test_s14_s15_recursive_delete_and_protected_root(open_memory):
    memory = open_memory()
    ok(create(memory, "a/one.md", "1"))
    ok(create(memory, "a/two.md", "22"))
    ok(create(memory, "keep.md", "k"))
    deleted = memory.execute({"command": "delete", "path": "/memories/a"})
    assert deleted == {
        "ok": True,
        "command": "delete",
        "value": {"path": "/memories/a", "kind": "directory", "deleted_files": 2, "freed_bytes": 3},
    }
    error(view(memory, "a/one.md"), "NOT_FOUND")
    assert ok(view(memory, "/memories"))["entries"] == [
        {"name": "keep.md", "path": "/memories/keep.md", "kind": "file"}
    ]
    failed = error(memory.execute({"command": "delete", "path": "/memories"}), "ROOT_PROTECTED")
    assert failed["message"] == "The memory root cannot be deleted."
    error(memory.execute({"command": "delete", "path": "/memories/a"}), "NOT_FOUND")
    assert ok(memory.execute({"command": "delete", "path": "/memories/keep.md"})) == {
        "path": "/memories/keep.md",
        "kind": "file",
        "deleted_files": 1,
        "freed_bytes": 1,
    }


def test_s16_to_s18_rename(open_memory):
    memory = open_memory()
    ok(create(memory, "a/one.md", "1"))
    assert ok(rename(memory, "/memories/a", "/memories/b")) == {
        "old_path": "/memories/a",
        "new_path": "/memories/b",
        "kind": "directory",
        "moved_files": 1,
    }
    assert text_of(memory, "b/one.md") == "1"
    error(view(memory, "a"), "NOT_FOUND")
    ok(create(memory, "c.md", "c"))
    failed = error(rename(memory, "/memories/b/one.md", "/memories/c.md"), "ALREADY_EXISTS")
    assert failed["path"] == "/memories/c.md"
    assert text_of(memory, "c.md") == "c"
    failed = error(rename(memory, "/memories", "/memories/root"), "ROOT_PROTECTED")
    assert failed["path"] == "/memories"


def test_s19_s20_escapes_are_invalid_paths(open_memory):
    memory = open_memory()
    error(create(memory, "../escape.md", "x"), "INVALID_PATH")
    failed = error(create(memory, "a%2Fescape.md", "x"), "INVALID_PATH")
    assert failed["message"] == "The memory path contains an unsafe character."
    assert ok(view(memory, "/memories"))["entries"] == []


def test_s21_extension_rule(open_memory):
    memory = open_memory()
    failed = error(create(memory, "code.ts", "x"), "INVALID_EXTENSION")
    assert failed == {
        "code": "INVALID_EXTENSION",
        "message": "The file extension is not allowed.",
        "path": "/memories/code.ts",
    }
    ok(create(memory, "note.md", "x"))
    error(rename(memory, "/memories/note.md", "/memories/code.ts"), "INVALID_EXTENSION")
    ok(create(memory, "a.tar.md", "x"))
    error(create(memory, "a.MD", "x"), "INVALID_EXTENSION")
    for allowed in ("t.txt", "j.json", "p.py", "y.yaml", "y.yml"):
        ok(create(memory, allowed, "x"))


def test_s22_create_at_root_is_protected(open_memory):
    failed = error(
        open_memory().execute({"command": "create", "path": "/memories", "file_text": "x"}),
        "ROOT_PROTECTED",
    )
    assert failed["message"] == "The memory root cannot be a file."


def test_s23_s24_path_conflicts(open_memory):
    memory = open_memory()
    ok(create(memory, "file.md", "x"))
    error(create(memory, "file.md/child.txt", "y"), "PATH_CONFLICT")
    ok(create(memory, "dir/child.md", "y"))
    error(create(memory, "dir", "z"), "INVALID_EXTENSION")
    failed = error(create(memory, "dir/child.md/x.md", "z"), "PATH_CONFLICT")
    assert failed["path"] == "/memories/dir/child.md/x.md"
    assert text_of(memory, "file.md") == "x"


def test_s25_invalid_line_ranges(open_memory):
    memory = open_memory()
    ok(create(memory, "a.md", "one\ntwo"))
    error(view(memory, "a.md", [0, 1]), "INVALID_RANGE")
    failed = error(view(memory, "a.md", [1, 3]), "INVALID_RANGE")
    assert failed["details"] == {"total_lines": 2}
    assert failed["message"] == "The requested line range is outside the file."
    error(view(memory, "a.md", [2, 1]), "INVALID_RANGE")


def test_s26_view_does_not_refresh_recency(open_memory):
    memory = open_memory(limits={"max_files": 2})
    ok(create(memory, "a.md", "a"))
    ok(create(memory, "b.md", "b"))
    ok(view(memory, "a.md"))
    assert ok(create(memory, "c.md", "c"))["evicted"] == ["/memories/a.md"]
    error(view(memory, "a.md"), "NOT_FOUND")


def test_s27_overwrite_refreshes_recency(open_memory):
    memory = open_memory(limits=MemoryLimits(max_files=2))
    ok(create(memory, "a.md", "a"))
    ok(create(memory, "b.md", "b"))
    ok(create(memory, "a.md", "new"))
    assert ok(create(memory, "c.md", "c"))["evicted"] == ["/memories/b.md"]


def test_str_replace_and_insert_refresh_recency(open_memory):
    memory = open_memory(limits=MemoryLimits(max_files=3))
    for name in ("a", "b", "c"):
        ok(create(memory, f"{name}.md", name))
    ok(replace(memory, "a.md", "a", "A"))
    ok(insert(memory, "b.md", 0, "B"))
    assert ok(create(memory, "d.md", "d"))["evicted"] == ["/memories/c.md"]


def test_s28_rename_keeps_recency(open_memory):
    memory = open_memory(limits={"maxFiles": 2})
    ok(create(memory, "a.md", "a"))
    ok(create(memory, "b.md", "b"))
    ok(rename(memory, "/memories/a.md", "/memories/renamed.md"))
    assert ok(create(memory, "c.md", "c"))["evicted"] == ["/memories/renamed.md"]


def test_s29_total_byte_eviction(open_memory):
    memory = open_memory(limits=MemoryLimits(4, 4, 3))
    ok(create(memory, "a.md", "aa"))
    ok(create(memory, "b.md", "bb"))
    assert ok(create(memory, "c.md", "cc"))["evicted"] == ["/memories/a.md"]
    assert [entry["name"] for entry in ok(view(memory, "/memories"))["entries"]] == [
        "b.md",
        "c.md",
    ]


def test_s30_limit_failure_is_atomic(open_memory):
    memory = open_memory(limits=MemoryLimits(4, 4, 1))
    ok(create(memory, "a.md", "safe"))
    failed = error(create(memory, "b.md", "large"), "LIMIT_EXCEEDED")
    assert failed["path"] == "/memories/b.md"
    assert failed["details"] == {"byte_length": 5, "max_file_bytes": 4, "max_total_bytes": 4}
    assert text_of(memory, "a.md") == "safe"
    error(view(memory, "b.md"), "NOT_FOUND")


def test_growing_a_file_evicts_the_least_recently_written_other(open_memory):
    memory = open_memory(limits=MemoryLimits(max_file_bytes=4, max_total_bytes=6, max_files=3))
    ok(create(memory, "a.md", "aa"))
    ok(create(memory, "b.md", "bbbb"))
    # a is older than b, but a is the target: b goes to make room for a's 4 bytes.
    assert ok(replace(memory, "a.md", "aa", "aaaa"))["evicted"] == ["/memories/b.md"]
    assert text_of(memory, "a.md") == "aaaa"


def test_s31_scope_isolation(open_memory):
    first, second = open_memory("scope-x"), open_memory("scope-y")
    ok(create(first, "a.md", "private"))
    error(view(second, "a.md"), "NOT_FOUND")
    ok(create(second, "a.md", "other"))
    assert text_of(first, "a.md") == "private"


def test_s32_rename_validates_every_moved_path(open_memory):
    memory = open_memory()
    source = "a/" + "/".join(["s" * 128] * 6 + ["f" * 125 + ".md"])
    assert len(("/memories/" + source).encode()) == 914
    ok(create(memory, source, "safe"))
    failed = error(rename(memory, "/memories/a", "/memories/" + "b" * 128), "INVALID_PATH")
    assert failed["details"] == {"max_bytes": 1024}
    assert len(failed["path"].encode()) == 1041
    assert text_of(memory, source) == "safe"
    error(view(memory, "b" * 128), "NOT_FOUND")


def test_s33_limits_count_utf8_bytes(open_memory):
    memory = open_memory(limits=MemoryLimits(max_file_bytes=4))
    assert ok(create(memory, "a.md", "££"))["byte_length"] == 4
    error(create(memory, "b.md", "£££"), "LIMIT_EXCEEDED")
    assert ok(create(memory, "emoji.md", "🧠"))["byte_length"] == 4
    assert ok(view(memory, "emoji.md"))["byte_length"] == 4


def test_s34_lone_surrogates_are_invalid_arguments(open_memory):
    memory = open_memory()
    ok(create(memory, "emoji.md", "🧠"))
    error(create(memory, "high.md", "\ud800"), "INVALID_ARGUMENT")
    error(replace(memory, "emoji.md", "\udc00", "x"), "INVALID_ARGUMENT")
    error(replace(memory, "emoji.md", "🧠", "\ud800"), "INVALID_ARGUMENT")
    error(insert(memory, "emoji.md", 0, "\udc00"), "INVALID_ARGUMENT")
    assert text_of(memory, "emoji.md") == "🧠"
    error(view(memory, "high.md"), "NOT_FOUND")


def test_s35_invalid_command_and_missing_path(open_memory):
    memory = open_memory()
    result = memory.execute({"command": "write"})
    assert result["ok"] is False
    assert result["command"] == "write"
    assert result["error"]["code"] == "INVALID_COMMAND"
    result = memory.execute({"command": "view"})
    assert result["command"] == "view"
    assert result["error"] == {
        "code": "INVALID_ARGUMENT",
        "message": "A memory path must be a string.",
    }
    for not_a_command in ("view", ["view"], None, {"command": 3}):
        result = memory.execute(not_a_command)
        assert result["command"] == "unknown"
        assert result["error"]["code"] == "INVALID_COMMAND"


def test_s39_existence_is_checked_before_the_range(open_memory):
    error(view(open_memory(), "missing.md", [1, 1]), "NOT_FOUND")


def test_s40_directory_view_has_no_range(open_memory):
    memory = open_memory()
    ok(create(memory, "dir/a.md", "x"))
    for path in ("dir", "/memories"):
        failed = error(view(memory, path, [1, 1]), "INVALID_RANGE")
        assert failed["message"] == "A directory view cannot have a line range."


def test_s41_empty_file(open_memory):
    memory = open_memory()
    assert ok(create(memory, "empty.md", ""))["byte_length"] == 0
    assert ok(view(memory, "empty.md")) == {
        "kind": "file",
        "path": "/memories/empty.md",
        "text": "",
        "byte_length": 0,
        "lines": {"start": 0, "end": 0, "total": 0},
    }
    error(view(memory, "empty.md", [1, -1]), "INVALID_RANGE")


def test_s42_ranged_view_trailing_newline(open_memory):
    memory = open_memory()
    ok(create(memory, "a.md", "one\ntwo"))
    assert ok(view(memory, "a.md", [1, 1]))["text"] == "one\n"
    last = ok(view(memory, "a.md", [2, 2]))
    assert last["text"] == "two"
    assert last["byte_length"] == 3


def test_s43_malformed_view_ranges(open_memory):
    memory = open_memory()
    ok(create(memory, "a.md", "one\ntwo"))
    failed = error(view(memory, "a.md", [1]), "INVALID_RANGE")
    assert failed["message"] == "view_range must contain two line numbers."
    failed = error(view(memory, "a.md", [1.5, 2]), "INVALID_RANGE")
    assert failed["message"] == "Line numbers must be safe integers."
    error(view(memory, "a.md", [True, 2]), "INVALID_RANGE")
    error(view(memory, "a.md", [1, 2**53]), "INVALID_RANGE")


def test_s44_path_rules(open_memory):
    memory = open_memory()
    long_path = "/memories/" + "/".join(["a" * 100] * 10) + "/cc.md"
    assert len(long_path.encode()) == 1025
    failed = error(view(memory, long_path), "INVALID_PATH")
    assert failed == {
        "code": "INVALID_PATH",
        "message": "The memory path is too long.",
        "path": long_path,
        "details": {"max_bytes": 1024},
    }
    error(view(memory, "/memories/"), "INVALID_PATH")
    failed = error(view(memory, "/memoriesx/a.md"), "INVALID_PATH")
    assert failed["message"] == "The path must be inside /memories."
    error(view(memory, "/memories/a\\b.md"), "INVALID_PATH")
    for bad in ("a//b.md", "_x.md", ".hidden.md", "café.md", "with space.md", "x" * 129 + ".md"):
        failed = error(create(memory, bad, "x"), "INVALID_PATH")
        assert failed["path"] == "/memories/" + bad
    error(create(memory, "tab\there.md", "x"), "INVALID_PATH")
    ok(create(memory, "x" * 125 + ".md", "128-character segment"))


def test_s45_str_replace_targets(open_memory):
    memory = open_memory()
    ok(create(memory, "dir/a.md", "x"))
    failed = error(replace(memory, "dir", "x", "y"), "PATH_CONFLICT")
    assert failed["message"] == "The memory path is a directory."
    error(replace(memory, "missing.md", "x", "y"), "NOT_FOUND")
    error(insert(memory, "dir", 0, "x"), "PATH_CONFLICT")
    error(insert(memory, "missing.md", 0, "x"), "NOT_FOUND")


def test_s46_uniqueness_is_non_overlapping(open_memory):
    memory = open_memory()
    ok(create(memory, "a.md", "aaa"))
    ok(replace(memory, "a.md", "aa", "b"))
    assert text_of(memory, "a.md") == "ba"


def test_s47_insert_normalises_and_checks_the_slot(open_memory):
    memory = open_memory()
    ok(create(memory, "a.md", "a\r\nb"))
    ok(insert(memory, "a.md", 0, "x\ny"))
    assert text_of(memory, "a.md") == "x\ny\na\nb\n"
    failed = error(insert(memory, "a.md", -1, "z"), "INVALID_RANGE")
    assert failed["message"] == "insert_line must be a zero-based line slot."
    ok(create(memory, "empty.md", ""))
    ok(insert(memory, "empty.md", 0, ""))
    assert text_of(memory, "empty.md") == "\n"


def test_s48_directory_cannot_move_into_itself(open_memory):
    memory = open_memory()
    ok(create(memory, "a/one.md", "1"))
    error(rename(memory, "/memories/a", "/memories/a/b"), "CONFLICT")
    assert text_of(memory, "a/one.md") == "1"


def test_s49_rename_below_a_file(open_memory):
    memory = open_memory()
    ok(create(memory, "x.md", "x"))
    ok(create(memory, "file.md", "f"))
    failed = error(rename(memory, "/memories/x.md", "/memories/file.md/x.md"), "PATH_CONFLICT")
    assert failed["message"] == "A destination parent is a file."
    # The source itself blocks too: a file cannot become a file below its own name.
    error(rename(memory, "/memories/x.md", "/memories/x.md/y.md"), "PATH_CONFLICT")
    assert text_of(memory, "x.md") == "x"


def test_s50_rename_to_itself(open_memory):
    memory = open_memory()
    ok(create(memory, "a.md", "a"))
    error(rename(memory, "/memories/a.md", "/memories/a.md"), "ALREADY_EXISTS")
    error(rename(memory, "/memories/missing.md", "/memories/b.md"), "NOT_FOUND")


def test_s51_default_file_limit(open_memory):
    failed = error(create(open_memory(), "big.md", "x" * 65537), "LIMIT_EXCEEDED")
    assert failed["details"] == {
        "byte_length": 65537,
        "max_file_bytes": 65536,
        "max_total_bytes": 1048576,
    }


def test_s52_default_file_count(open_memory):
    memory = open_memory()
    for number in range(256):
        assert ok(create(memory, f"{number:03}.md", ""))["evicted"] == []
    assert ok(create(memory, "256.md", ""))["evicted"] == ["/memories/000.md"]
    assert len(ok(view(memory, "/memories"))["entries"]) == 256


def test_s53_default_total_bytes(open_memory):
    memory = open_memory()
    for number in range(16):
        assert ok(create(memory, f"{number:02}.md", "x" * 65536))["evicted"] == []
    assert ok(create(memory, "16.md", "y" * 65536))["evicted"] == ["/memories/00.md"]


@pytest.mark.parametrize(
    "scope, limits, message",
    [
        ("", None, "scope must be a non-empty"),
        ("   ", None, "scope must be a non-empty"),
        ("\ud800", None, "scope must be a non-empty"),
        ("tab\there", None, "scope must be a non-empty"),
        ("ok", {"max_files": 0}, "max_files must be a positive safe integer"),
        ("ok", {"maxFileBytes": 1.5}, "max_file_bytes must be a positive safe integer"),
    ],
)
def test_s54_invalid_scope_and_limits(open_memory, scope, limits, message):
    with pytest.raises(TypeError, match=message):
        open_memory(scope, limits)


def test_s54_emoji_scope_is_valid(open_memory):
    memory = open_memory("emoji-🧠")
    assert memory.scope == "emoji-🧠"
    ok(create(memory, "a.md", "x"))
